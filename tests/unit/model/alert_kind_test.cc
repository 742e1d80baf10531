// An alert's kind and severity: each name reads back as the value it names,
// the names are the ones stored and shown, and a name this version does not
// know reads as nothing (the store shows it as "unknown").
#include "model/alert_kind.h"

#include <gtest/gtest.h>

#include "model/alert_rules.h"

namespace berth::model {
namespace {

TEST(AlertKind, NamesRoundTrip) {
  for (auto k : {AlertKind::kGpuHardware, AlertKind::kNodeNotReady, AlertKind::kQueueWait,
                 AlertKind::kBudget, AlertKind::kIdleAllocation, AlertKind::kUnknown}) {
    EXPECT_EQ(ParseAlertKind(AlertKindName(k)), k) << AlertKindName(k);
  }
  EXPECT_EQ(AlertKindName(AlertKind::kGpuHardware), "gpu_hardware");
  EXPECT_EQ(AlertKindName(AlertKind::kNodeNotReady), "node_not_ready");
  EXPECT_EQ(AlertKindName(AlertKind::kQueueWait), "queue_wait");
  EXPECT_EQ(AlertKindName(AlertKind::kBudget), "budget");
  EXPECT_EQ(AlertKindName(AlertKind::kIdleAllocation), "idle_allocation");
  EXPECT_EQ(AlertKindName(AlertKind::kUnknown), "unknown");
}

TEST(AlertKind, AnUnknownNameIsNone) {
  EXPECT_FALSE(ParseAlertKind(""));
  EXPECT_FALSE(ParseAlertKind("disk_full"));
  EXPECT_FALSE(ParseAlertKind("gpu_health")) << "a rule's kind, not an alert's";
  EXPECT_FALSE(ParseAlertKind("Budget"));
}

TEST(AlertSeverity, NamesRoundTrip) {
  for (auto s : {AlertSeverity::kCritical, AlertSeverity::kWarning, AlertSeverity::kInfo,
                 AlertSeverity::kUnknown}) {
    EXPECT_EQ(ParseAlertSeverity(AlertSeverityName(s)), s) << AlertSeverityName(s);
  }
  EXPECT_EQ(AlertSeverityName(AlertSeverity::kCritical), "critical");
  EXPECT_EQ(AlertSeverityName(AlertSeverity::kWarning), "warning");
  EXPECT_EQ(AlertSeverityName(AlertSeverity::kInfo), "info");
  EXPECT_EQ(AlertSeverityName(AlertSeverity::kUnknown), "unknown");
}

TEST(AlertSeverity, AnUnknownNameIsNone) {
  EXPECT_FALSE(ParseAlertSeverity(""));
  EXPECT_FALSE(ParseAlertSeverity("page"));
  EXPECT_FALSE(ParseAlertSeverity("Critical"));
}

TEST(AlertRuleKind, NamesRoundTripAndEachRaisesItsAlertKind) {
  for (auto k : {AlertRuleKind::kGpuHealth, AlertRuleKind::kNodeNotReady, AlertRuleKind::kQueueWait,
                 AlertRuleKind::kBudget, AlertRuleKind::kIdleAllocation}) {
    EXPECT_EQ(ParseAlertRuleKind(AlertRuleKindName(k)), k) << AlertRuleKindName(k);
  }
  EXPECT_FALSE(ParseAlertRuleKind("gpu_hardware")) << "an alert's kind, not a rule's";
  EXPECT_EQ(AlertKindOfRule(AlertRuleKind::kGpuHealth), AlertKind::kGpuHardware);
  EXPECT_EQ(AlertKindOfRule(AlertRuleKind::kNodeNotReady), AlertKind::kNodeNotReady);
  EXPECT_EQ(AlertKindOfRule(AlertRuleKind::kQueueWait), AlertKind::kQueueWait);
  EXPECT_EQ(AlertKindOfRule(AlertRuleKind::kBudget), AlertKind::kBudget);
  EXPECT_EQ(AlertKindOfRule(AlertRuleKind::kIdleAllocation), AlertKind::kIdleAllocation);
}

}  // namespace
}  // namespace berth::model
