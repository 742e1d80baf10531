// libFuzzer target: model::ParsePolicy on arbitrary bytes. A refusal names
// its field in valid UTF-8. An accepted policy must print (PolicyToYaml) to
// valid UTF-8 that parses again to the same normal form: what berthd stores
// must be what it reads back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "model/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto policy = berth::model::ParsePolicy(berth::fuzz::AsText(data, size));
  if (!policy) {
    berth::fuzz::CheckRefusal(policy.error());
    return 0;
  }
  const std::string printed = berth::model::PolicyToYaml(*policy);
  FUZZ_REQUIRE(berth::ValidUtf8(printed));
  auto again = berth::model::ParsePolicy(printed);
  FUZZ_REQUIRE(again.has_value());
  FUZZ_REQUIRE(berth::model::PolicyToYaml(*again) == printed);
  return 0;
}
