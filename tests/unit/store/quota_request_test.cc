// Quota requests in the SQLite store: filing checks, and each decision's
// effect on the request and on the policy versions.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "control/lifecycle.h"
#include "store/sqlite_store.h"

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

class QuotaRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-quota-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = SqliteStore::Open(dir_, 1000);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    auto v = store_->ApplyPolicy(std::string(kPolicy), "admin", "tenants", 2000);
    ASSERT_TRUE(v.has_value()) << v.error().message;
    ASSERT_EQ(*v, 2);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
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
    auto active = store_->ActivePolicy();
    EXPECT_TRUE(active.has_value());
    const model::QueuePolicy* q = active->policy.FindQueue(queue);
    EXPECT_NE(q, nullptr);
    return q->quota.at(model::ResourceKey{model::ResourceKind::kGpus, ""});
  }
  std::int64_t ActiveVersion() {
    auto active = store_->ActivePolicy();
    EXPECT_TRUE(active.has_value());
    return active->version;
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(QuotaRequestTest, FiledRequestIsPendingAndListed) {
  auto filed = store_->FileQuotaRequest(Ask("vision/training", 6000, 3000), "alice", 3000);
  ASSERT_TRUE(filed.has_value()) << filed.error().message;
  EXPECT_GT(filed->id, 0);
  EXPECT_EQ(filed->tenant, "vision");
  EXPECT_EQ(filed->state, QuotaRequestState::kPending);
  EXPECT_EQ(filed->filed_by, "alice");
  EXPECT_EQ(filed->filed_ms, 3000);

  auto got = store_->GetQuotaRequest(filed->id);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->guaranteed, 6000);
  EXPECT_EQ(got->borrow_limit, 3000);
  EXPECT_FALSE(got->weight.has_value());
  EXPECT_EQ(got->reason, "new model");

  QuotaRequestFilter pending;
  pending.state = QuotaRequestState::kPending;
  auto list = store_->ListQuotaRequests(pending);
  ASSERT_TRUE(list.has_value());
  ASSERT_EQ(list->size(), 1u);
  QuotaRequestFilter approved;
  approved.state = QuotaRequestState::kApproved;
  EXPECT_TRUE(store_->ListQuotaRequests(approved)->empty());
  QuotaRequestFilter other_tenant;
  other_tenant.tenant = "nlp";
  EXPECT_TRUE(store_->ListQuotaRequests(other_tenant)->empty());
  // Filing is not a policy change.
  EXPECT_EQ(ActiveVersion(), 2);
}

TEST_F(QuotaRequestTest, FilingRefusesUnknownQueueResourceAndEmptyRequests) {
  auto unknown = store_->FileQuotaRequest(Ask("vision/nlp", 1000), "alice", 3000);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "queue");
  EXPECT_NE(unknown.error().message.find("training, eval"), std::string::npos)
      << unknown.error().message;

  QuotaRequest bad_resource = Ask("vision/training", 1000);
  bad_resource.resource = "tpus";
  auto r = store_->FileQuotaRequest(bad_resource, "alice", 3000);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().field, "resource");

  auto nothing = store_->FileQuotaRequest(Ask("vision/training", std::nullopt), "alice", 3000);
  ASSERT_FALSE(nothing.has_value());
  EXPECT_EQ(nothing.error().field, "guaranteed");

  QuotaRequest no_reason = Ask("vision/training", 1000);
  no_reason.reason = " ";
  auto nr = store_->FileQuotaRequest(no_reason, "alice", 3000);
  ASSERT_FALSE(nr.has_value());
  EXPECT_EQ(nr.error().field, "reason");

  EXPECT_TRUE(store_->ListQuotaRequests({})->empty());
}

