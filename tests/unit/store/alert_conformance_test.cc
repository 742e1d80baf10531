// The alert conformance suite: every backend of store::AlertStore
// (SqliteStore; PostgreSQL next; backends.h) runs the same tests of alerts,
// their dedupe, the versioned alert rules and the webhook outbox. An alert
// raised or resolved queues one delivery per sink in the same transaction,
// so each test of a raise or resolve also reads the outbox.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/store/backends.h"

namespace berth::store {
namespace {

class AlertStoreConformance : public tests::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(b_.alerts, nullptr);
  }

  AlertStore& store() { return *b_.alerts; }

  // A budget alert of `rule` about `subject`, told to `sinks`.
  static Alert Budget(std::string rule, std::string subject, TimeMs at,
                      std::vector<std::string> sinks = {}) {
    Alert a;
    a.kind = model::AlertKind::kBudget;
    a.severity = model::AlertSeverity::kWarning;
    a.message = "tenant vision used 80% of its budget";
    a.raised_ms = at;
    a.rule = std::move(rule);
    a.subject = std::move(subject);
    a.sinks = std::move(sinks);
    return a;
  }
  std::vector<AlertDelivery> Due(TimeMs now) {
    auto due = store().DueDeliveries(now, 100);
    EXPECT_TRUE(due.has_value()) << due.error().message;
    return due.value_or(std::vector<AlertDelivery>{});
  }
};

TEST_P(AlertStoreConformance, ARaisedAlertIsKeptWholeWithARaisedDeliveryPerSink) {
  Alert alert;
  alert.kind = model::AlertKind::kGpuHardware;
  alert.severity = model::AlertSeverity::kCritical;
  alert.node = "n1";
  alert.gpu = 3;
  alert.message = "Xid 79";
  alert.raised_ms = 2000;
  alert.rule = "gpus";
  alert.subject = "n1/3";
  alert.sinks = {"ops", "pager"};
  auto id = store().RaiseAlert(alert);
  ASSERT_TRUE(id.has_value()) << id.error().message;

  auto got = store().GetAlert(*id);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->id, *id);
  EXPECT_EQ(got->kind, model::AlertKind::kGpuHardware);
  EXPECT_EQ(got->severity, model::AlertSeverity::kCritical);
  EXPECT_EQ(got->node, "n1");
  EXPECT_EQ(got->gpu, 3U);
  EXPECT_EQ(got->message, "Xid 79");
  EXPECT_EQ(got->raised_ms, 2000);
  EXPECT_FALSE(got->resolved_ms.has_value());
  EXPECT_EQ(got->resolved_by, "");
  EXPECT_EQ(got->rule, "gpus");
  EXPECT_EQ(got->subject, "n1/3");
  EXPECT_EQ(got->sinks, (std::vector<std::string>{"ops", "pager"}));
  EXPECT_EQ(store().GetAlert(*id + 100).error().code, Code::kNotFound);
  EXPECT_EQ(store().ListAlerts(true)->size(), 1U);

  // Due from the moment it was raised, not before.
  EXPECT_TRUE(Due(1999).empty());
  auto due = Due(2000);
  ASSERT_EQ(due.size(), 2U);
  for (const auto& d : due) {
    EXPECT_EQ(d.alert_id, *id);
    EXPECT_EQ(d.event, "raised");
    EXPECT_EQ(d.attempts, 0);
    EXPECT_EQ(d.created_ms, 2000);
    EXPECT_FALSE(d.delivered_ms.has_value());
    EXPECT_FALSE(d.failed);
  }
  EXPECT_EQ(due[0].sink, "ops");
  EXPECT_EQ(due[1].sink, "pager");
  // An alert with no sinks queues nothing.
  ASSERT_TRUE(store().RaiseAlert(Budget("money", "vision/2025-01/80", 2100)).has_value());
  EXPECT_EQ(Due(3000).size(), 2U);
}

