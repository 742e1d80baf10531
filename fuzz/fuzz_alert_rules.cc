// libFuzzer target: model::ParseAlertRules on arbitrary bytes (the body of
// PUT /v1/alert-rules). A refusal names its field in valid UTF-8, and so
// does the apply-time check. An accepted document has unique rule and sink
// names, rules that name only defined sinks, values within their ranges,
// and a JSON form (what GET /v1/alert-rules serves) that can be written.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_check.h"
#include "model/alert_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace berth::model;
  auto rules = ParseAlertRules(berth::fuzz::AsText(data, size));
  if (!rules) {
    berth::fuzz::CheckRefusal(rules.error());
    return 0;
  }
  std::set<std::string> sinks;
  for (const auto& s : rules->sinks) {
    FUZZ_REQUIRE(sinks.insert(s.name).second);
    FUZZ_REQUIRE(s.url.starts_with("http://") || s.url.starts_with("https://"));
    FUZZ_REQUIRE(s.timeout_ms > 0 && s.timeout_ms <= 60'000);
  }
  std::set<std::string> names;
  for (const auto& r : rules->rules) {
    FUZZ_REQUIRE(names.insert(r.name).second);
    FUZZ_REQUIRE(r.severity != AlertSeverity::kUnknown);
    for (const auto& s : r.sinks) FUZZ_REQUIRE(rules->FindSink(s) != nullptr);
    FUZZ_REQUIRE(r.for_ms >= 0 && r.threshold_ms >= 0 && r.window_ms >= 0);
    if (r.kind == AlertRuleKind::kIdleAllocation) {
      FUZZ_REQUIRE(r.threshold_percent >= 1 && r.threshold_percent <= 100);
    }
  }
  (void)AlertRulesJson(*rules).dump();  // throws on a byte that is not UTF-8
  if (auto st = CheckNewAlertRules(*rules); !st) berth::fuzz::CheckRefusal(st.error());
  return 0;
}
