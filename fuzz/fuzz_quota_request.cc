// libFuzzer target: the body of POST /v1/quota-requests
// (server::ParseQuotaRequestBody) on arbitrary bytes. A refusal names its
// field in valid UTF-8. An accepted request names a queue and a quota
// resource, its amounts are not negative and read back exactly from the
// form berthd shows them in (FormatQuotaAmount), its weight is in range,
// and it can be written as JSON.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/quota_request_decode.h"
#include "fuzz_check.h"
#include "model/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace berth::model;
  auto r = berth::server::ParseQuotaRequestBody(berth::fuzz::AsText(data, size));
  if (!r) {
    berth::fuzz::CheckRefusal(r.error());
    return 0;
  }
  FUZZ_REQUIRE(!r->queue.empty());
  auto key = ParseResourceKey(r->resource);
  FUZZ_REQUIRE(key.has_value());
  nlohmann::json shown{{"queue", r->queue}, {"resource", r->resource}, {"reason", r->reason}};
  for (const auto& [name, v] :
       {std::pair{"guaranteed", r->guaranteed}, std::pair{"borrow_limit", r->borrow_limit},
        std::pair{"lending_limit", r->lending_limit}}) {
    if (!v) continue;
    FUZZ_REQUIRE(*v >= 0);
    const std::string text = FormatQuotaAmount(key->kind, *v);
    FUZZ_REQUIRE(ParseQuotaAmount(key->kind, text, name) == *v);
    shown[name] = text;
  }
  if (r->weight) FUZZ_REQUIRE(*r->weight >= 1 && *r->weight <= kMaxWeight);
  (void)shown.dump();  // throws on a byte that is not UTF-8
  return 0;
}