TEST_P(AlertStoreConformance, AnAlertIsResolvedOnceWithAResolvedDeliveryPerSink) {
  auto id = store().RaiseAlert(Budget("money", "vision/2025-01/80", 2000, {"ops"}));
  ASSERT_TRUE(id.has_value()) << id.error().message;
  ASSERT_TRUE(store().RaiseAlert(Budget("money", "nlp/2025-01/80", 2000)).has_value());

  EXPECT_EQ(store().ResolveAlert(*id, "admin", 3000), true);
  EXPECT_EQ(store().ResolveAlert(*id, "berth", 4000), false);  // resolved already
  EXPECT_EQ(store().ResolveAlert(*id + 100, "admin", 4000).error().code, Code::kNotFound);
  auto got = store().GetAlert(*id);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->resolved_ms, 3000);
  EXPECT_EQ(got->resolved_by, "admin");  // the first resolve stands
  auto open = store().ListAlerts(true);
  ASSERT_EQ(open->size(), 1U);
  EXPECT_EQ(open->front().subject, "nlp/2025-01/80");
  EXPECT_EQ(store().ListAlerts(false)->size(), 2U);

  auto due = Due(3000);
  ASSERT_EQ(due.size(), 2U);  // oldest first: the raise, then the resolve
  EXPECT_EQ(due[0].event, "raised");
  EXPECT_EQ(due[1].event, "resolved");
  EXPECT_EQ(due[1].sink, "ops");
  EXPECT_EQ(due[1].alert_id, *id);
  EXPECT_EQ(due[1].created_ms, 3000);
}

TEST_P(AlertStoreConformance, RaiseOnceWhileOpenRefusesOnlyWhileTheSameRuleAndSubjectIsOpen) {
  auto first = store().RaiseAlertOnce(Budget("down", "n1", 2000), AlertDedupe::kOpen);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  ASSERT_TRUE(first->has_value());
  auto again = store().RaiseAlertOnce(Budget("down", "n1", 2100), AlertDedupe::kOpen);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_FALSE(again->has_value());
  // Another subject, or another rule on the same subject, is another alert.
  auto other_subject = store().RaiseAlertOnce(Budget("down", "n2", 2100), AlertDedupe::kOpen);
  ASSERT_TRUE(other_subject.has_value() && other_subject->has_value());
  auto other_rule = store().RaiseAlertOnce(Budget("slow", "n1", 2100), AlertDedupe::kOpen);
  ASSERT_TRUE(other_rule.has_value() && other_rule->has_value());
  EXPECT_EQ(store().ListAlerts(true)->size(), 3U);

  // Once resolved, the condition may raise it again.
  ASSERT_TRUE(store().ResolveAlert(**first, "berth", 3000).value());
  auto after = store().RaiseAlertOnce(Budget("down", "n1", 4000), AlertDedupe::kOpen);
  ASSERT_TRUE(after.has_value() && after->has_value());
  EXPECT_NE(**after, **first);
  EXPECT_EQ(store().ListAlerts(false)->size(), 4U);
}

TEST_P(AlertStoreConformance, RaiseOnceEverRefusesWhatWasEverRaisedEvenResolved) {
  auto first = store().RaiseAlertOnce(Budget("money", "vision/2025-01/80", 2000, {"ops"}),
                                      AlertDedupe::kEver);
  ASSERT_TRUE(first.has_value() && first->has_value());
  auto open =
      store().RaiseAlertOnce(Budget("money", "vision/2025-01/80", 2100), AlertDedupe::kEver);
  ASSERT_TRUE(open.has_value());
  EXPECT_FALSE(open->has_value());
  ASSERT_TRUE(store().ResolveAlert(**first, "admin", 3000).value());
  auto resolved = store().RaiseAlertOnce(Budget("money", "vision/2025-01/80", 4000, {"ops"}),
                                         AlertDedupe::kEver);
  ASSERT_TRUE(resolved.has_value());
  EXPECT_FALSE(resolved->has_value());
  // The next threshold is another subject.
  auto next =
      store().RaiseAlertOnce(Budget("money", "vision/2025-01/100", 4000), AlertDedupe::kEver);
  ASSERT_TRUE(next.has_value() && next->has_value());
  EXPECT_EQ(store().ListAlerts(false)->size(), 2U);
  // A refused raise queues no delivery: the one raise and its resolve.
  EXPECT_EQ(Due(5000).size(), 2U);
}

