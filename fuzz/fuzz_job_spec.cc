// libFuzzer target: model::ParseJobSpec on arbitrary bytes (YAML, and JSON,
// which is YAML). It must return a spec or an error, never crash, hang or
// trip a sanitizer; an accepted spec must satisfy the parser's own limits,
// and its stored JSON form must read back to the same spec (the load
// profile included) and print the same again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/job.h"
#include "model/json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): bytes as text
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = berth::model::ParseJobSpec(text);
  if (spec) {
    if (spec->replicas < 1 || spec->replicas > berth::model::kMaxReplicas) std::abort();
    if (spec->name.empty()) std::abort();
    if (spec->load.util_pct > 100 || spec->load.idle_util_pct > 100 ||
        spec->load.memory_pct > 100) {
      std::abort();
    }
    const auto printed = berth::model::ToJson(*spec);
    const auto again = berth::model::JobSpecFromJson(printed);
    if (again.load != spec->load || berth::model::ToJson(again) != printed) std::abort();
  } else if (spec.error().code != berth::Code::kInvalidArgument) {
    std::abort();
  }
  return 0;
}
