#include "model/alert_kind.h"

#include <array>
#include <utility>

namespace berth::model {

namespace {

constexpr std::array<std::pair<AlertKind, std::string_view>, 7> kAlertKindNames{{
    {AlertKind::kGpuHardware, "gpu_hardware"},
    {AlertKind::kNodeNotReady, "node_not_ready"},
    {AlertKind::kQueueWait, "queue_wait"},
    {AlertKind::kBudget, "budget"},
    {AlertKind::kIdleAllocation, "idle_allocation"},
    {AlertKind::kServiceSlo, "service_slo"},
    {AlertKind::kUnknown, "unknown"},
}};

constexpr std::array<std::pair<AlertSeverity, std::string_view>, 4> kSeverities{{
    {AlertSeverity::kCritical, "critical"},
    {AlertSeverity::kWarning, "warning"},
    {AlertSeverity::kInfo, "info"},
    {AlertSeverity::kUnknown, "unknown"},
}};

}  // namespace

std::string_view AlertKindName(AlertKind kind) {
  for (const auto& [k, name] : kAlertKindNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<AlertKind> ParseAlertKind(std::string_view name) {
  for (const auto& [k, n] : kAlertKindNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

std::string_view AlertSeverityName(AlertSeverity severity) {
  for (const auto& [s, name] : kSeverities) {
    if (s == severity) return name;
  }
  return "unknown";
}

std::optional<AlertSeverity> ParseAlertSeverity(std::string_view name) {
  for (const auto& [s, n] : kSeverities) {
    if (n == name) return s;
  }
  return std::nullopt;
}

}  // namespace berth::model