TEST_P(AlertStoreConformance, AlertRulesAreVersionedAndAnApplyOnAStaleBaseIsRefused) {
  auto none = store().ActiveAlertRules();
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_FALSE(none->has_value());

  auto bad = store().ApplyAlertRules("rules: [{name: x, kind: nonsense}]", "admin", "", 1000,
                                     std::nullopt);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
  EXPECT_EQ(bad.error().field.rfind("rules[0]", 0), 0U) << bad.error().field;
  EXPECT_FALSE(store().ActiveAlertRules()->has_value());

  const std::string down = "rules: [{name: down, kind: node_not_ready, for: 2m}]";
  auto v1 = store().ApplyAlertRules(down, "alice", "first", 2000, 0);  // 0: none applied yet
  ASSERT_TRUE(v1.has_value()) << v1.error().message;
  EXPECT_EQ(*v1, 1);
  auto active = store().ActiveAlertRules();
  ASSERT_TRUE(active.has_value() && active->has_value());
  EXPECT_EQ((*active)->version, 1);
  EXPECT_EQ((*active)->yaml, down);
  EXPECT_EQ((*active)->applied_ms, 2000);
  EXPECT_EQ((*active)->applied_by, "alice");
  EXPECT_EQ((*active)->comment, "first");

  auto stale = store().ApplyAlertRules("rules: []", "bob", "", 3000, 0);
  ASSERT_FALSE(stale.has_value());
  EXPECT_EQ(stale.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(stale.error().field, "base_version");
  EXPECT_NE(stale.error().message.find("version 1 was applied by alice"), std::string::npos)
      << stale.error().message;
  EXPECT_EQ((*store().ActiveAlertRules())->version, 1);

  EXPECT_EQ(store().ApplyAlertRules("rules: []", "bob", "", 3000, 1).value(), 2);
  EXPECT_EQ(store().ApplyAlertRules(down, "carol", "", 4000, std::nullopt).value(), 3);
  EXPECT_EQ((*store().ActiveAlertRules())->applied_by, "carol");
}

// An attempt is recorded as delivered, retried later, or given up; only
// what is neither delivered nor given up and whose time has come is due.
TEST_P(AlertStoreConformance, ADeliveryIsDeliveredRetriedOrGivenUp) {
  ASSERT_TRUE(store().RaiseAlert(Budget("money", "a", 1000, {"ok", "retry", "dead"})));
  auto due = Due(1000);
  ASSERT_EQ(due.size(), 3U);
  const std::int64_t ok = due[0].id;
  const std::int64_t retry = due[1].id;
  const std::int64_t dead = due[2].id;

  ASSERT_TRUE(store().RecordDeliveryAttempt(ok, "", std::nullopt, 1100).has_value());
  ASSERT_TRUE(store().RecordDeliveryAttempt(retry, "HTTP 503", 3000, 1100).has_value());
  ASSERT_TRUE(store().RecordDeliveryAttempt(dead, "HTTP 500", 2000, 1100).has_value());
  ASSERT_TRUE(store().RecordDeliveryAttempt(dead, "HTTP 500", std::nullopt, 2000).has_value());
  EXPECT_TRUE(Due(2999).empty());
  due = Due(3000);
  ASSERT_EQ(due.size(), 1U);
  EXPECT_EQ(due[0].id, retry);
  EXPECT_EQ(due[0].attempts, 1);
  EXPECT_EQ(due[0].last_error, "HTTP 503");
  EXPECT_EQ(due[0].next_attempt_ms, 3000);

  auto list = store().ListDeliveries(10, std::nullopt);
  ASSERT_TRUE(list.has_value()) << list.error().message;
  ASSERT_EQ(list->size(), 3U);  // newest first
  const AlertDelivery& given_up = (*list)[0];
  EXPECT_EQ(given_up.id, dead);
  EXPECT_TRUE(given_up.failed);
  EXPECT_EQ(given_up.attempts, 2);
  EXPECT_EQ(given_up.last_error, "HTTP 500");
  EXPECT_FALSE(given_up.delivered_ms.has_value());
  const AlertDelivery& delivered = (*list)[2];
  EXPECT_EQ(delivered.id, ok);
  EXPECT_EQ(delivered.delivered_ms, 1100);
  EXPECT_EQ(delivered.attempts, 1);
  EXPECT_FALSE(delivered.failed);
  EXPECT_EQ(store().ListDeliveries(1, std::nullopt)->front().id, dead);

  // The retry delivered at last: nothing is due any more, ever.
  ASSERT_TRUE(store().RecordDeliveryAttempt(retry, "", std::nullopt, 3100).has_value());
  EXPECT_TRUE(Due(1'000'000).empty());
  // An attempt at a delivery that does not exist is no success.
  EXPECT_EQ(store().RecordDeliveryAttempt(dead + 100, "", std::nullopt, 3200).error().code,
            Code::kNotFound);
}

TEST_P(AlertStoreConformance, DueDeliveriesComeOldestFirstUpToTheLimit) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store().RaiseAlert(Budget("money", std::to_string(i), 1000 + i, {"ops"})));
  }
  auto two = store().DueDeliveries(5000, 2);
  ASSERT_TRUE(two.has_value()) << two.error().message;
  ASSERT_EQ(two->size(), 2U);
  EXPECT_EQ((*two)[0].created_ms, 1000);
  EXPECT_EQ((*two)[1].created_ms, 1001);
  EXPECT_LT((*two)[0].id, (*two)[1].id);
}

