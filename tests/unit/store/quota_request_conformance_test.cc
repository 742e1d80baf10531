// The quota-request conformance suite: every backend of store::PolicyStore
// (SqliteStore; PostgreSQL next; backends.h) runs the same tests of quota
// requests: filing checks, listing, and each decision's effect on the
// request and on the policy versions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "control/lifecycle.h"
#include "unit/store/backends.h"

namespace berth::store {
namespace {

constexpr std::string_view kPolicy = R"(
queues:
  - name: vision
    quota: {gpus: {guaranteed: 8}}
    children:
      - name: training
        quota: {gpus: {guaranteed: 4, borrow_limit: 2}}
      - name: eval
        quota: {gpus: 2}
)";

class QuotaRequestConformance : public tests::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(b_.policy, nullptr);
    auto v = policy().ApplyPolicy(std::string(kPolicy), "admin", "tenants", 2000);
    ASSERT_TRUE(v.has_value()) << v.error().message;
    ASSERT_EQ(*v, 2);
  }

  PolicyStore& policy() { return *b_.policy; }
  QuotaRequest Ask(std::string queue, std::optional<std::int64_t> guaranteed,
                   std::optional<std::int64_t> borrow_limit = std::nullopt) {
    QuotaRequest r;
    r.queue = std::move(queue);
    r.resource = "gpus";
    r.guaranteed = guaranteed;
    r.borrow_limit = borrow_limit;
    r.reason = "new model";
    return r;
  }
  model::Quota ActiveQuota(const std::string& queue) {
    auto active = policy().ActivePolicy();
    EXPECT_TRUE(active.has_value());
    const model::QueuePolicy* q = active->policy.FindQueue(queue);
    EXPECT_NE(q, nullptr);
    return q->quota.at(model::ResourceKey{model::ResourceKind::kGpus, ""});
  }
  std::int64_t ActiveVersion() {
    auto active = policy().ActivePolicy();
    EXPECT_TRUE(active.has_value());
    return active->version;
  }
};

TEST_P(QuotaRequestConformance, FiledRequestIsPendingAndListed) {
  auto filed = policy().FileQuotaRequest(Ask("vision/training", 6000, 3000), "alice", 3000);
  ASSERT_TRUE(filed.has_value()) << filed.error().message;
  EXPECT_GT(filed->id, 0);
  EXPECT_EQ(filed->tenant, "vision");
  EXPECT_EQ(filed->state, QuotaRequestState::kPending);
  EXPECT_EQ(filed->filed_by, "alice");
  EXPECT_EQ(filed->filed_ms, 3000);

  auto got = policy().GetQuotaRequest(filed->id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->guaranteed, 6000);
  EXPECT_EQ(got->borrow_limit, 3000);
  EXPECT_FALSE(got->weight.has_value());
  EXPECT_EQ(got->reason, "new model");

  QuotaRequestFilter pending;
  pending.state = QuotaRequestState::kPending;
  auto list = policy().ListQuotaRequests(pending);
  ASSERT_TRUE(list.has_value());
  ASSERT_EQ(list->size(), 1u);
  QuotaRequestFilter approved;
  approved.state = QuotaRequestState::kApproved;
  EXPECT_TRUE(policy().ListQuotaRequests(approved)->empty());
  QuotaRequestFilter other_tenant;
  other_tenant.tenant = "nlp";
  EXPECT_TRUE(policy().ListQuotaRequests(other_tenant)->empty());
  // Filing is not a policy change.
  EXPECT_EQ(ActiveVersion(), 2);
}

TEST_P(QuotaRequestConformance, FilingRefusesUnknownQueueResourceAndEmptyRequests) {
  auto unknown = policy().FileQuotaRequest(Ask("vision/nlp", 1000), "alice", 3000);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "queue");
  EXPECT_NE(unknown.error().message.find("training, eval"), std::string::npos)
      << unknown.error().message;

  QuotaRequest bad_resource = Ask("vision/training", 1000);
  bad_resource.resource = "tpus";
  auto r = policy().FileQuotaRequest(bad_resource, "alice", 3000);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().field, "resource");

  auto nothing = policy().FileQuotaRequest(Ask("vision/training", std::nullopt), "alice", 3000);
  ASSERT_FALSE(nothing.has_value());
  EXPECT_EQ(nothing.error().field, "guaranteed");

  QuotaRequest no_reason = Ask("vision/training", 1000);
  no_reason.reason = " ";
  auto nr = policy().FileQuotaRequest(no_reason, "alice", 3000);
  ASSERT_FALSE(nr.has_value());
  EXPECT_EQ(nr.error().field, "reason");

  EXPECT_TRUE(policy().ListQuotaRequests({})->empty());
}

