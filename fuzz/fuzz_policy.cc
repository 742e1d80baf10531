// libFuzzer target: model::ParsePolicy on arbitrary bytes. An accepted
// policy must print (PolicyToYaml) to a document that parses again to the
// same normal form: what berthd stores must be what it reads back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): bytes as text
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto policy = berth::model::ParsePolicy(text);
  if (!policy) {
    if (policy.error().code != berth::Code::kInvalidArgument) std::abort();
    return 0;
  }
  const std::string printed = berth::model::PolicyToYaml(*policy);
  auto again = berth::model::ParsePolicy(printed);
  if (!again) std::abort();
  if (berth::model::PolicyToYaml(*again) != printed) std::abort();
  return 0;
}
