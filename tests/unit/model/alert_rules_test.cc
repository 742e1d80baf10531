// The alert rules parser: a good document parses with its defaults filled
// in, and each bad field is refused with an error that names it.
#include "model/alert_rules.h"

#include <gtest/gtest.h>

namespace berth::model {
namespace {

TEST(AlertRules, ParsesEveryKindWithSinks) {
  auto r = ParseAlertRules(R"(
sinks:
  - name: ops
    type: webhook
    url: https://hooks.example/berth
    secret_file: /etc/berth/hook-token
    timeout: 3s
rules:
  - {name: gpus, kind: gpu_health, severity: critical, sinks: [ops]}
  - {name: nodes, kind: node_not_ready, for: 90s}
  - {name: waits, kind: queue_wait, queue: vision/training, threshold: 30m, sinks: [ops]}
  - {name: money, kind: budget, enabled: false}
  - {name: idle, kind: idle_allocation, threshold: 7, window: 1h, severity: info}
)");
  ASSERT_TRUE(r.has_value()) << r.error().field << ": " << r.error().message;
  ASSERT_EQ(r->rules.size(), 5U);
  ASSERT_EQ(r->sinks.size(), 1U);
  EXPECT_EQ(r->sinks[0].timeout_ms, 3000);
  EXPECT_EQ(r->sinks[0].header, "Authorization");
  EXPECT_EQ(r->rules[0].sinks, std::vector<std::string>{"ops"});
  EXPECT_EQ(r->rules[1].for_ms, 90'000);
  EXPECT_EQ(r->rules[1].severity, AlertSeverity::kWarning);
  EXPECT_EQ(r->rules[2].queue, "vision/training");
  EXPECT_EQ(r->rules[2].threshold_ms, 30 * 60'000);
  EXPECT_FALSE(r->rules[3].enabled);
  EXPECT_EQ(r->rules[4].threshold_percent, 7);
  EXPECT_EQ(r->rules[4].window_ms, 3'600'000);
  EXPECT_EQ(r->FirstEnabled(AlertRuleKind::kBudget), nullptr);
  EXPECT_EQ(r->FirstEnabled(AlertRuleKind::kGpuHealth)->name, "gpus");
}

TEST(AlertRules, DefaultsAreDocumentedOnes) {
  const AlertRules d = DefaultAlertRules();
  ASSERT_EQ(d.rules.size(), 6U);
  ASSERT_NE(d.FirstEnabled(AlertRuleKind::kGpuHealth), nullptr);
  EXPECT_EQ(d.FirstEnabled(AlertRuleKind::kGpuHealth)->severity, AlertSeverity::kCritical);
  ASSERT_NE(d.FirstEnabled(AlertRuleKind::kNodeNotReady), nullptr);
  EXPECT_EQ(d.FirstEnabled(AlertRuleKind::kNodeNotReady)->for_ms, 120'000);
  EXPECT_EQ(d.FirstEnabled(AlertRuleKind::kNodeNotReady)->severity, AlertSeverity::kWarning);
  ASSERT_NE(d.FirstEnabled(AlertRuleKind::kBudget), nullptr);
  EXPECT_EQ(d.FirstEnabled(AlertRuleKind::kQueueWait), nullptr);
  EXPECT_EQ(d.FirstEnabled(AlertRuleKind::kIdleAllocation), nullptr);
  const AlertRule* slo = d.FirstEnabled(AlertRuleKind::kServiceSlo);
  ASSERT_NE(slo, nullptr);
  EXPECT_EQ(slo->severity, AlertSeverity::kWarning);
  EXPECT_EQ(slo->service, "*");
  EXPECT_EQ(slo->burn_milli, 10'000);
  EXPECT_EQ(slo->window_ms, 300'000);
}

TEST(AlertRules, AServiceSloRuleTakesABurnRateAWindowAndAService) {
  auto r = ParseAlertRules(
      "rules: [{name: page, kind: service_slo, severity: critical, service: ml/coder, threshold: "
      "14.4, window: 1h}]");
  ASSERT_TRUE(r.has_value()) << r.error().field << ": " << r.error().message;
  EXPECT_EQ(r->rules[0].kind, AlertRuleKind::kServiceSlo);
  EXPECT_EQ(r->rules[0].service, "ml/coder");
  EXPECT_EQ(r->rules[0].burn_milli, 14'400);
  EXPECT_EQ(r->rules[0].window_ms, 3'600'000);
  EXPECT_EQ(AlertKindOfRule(AlertRuleKind::kServiceSlo), AlertKind::kServiceSlo);
  EXPECT_EQ(AlertRulesJson(*r)["rules"][0]["threshold"], 14.4);
  for (const auto& [rule, field] : std::vector<std::pair<std::string, std::string>>{
           {"{name: s, kind: service_slo, threshold: 0.5}", "rules[0].threshold"},
           {"{name: s, kind: service_slo, threshold: fast}", "rules[0].threshold"},
           {"{name: s, kind: service_slo, window: 2h}", "rules[0].window"},
           {"{name: s, kind: service_slo, window: 5s}", "rules[0].window"},
           {"{name: s, kind: service_slo, service: coder}", "rules[0].service"},
           {"{name: s, kind: service_slo, queue: ml/a}", "rules[0].queue"},
           {"{name: s, kind: queue_wait, threshold: 1m, service: ml/a}", "rules[0].service"}}) {
    auto bad = ParseAlertRules("rules: [" + rule + "]");
    ASSERT_FALSE(bad.has_value()) << rule;
    EXPECT_EQ(bad.error().field, field) << rule << ": " << bad.error().message;
  }
}

struct Bad {
  const char* yaml;
  const char* field;
};

// A window under a minute parses (a stored document applied before the
// check must still load) but is refused when applied, naming the rule.
TEST(AlertRules, ANewIdleWindowUnderAMinuteIsRefusedByName) {
  auto stored = ParseAlertRules(
      "rules:\n  - {name: busy, kind: budget}\n  - {name: idle, kind: idle_allocation, window: "
      "30s}");
  ASSERT_TRUE(stored.has_value()) << stored.error().message;
  EXPECT_EQ(stored->rules[1].window_ms, 30'000);
  auto refused = CheckNewAlertRules(*stored);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kInvalidArgument);
  EXPECT_EQ(refused.error().field, "rules[1].window");
  EXPECT_NE(refused.error().message.find("at least 1m"), std::string::npos);
  auto minute = ParseAlertRules("rules: [{name: idle, kind: idle_allocation, window: 1m}]");
  ASSERT_TRUE(minute.has_value());
  EXPECT_TRUE(CheckNewAlertRules(*minute).has_value());
}

// A secret goes in the clear only where the sink says so, and the word is
// refused where it would mean nothing. Checked at apply: a stored document
// from before still loads (the deliverer then sends it no secret).
TEST(AlertRules, ANewSinkSendsItsSecretOverPlainHttpOnlyWhenItSaysSo) {
  struct Case {
    std::string yaml;
    std::string field;  // "": accepted
  };
  const std::vector<Case> cases = {
      {"sinks: [{name: s, url: 'http://hooks', secret_file: t}]", "sinks[0].url"},
      {"sinks: [{name: s, url: 'https://hooks', secret_file: t}]", ""},
      {"sinks: [{name: s, url: 'http://hooks'}]", ""},
      {"sinks: [{name: s, url: 'http://hooks', secret_file: t, send_secret_over_http: true}]", ""},
      {"sinks: [{name: s, url: 'http://hooks', send_secret_over_http: true}]",
       "sinks[0].send_secret_over_http"},
      {"sinks: [{name: s, url: 'https://hooks', secret_file: t, send_secret_over_http: true}]",
       "sinks[0].send_secret_over_http"},
      {"sinks: [{name: a, url: 'https://a'}, {name: s, url: 'http://hooks', secret_file: t}]",
       "sinks[1].url"},
  };
  for (const auto& c : cases) {
    auto r = ParseAlertRules(c.yaml + "\nrules: []");
    ASSERT_TRUE(r.has_value()) << c.yaml << ": " << r.error().message;
    auto st = CheckNewAlertRules(*r);
    if (c.field.empty()) {
      EXPECT_TRUE(st.has_value()) << c.yaml << ": " << st.error().message;
      continue;
    }
    ASSERT_FALSE(st.has_value()) << c.yaml;
    EXPECT_EQ(st.error().field, c.field) << c.yaml << " -> " << st.error().message;
  }
  auto plain =
      ParseAlertRules("sinks: [{name: s, url: 'http://hooks', secret_file: t}]\nrules: []");
  auto st = CheckNewAlertRules(*plain);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message.find("use an https:// URL, or set send_secret_over_http: true"),
            std::string::npos)
      << st.error().message;
  auto flagged = ParseAlertRules(
      "sinks: [{name: s, url: 'http://h', secret_file: t, send_secret_over_http: true}]\n"
      "rules: []");
  ASSERT_TRUE(flagged.has_value()) << flagged.error().message;
  EXPECT_EQ(AlertRulesJson(*flagged)["sinks"][0]["send_secret_over_http"], true);
}

TEST(AlertRules, EachBadFieldNamesItself) {
  const Bad cases[] = {
      {"rules: 3", "rules"},
      {"sinks: []", "rules"},
      {"rulez: []\nrules: []", "rulez"},
      {"rules: [{kind: budget}]", "rules[0].name"},
      {"rules: [{name: a}]", "rules[0].kind"},
      {"rules: [{name: a, kind: disk_full}]", "rules[0].kind"},
      {"rules: [{name: a, kind: budget, severity: page}]", "rules[0].severity"},
      // The name an unreadable stored severity shows as is none a rule may use.
      {"rules: [{name: a, kind: budget, severity: unknown}]", "rules[0].severity"},
      {"rules: [{name: a, kind: budget, severity: [warning]}]", "rules[0].severity"},
      // An alert's kind is not a rule's: gpu_health rules raise gpu_hardware alerts.
      {"rules: [{name: a, kind: gpu_hardware}]", "rules[0].kind"},
      {"rules: [{name: a, kind: budget, enabled: maybe}]", "rules[0].enabled"},
      {"rules: [{name: a, kind: budget, colour: red}]", "rules[0].colour"},
      {"rules: [{name: a, kind: budget, for: 2m}]", "rules[0].for"},
      {"rules: [{name: a, kind: node_not_ready, for: soon}]", "rules[0].for"},
      {"rules: [{name: a, kind: node_not_ready, threshold: 3m}]", "rules[0].threshold"},
      {"rules: [{name: a, kind: queue_wait}]", "rules[0].threshold"},
      {"rules: [{name: a, kind: queue_wait, threshold: 0s}]", "rules[0].threshold"},
      {"rules: [{name: a, kind: queue_wait, threshold: 1m, queue: training}]", "rules[0].queue"},
      {"rules: [{name: a, kind: idle_allocation, threshold: 0}]", "rules[0].threshold"},
      {"rules: [{name: a, kind: idle_allocation, threshold: 101}]", "rules[0].threshold"},
      {"rules: [{name: a, kind: idle_allocation, window: x}]", "rules[0].window"},
      {"rules: [{name: a, kind: budget, sinks: [nowhere]}]", "rules[0].sinks[0]"},
      {"rules: [{name: a, kind: budget}, {name: a, kind: gpu_health}]", "rules[1].name"},
      {"sinks: [{name: s}]\nrules: []", "sinks[0].url"},
      {"sinks: [{name: s, url: ftp://x}]\nrules: []", "sinks[0].url"},
      {"sinks: [{name: s, url: 'http://x', type: email}]\nrules: []", "sinks[0].type"},
      {"sinks: [{name: s, url: 'https://x', secret_file: ../token}]\nrules: []",
       "sinks[0].secret_file"},
      {"sinks: [{name: s, url: 'https://x', secret_file: /srv/s/../../etc/key}]\nrules: []",
       "sinks[0].secret_file"},
      {"sinks: [{name: s, url: 'http://x', send_secret_over_http: yes}]\nrules: []",
       "sinks[0].send_secret_over_http"},
      {"sinks: [{name: s, url: 'http://x', header: 'X: y'}]\nrules: []", "sinks[0].header"},
      {"sinks: [{name: s, url: 'http://x', timeout: 5m}]\nrules: []", "sinks[0].timeout"},
      {"sinks: [{name: s, url: 'http://x'}, {name: s, url: 'http://y'}]\nrules: []",
       "sinks[1].name"},
  };
  for (const auto& c : cases) {
    auto r = ParseAlertRules(c.yaml);
    ASSERT_FALSE(r.has_value()) << c.yaml;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument) << c.yaml;
    EXPECT_EQ(r.error().field, c.field) << c.yaml << " -> " << r.error().message;
    EXPECT_FALSE(r.error().message.empty()) << c.yaml;
  }
}

// Found by fuzz_alert_rules: a key that is a map (`{[a]: b}`, or JSON's
// `{{...}: x}` read as YAML) threw out of the parser, a 500 for the caller.
TEST(AlertRules, AKeyThatIsNotANameIsRefused) {
  for (const char* yaml : {"{[rules]: []}", "rules: [{? {name: a} : b, kind: budget}]",
                           "sinks: [{? [url] : x}]\nrules: []"}) {
    auto r = ParseAlertRules(yaml);
    ASSERT_FALSE(r.has_value()) << yaml;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument) << yaml;
    EXPECT_NE(r.error().message.find("plain strings"), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace berth::model
