// What a raised alert is (store::Alert): its kind and its severity. The core
// (the alert router and engine, metering, the controller, metrics) works on
// these enums; the names are the stored and API form. An alert rule's kind
// (AlertRuleKind, alert_rules.h) is another enum: gpu_health rules raise
// gpu_hardware alerts.
#pragma once

#include <optional>
#include <string_view>

namespace berth::model {

enum class AlertKind {
  kGpuHardware,     // "gpu_hardware": a GPU reported a hardware error
  kNodeNotReady,    // "node_not_ready"
  kQueueWait,       // "queue_wait"
  kBudget,          // "budget": a tenant crossed a budget threshold
  kIdleAllocation,  // "idle_allocation"
  kServiceSlo,      // "service_slo": a service burns its error budget too fast
  // "unknown": a stored name this version does not know (a newer Berth
  // wrote it); shown as "unknown", and never resolved by the engine.
  kUnknown,
};
std::string_view AlertKindName(AlertKind kind);
// nullopt for a name this version does not know; the store reads it as
// kUnknown.
std::optional<AlertKind> ParseAlertKind(std::string_view name);

enum class AlertSeverity {
  kCritical,  // "critical"
  kWarning,   // "warning"
  kInfo,      // "info"
  // "unknown": a stored name this version does not know. No rule may name
  // it (ParseAlertRules refuses it).
  kUnknown,
};
std::string_view AlertSeverityName(AlertSeverity severity);
// nullopt for a name this version does not know; the store reads it as
// kUnknown.
std::optional<AlertSeverity> ParseAlertSeverity(std::string_view name);

}  // namespace berth::model
