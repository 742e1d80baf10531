// libFuzzer target: model::ParsePriceTable on arbitrary bytes (the body of
// PUT /v1/prices). A refusal names its field in valid UTF-8. An accepted
// table has no negative price and no line twice, and printed back as YAML
// (prices as FormatMoney writes them) parses to the same table.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "fuzz_check.h"
#include "model/usage.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace berth::model;
  auto table = ParsePriceTable(berth::fuzz::AsText(data, size));
  if (!table) {
    berth::fuzz::CheckRefusal(table.error());
    return 0;
  }
  FUZZ_REQUIRE(table->default_micros_per_gpu_hour >= 0);
  std::set<std::pair<std::string, std::string>> lines;
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "currency" << YAML::Value << table->currency;
  out << YAML::Key << "default" << YAML::Value << FormatMoney(table->default_micros_per_gpu_hour);
  out << YAML::Key << "prices" << YAML::Value << YAML::BeginSeq;
  for (const auto& e : table->prices) {
    FUZZ_REQUIRE(e.micros_per_gpu_hour >= 0 && !e.model.empty() && !e.pool.empty());
    FUZZ_REQUIRE(lines.emplace(e.model, e.pool).second);
    FUZZ_REQUIRE(ParseMoney(FormatMoney(e.micros_per_gpu_hour), "x") == e.micros_per_gpu_hour);
    out << YAML::BeginMap << YAML::Key << "model" << YAML::Value << e.model << YAML::Key << "pool"
        << YAML::Value << e.pool << YAML::Key << "per_gpu_hour" << YAML::Value
        << FormatMoney(e.micros_per_gpu_hour) << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  FUZZ_REQUIRE(out.good());
  auto again = ParsePriceTable(out.c_str());
  FUZZ_REQUIRE(again.has_value() && *again == *table);
  return 0;
}