TEST_F(QuotaRequestTest, ApprovalMakesNewPolicyVersionWithTheQuota) {
  auto filed = store_->FileQuotaRequest(Ask("vision/training", 6000, 1000), "alice", 3000);
  ASSERT_TRUE(filed.has_value());
  auto approved = control::ApproveQuotaRequest(*store_, filed->id, "root", "ok", 4000);
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
  auto v3 = store_->GetPolicyVersion(3);
  ASSERT_TRUE(v3.has_value());
  EXPECT_EQ(v3->applied_by, "root");
  EXPECT_EQ(v3->comment, fmt::format("quota request #{}: new model", filed->id));

  // A rollback restores the old quota as a new version.
  auto back = store_->RollbackPolicy(2, "root", "", 5000);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(ActiveQuota("vision/training").guaranteed, 4000);
  EXPECT_EQ(ActiveQuota("vision/training").borrow_limit, 2000);
}

TEST_F(QuotaRequestTest, ApprovalThatBreaksThePolicyIsRefusedAndChangesNothing) {
  // 9 GPUs for training plus eval's 2 is more than vision's 8.
  auto filed = store_->FileQuotaRequest(Ask("vision/training", 9000), "alice", 3000);
  ASSERT_TRUE(filed.has_value());
  auto approved = control::ApproveQuotaRequest(*store_, filed->id, "root", "", 4000);
  ASSERT_FALSE(approved.has_value());
  EXPECT_NE(approved.error().message.find("more than the parent's 8"), std::string::npos)
      << approved.error().message;
  EXPECT_NE(approved.error().message.find("quota request"), std::string::npos);
  EXPECT_EQ(ActiveVersion(), 2);
  EXPECT_EQ(ActiveQuota("vision/training").guaranteed, 4000);
  EXPECT_EQ(store_->ListPolicyVersions()->size(), 2u);
  auto still = store_->GetQuotaRequest(filed->id);
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(still->state, QuotaRequestState::kPending);
  EXPECT_FALSE(still->policy_version.has_value());
}

TEST_F(QuotaRequestTest, RejectAndWithdrawLeaveThePolicyAlone) {
  auto a = store_->FileQuotaRequest(Ask("vision/training", 6000), "alice", 3000);
  auto b = store_->FileQuotaRequest(Ask("vision/eval", 1000), "alice", 3000);
  ASSERT_TRUE(a.has_value() && b.has_value());
  auto rejected = store_->RejectQuotaRequest(a->id, "root", "no capacity", 4000);
  ASSERT_TRUE(rejected.has_value()) << rejected.error().message;
  EXPECT_EQ(rejected->state, QuotaRequestState::kRejected);
  EXPECT_EQ(rejected->decision_comment, "no capacity");
  auto withdrawn = store_->WithdrawQuotaRequest(b->id, "alice", 4000);
  ASSERT_TRUE(withdrawn.has_value());
  EXPECT_EQ(withdrawn->state, QuotaRequestState::kWithdrawn);
  EXPECT_EQ(withdrawn->decided_by, "alice");
  EXPECT_EQ(ActiveVersion(), 2);
  EXPECT_EQ(ActiveQuota("vision/training").guaranteed, 4000);
}

TEST_F(QuotaRequestTest, DecidingTwiceIsRefusedNamingTheState) {
  auto filed = store_->FileQuotaRequest(Ask("vision/training", 6000), "alice", 3000);
  ASSERT_TRUE(filed.has_value());
  ASSERT_TRUE(control::ApproveQuotaRequest(*store_, filed->id, "root", "", 4000).has_value());
  auto again = control::ApproveQuotaRequest(*store_, filed->id, "root", "", 5000);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, Code::kFailedPrecondition);
  EXPECT_NE(again.error().message.find("is Approved"), std::string::npos) << again.error().message;
  EXPECT_EQ(ActiveVersion(), 3);  // no second version
  auto reject = store_->RejectQuotaRequest(filed->id, "root", "late", 5000);
  ASSERT_FALSE(reject.has_value());
  EXPECT_EQ(reject.error().code, Code::kFailedPrecondition);
  auto withdraw = store_->WithdrawQuotaRequest(filed->id, "alice", 5000);
  ASSERT_FALSE(withdraw.has_value());
  EXPECT_EQ(store_->GetQuotaRequest(filed->id)->state, QuotaRequestState::kApproved);
  auto missing = control::ApproveQuotaRequest(*store_, 999, "root", "", 5000);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, Code::kNotFound);
}

}  // namespace
}  // namespace berth::store