// FindAlerts is a page: the newest `limit` matches before `before_id`,
// oldest first, with the open and kind filters applied before the limit.
TEST_P(AlertStoreConformance, FindAlertsPagesBackwardsWithItsFiltersAppliedFirst) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    Alert a = Budget("budgets", "team" + std::to_string(i), 1000 + i, {"ops"});
    if (i % 2 == 1) a.kind = model::AlertKind::kQueueWait;
    auto id = store().RaiseAlert(a);
    ASSERT_TRUE(id.has_value()) << id.error().message;
    ids.push_back(*id);
  }
  ASSERT_TRUE(store().ResolveAlert(ids[4], "root", 2000).has_value());
  auto id_list = [](const std::vector<Alert>& alerts) {
    std::vector<std::int64_t> out;
    for (const auto& a : alerts) out.push_back(a.id);
    return out;
  };

  AlertFilter budgets;
  budgets.kind = model::AlertKind::kBudget;
  budgets.limit = 2;
  EXPECT_EQ(id_list(*store().FindAlerts(budgets)), (std::vector<std::int64_t>{ids[2], ids[4]}));
  budgets.before_id = ids[2];
  EXPECT_EQ(id_list(*store().FindAlerts(budgets)), (std::vector<std::int64_t>{ids[0]}));
  budgets.open_only = true;
  budgets.before_id.reset();
  EXPECT_EQ(id_list(*store().FindAlerts(budgets)), (std::vector<std::int64_t>{ids[0], ids[2]}));
  EXPECT_EQ(id_list(*store().ListAlerts(false)), ids);

  // Deliveries: newest first, before an id.
  auto page = store().ListDeliveries(2, std::nullopt);
  ASSERT_EQ(page->size(), 2U);
  auto older = store().ListDeliveries(100, page->back().id);
  ASSERT_TRUE(older.has_value()) << older.error().message;
  EXPECT_EQ(older->size(), 4U);  // 5 raised and 1 resolved, 2 on the first page
  for (const auto& d : *older) EXPECT_LT(d.id, page->back().id);
}

INSTANTIATE_TEST_SUITE_P(Backends, AlertStoreConformance,
                         ::testing::ValuesIn(tests::StoreBackends()), tests::BackendName);

}  // namespace
}  // namespace berth::store
