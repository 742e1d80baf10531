// Alert rules (docs/operations.md, "Alerts"): which conditions berthd raises
// alerts for, how severe each is, and which webhook sinks hear about it. A
// rules document is YAML, versioned like policies and prices; a cluster that
// never applied one runs DefaultAlertRules().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/alert_kind.h"

namespace berth::model {

// What a rule watches: its `kind` in the rules document. gpu_health and
// budget are raised where their events happen (the GPU health path, the
// budget check); the rule sets their severity, whether they are raised at
// all, and their sinks. The others are evaluated by the engine
// (meter/alerting.h).
enum class AlertRuleKind {
  kGpuHealth,
  kNodeNotReady,
  kQueueWait,
  kBudget,
  kIdleAllocation,
  kServiceSlo,
};
std::string_view AlertRuleKindName(AlertRuleKind kind);
std::optional<AlertRuleKind> ParseAlertRuleKind(std::string_view name);
// The kind of the alerts a rule of this kind raises (alert_kind.h):
// gpu_health keeps the historic gpu_hardware, the others their rule kind's.
AlertKind AlertKindOfRule(AlertRuleKind kind);

struct AlertRule {
  std::string name;
  AlertRuleKind kind = AlertRuleKind::kGpuHealth;
  AlertSeverity severity = AlertSeverity::kWarning;  // never kUnknown
  bool enabled = true;
  std::vector<std::string> sinks;
  // node_not_ready: how long a node must be NotReady.
  std::int64_t for_ms = 0;
  // queue_wait: "tenant/queue" or "*"; the wait above which it fires.
  // idle_allocation: utilization percent under which GPUs count as idle.
  std::string queue = "*";
  std::int64_t threshold_ms = 0;
  std::int64_t threshold_percent = 0;
  // idle_allocation: how long the allocation must have been idle.
  // service_slo: the window the burn rate is measured over.
  std::int64_t window_ms = 0;
  // service_slo: "tenant/name" or "*"; the error-budget burn rate, in
  // thousandths, at or above which it fires (10x: 10000).
  std::string service = "*";
  std::int64_t burn_milli = 0;
};
// service_slo: a window's figures count only with at least this many
// requests (a single failure of two requests is not a burn).
inline constexpr std::int64_t kSloAlertMinRequests = 10;
// service_slo windows: the service controller keeps an hour of them.
inline constexpr std::int64_t kMaxSloAlertWindowMs = 3'600'000;

// A webhook: berthd POSTs each raised and resolved alert of the rules that
// name it. With secret_file, the file's content (whitespace trimmed) is sent
// as `Authorization: Bearer <secret>`, or as the raw value of `header` when
// another header is named. secret_file names a file in berthd's webhook
// secret directory (meter/webhook_secret.h), and a secret goes only to an
// https:// URL unless send_secret_over_http says to send it in the clear.
struct AlertSink {
  std::string name;
  std::string url;  // http:// or https://
  std::string secret_file;
  bool send_secret_over_http = false;
  std::string header = "Authorization";
  std::int64_t timeout_ms = 5000;
};

struct AlertRules {
  std::vector<AlertSink> sinks;
  std::vector<AlertRule> rules;

  const AlertSink* FindSink(std::string_view name) const;
  // The first enabled rule of `kind`; null when none is.
  const AlertRule* FirstEnabled(AlertRuleKind kind) const;
};

// gpu_health critical, node_not_ready (for 2m) warning, budget warning;
// queue_wait and idle_allocation present but disabled; service_slo (10x over
// 5m) warning; no sinks.
AlertRules DefaultAlertRules();
std::string DefaultAlertRulesYaml();

// Parses and validates a rules document; errors name the field
// ("rules[1].threshold") and say what to write instead.
Result<AlertRules> ParseAlertRules(std::string_view yaml);

// What a document being applied must meet beyond parsing: an
// idle_allocation window of at least 1m (telemetry is kept per minute, so a
// shorter one could not be honoured), and no secret to a plain http:// URL
// unless the sink says send_secret_over_http (which is refused where it
// means nothing). Stored documents are only parsed: one applied before this
// check loads, its short window acting as 1m; the deliverer still sends no
// secret over http without the flag.
Status CheckNewAlertRules(const AlertRules& rules);

nlohmann::json AlertRulesJson(const AlertRules& rules);

}  // namespace berth::model