TEST_P(QuotaRequestConformance, ApprovalMakesNewPolicyVersionWithTheQuota) {
  auto filed = policy().FileQuotaRequest(Ask("vision/training", 6000, 1000), "alice", 3000);
  ASSERT_TRUE(filed.has_value());
  auto approved = control::ApproveQuotaRequest(policy(), filed->id, "root", "ok", 4000);
  ASSERT_TRUE(approved.has_value()) << approved.error().message;
  EXPECT_EQ(approved->state, QuotaRequestState::kApproved);
  EXPECT_EQ(approved->decided_by, "root");
  EXPECT_EQ(approved->decided_ms, 4000);
  EXPECT_EQ(approved->decision_comment, "ok");
  ASSERT_EQ(approved->policy_version, 3);

  EXPECT_EQ(ActiveVersion(), 3);
  model::Quota q = ActiveQuota("vision/training");
  EXPECT_EQ(q.guaranteed, 6000);
  EXPECT_EQ(q.borrow_limit, 1000);
  EXPECT_EQ(ActiveQuota("vision/eval").guaranteed, 2000);  // untouched
  auto v3 = policy().GetPolicyVersion(3);
  ASSERT_TRUE(v3.has_value());
  EXPECT_EQ(v3->applied_by, "root");
  EXPECT_EQ(v3->comment, fmt::format("quota request #{}: new model", filed->id));

  // A rollback restores the old quota as a new version.
  auto back = policy().RollbackPolicy(2, "root", "", 5000);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(ActiveQuota("vision/training").guaranteed, 4000);
  EXPECT_EQ(ActiveQuota("vision/training").borrow_limit, 2000);
}

TEST_P(QuotaRequestConformance, ApprovalThatBreaksThePolicyIsRefusedAndChangesNothing) {
  // 9 GPUs for training plus eval's 2 is more than vision's 8.
  auto filed = policy().FileQuotaRequest(Ask("vision/training", 9000), "alice", 3000);
  ASSERT_TRUE(filed.has_value());
  auto approved = control::ApproveQuotaRequest(policy(), filed->id, "root", "", 4000);
  ASSERT_FALSE(approved.has_value());
  EXPECT_NE(approved.error().message.find("more than the parent's 8"), std::string::npos)
      << approved.error().message;
  EXPECT_NE(approved.error().message.find("quota request"), std::string::npos);
  EXPECT_EQ(ActiveVersion(), 2);
  EXPECT_EQ(ActiveQuota("vision/training").guaranteed, 4000);
  EXPECT_EQ(policy().ListPolicyVersions()->size(), 2u);
  auto still = policy().GetQuotaRequest(filed->id);
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(still->state, QuotaRequestState::kPending);
  EXPECT_FALSE(still->policy_version.has_value());
}

TEST_P(QuotaRequestConformance, RejectAndWithdrawLeaveThePolicyAlone) {
  auto a = policy().FileQuotaRequest(Ask("vision/training", 6000), "alice", 3000);
  auto b = policy().FileQuotaRequest(Ask("vision/eval", 1000), "alice", 3000);
  ASSERT_TRUE(a.has_value() && b.has_value());
  auto rejected = policy().RejectQuotaRequest(a->id, "root", "no capacity", 4000);
  ASSERT_TRUE(rejected.has_value()) << rejected.error().message;
  EXPECT_EQ(rejected->state, QuotaRequestState::kRejected);
  EXPECT_EQ(rejected->decision_comment, "no capacity");
  auto withdrawn = policy().WithdrawQuotaRequest(b->id, "alice", 4000);
  ASSERT_TRUE(withdrawn.has_value());
  EXPECT_EQ(withdrawn->state, QuotaRequestState::kWithdrawn);
  EXPECT_EQ(withdrawn->decided_by, "alice");
  EXPECT_EQ(ActiveVersion(), 2);
  EXPECT_EQ(ActiveQuota("vision/training").guaranteed, 4000);
}

TEST_P(QuotaRequestConformance, DecidingTwiceIsRefusedNamingTheState) {
  auto filed = policy().FileQuotaRequest(Ask("vision/training", 6000), "alice", 3000);
  ASSERT_TRUE(filed.has_value());
  ASSERT_TRUE(control::ApproveQuotaRequest(policy(), filed->id, "root", "", 4000).has_value());
  auto again = control::ApproveQuotaRequest(policy(), filed->id, "root", "", 5000);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, Code::kFailedPrecondition);
  EXPECT_NE(again.error().message.find("is Approved"), std::string::npos) << again.error().message;
  EXPECT_EQ(ActiveVersion(), 3);  // no second version
  auto reject = policy().RejectQuotaRequest(filed->id, "root", "late", 5000);
  ASSERT_FALSE(reject.has_value());
  EXPECT_EQ(reject.error().code, Code::kFailedPrecondition);
  auto withdraw = policy().WithdrawQuotaRequest(filed->id, "alice", 5000);
  ASSERT_FALSE(withdraw.has_value());
  EXPECT_EQ(policy().GetQuotaRequest(filed->id)->state, QuotaRequestState::kApproved);
  auto missing = control::ApproveQuotaRequest(policy(), 999, "root", "", 5000);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, Code::kNotFound);
}

// The list is newest first; its filters and limit pick from that order.
TEST_P(QuotaRequestConformance, RequestsListNewestFirstByStateTenantAndLimit) {
  auto a = policy().FileQuotaRequest(Ask("vision/training", 5000), "alice", 3000);
  auto b = policy().FileQuotaRequest(Ask("vision/eval", 1000), "bob", 3100);
  auto c = policy().FileQuotaRequest(Ask("vision/training", 6000), "carol", 3200);
  ASSERT_TRUE(a.has_value() && b.has_value() && c.has_value());
  ASSERT_TRUE(policy().RejectQuotaRequest(b->id, "root", "no", 3300).has_value());

  auto all = policy().ListQuotaRequests({});
  ASSERT_TRUE(all.has_value()) << all.error().message;
  ASSERT_EQ(all->size(), 3U);
  EXPECT_EQ((*all)[0].id, c->id);
  EXPECT_EQ((*all)[1].id, b->id);
  EXPECT_EQ((*all)[2].id, a->id);
  EXPECT_EQ((*all)[1].state, QuotaRequestState::kRejected);
  EXPECT_EQ((*all)[2].filed_by, "alice");

  QuotaRequestFilter newest;
  newest.limit = 1;
  auto one = policy().ListQuotaRequests(newest);
  ASSERT_EQ(one->size(), 1U);
  EXPECT_EQ(one->front().id, c->id);
  QuotaRequestFilter pending;
  pending.state = QuotaRequestState::kPending;
  pending.tenant = "vision";
  auto open = policy().ListQuotaRequests(pending);
  ASSERT_EQ(open->size(), 2U);
  EXPECT_EQ((*open)[0].id, c->id);
  EXPECT_EQ((*open)[1].id, a->id);

  // A page after c (before_id): the pending ones older than c, the
  // rejected b skipped before the limit is counted.
  pending.before_id = c->id;
  pending.limit = 1;
  auto older = policy().ListQuotaRequests(pending);
  ASSERT_EQ(older->size(), 1U);
  EXPECT_EQ(older->front().id, a->id);
}

TEST_P(QuotaRequestConformance, AnUnknownRequestIsNotFoundAndChangesNothing) {
  EXPECT_EQ(policy().GetQuotaRequest(999).error().code, Code::kNotFound);
  EXPECT_EQ(policy().RejectQuotaRequest(999, "root", "", 4000).error().code, Code::kNotFound);
  EXPECT_EQ(policy().WithdrawQuotaRequest(999, "alice", 4000).error().code, Code::kNotFound);
  EXPECT_TRUE(policy().ListQuotaRequests({})->empty());
  EXPECT_EQ(ActiveVersion(), 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, QuotaRequestConformance,
                         ::testing::ValuesIn(tests::StoreBackends()), tests::BackendName);

}  // namespace
}  // namespace berth::store
