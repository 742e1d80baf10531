// The policy conformance suite: every backend of store::PolicyStore
// (SqliteStore; PostgreSQL next) runs the same tests of its versioned policy:
// a fresh store's default version, apply, preview and rollback as appends,
// the guard that keeps a queue holding work, and an apply on a stale base.
// The guard counts the jobs of the backend's JobStore, so a backend here
// keeps both (backends.h). Quota requests, decided into policy versions, are
// quota_request_conformance_test.cc; what only SQLite does (reopening,
// migrating an old schema) stays in sqlite_store_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/lifecycle.h"
#include "model/policy.h"
#include "unit/builders.h"
#include "unit/store/backends.h"
#include "unit/store/policies.h"

namespace berth::store {
namespace {

using tests::kDefaultOnly;
using tests::kVisionPolicy;

class PolicyStoreConformance : public tests::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(b_.policy, nullptr);
    ASSERT_NE(b_.jobs, nullptr);
    nodes_.push_back({tests::H100Node(8), model::NodeState::kReady, 0, {}, {}});
  }

  PolicyStore& policy() { return *b_.policy; }
  JobStore& jobs() { return *b_.jobs; }

  static model::JobSpec Spec(std::string name) {
    model::JobSpec s;
    s.name = std::move(name);
    s.command = {"true"};
    s.replicas = 1;
    s.resources.gpus = 1;
    return s;
  }
  // Places job `id` on n1 with one GPU per replica, replica r on GPU r, under
  // `policy_version`.
  void Place(std::int64_t id, std::uint32_t replicas, std::int64_t policy_version) {
    sched::Plan plan;
    sched::Placement p{id, {}};
    for (std::uint32_t r = 0; r < replicas; ++r) p.replicas.push_back({r, "n1", {r}});
    plan.placements.push_back(p);
    ASSERT_TRUE(control::ApplyPlan(jobs(), plan, nodes_, policy_version, 2000).has_value());
  }

  std::vector<NodeRecord> nodes_;
};

TEST_P(PolicyStoreConformance, FreshInstallHasDefaultQueue) {
  EXPECT_TRUE(policy().QueueExists("default", "default").value());
  EXPECT_FALSE(policy().QueueExists("vision", "default").value());
}

TEST_P(PolicyStoreConformance, FreshInstallHasTheDefaultPolicyAsVersionOne) {
  auto active = policy().ActivePolicy();
  ASSERT_TRUE(active.has_value()) << active.error().message;
  EXPECT_EQ(active->version, 1);
  EXPECT_EQ(active->policy.version, 1);
  EXPECT_EQ(active->applied_by, "berthd");
  EXPECT_NE(active->policy.FindQueue("default/default"), nullptr);
  EXPECT_EQ(active->normalized, model::PolicyToYaml(model::DefaultPolicy()));
  EXPECT_FALSE(active->rolled_back_from.has_value());
  auto versions = policy().ListPolicyVersions();
  ASSERT_TRUE(versions.has_value());
  ASSERT_EQ(versions->size(), 1U);
}

TEST_P(PolicyStoreConformance, ApplyListAndRollbackAreAppendOnly) {
  auto v2 = policy().ApplyPolicy(kVisionPolicy, "alice", "vision team", 2000);
  ASSERT_TRUE(v2.has_value()) << v2.error().field << ": " << v2.error().message;
  EXPECT_EQ(*v2, 2);
  EXPECT_TRUE(policy().QueueExists("vision", "training").value());
  EXPECT_TRUE(policy().QueueExists("vision", "training/nlp").value());
  EXPECT_FALSE(policy().QueueExists("vision", "nlp").value());

  auto v3 = policy().ApplyPolicy(kDefaultOnly, "bob", "", 3000);
  ASSERT_TRUE(v3.has_value()) << v3.error().message;
  EXPECT_EQ(*v3, 3);
  EXPECT_FALSE(policy().QueueExists("vision", "training").value());

  auto v4 = policy().RollbackPolicy(2, "carol", "", 4000);
  ASSERT_TRUE(v4.has_value()) << v4.error().message;
  EXPECT_EQ(*v4, 4);
  EXPECT_TRUE(policy().QueueExists("vision", "training").value());
  auto active = *policy().ActivePolicy();
  EXPECT_EQ(active.version, 4);
  EXPECT_EQ(active.yaml, kVisionPolicy);  // verbatim, comment included
  EXPECT_EQ(active.applied_by, "carol");
  EXPECT_EQ(active.comment, "rollback to v2");
  EXPECT_EQ(active.rolled_back_from, 3);
  EXPECT_EQ(active.restores, 2);
  EXPECT_EQ(active.policy.version, 4);

  auto versions = *policy().ListPolicyVersions();
  ASSERT_EQ(versions.size(), 4U);
  for (std::size_t i = 0; i < versions.size(); ++i) {
    EXPECT_EQ(versions[i].version, static_cast<std::int64_t>(i + 1));
  }
  // History is never rewritten: v2 and v3 are as they were applied.
  EXPECT_EQ(versions[1].yaml, kVisionPolicy);
  EXPECT_EQ(versions[1].applied_by, "alice");
  EXPECT_EQ(versions[1].comment, "vision team");
  EXPECT_EQ(versions[2].yaml, kDefaultOnly);
  EXPECT_EQ(versions[3].normalized, versions[1].normalized);

  auto v3_again = policy().GetPolicyVersion(3);
  ASSERT_TRUE(v3_again.has_value());
  EXPECT_EQ(v3_again->policy.version, 3);
  EXPECT_EQ(v3_again->policy.FindQueue("vision/training"), nullptr);
  EXPECT_EQ(policy().GetPolicyVersion(9).error().code, Code::kNotFound);
  EXPECT_EQ(policy().RollbackPolicy(9, "x", "", 5000).error().code, Code::kNotFound);
  EXPECT_EQ(policy().ListPolicyVersions()->size(), 4U);
}

TEST_P(PolicyStoreConformance, InvalidPolicyChangesNothingAndNamesTheField) {
  auto bad = policy().ApplyPolicy("queues:\n  - name: x\n    bogus: 1\n", "alice", "", 2000);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
  EXPECT_EQ(bad.error().field, "queues[0].bogus");
  EXPECT_EQ(policy().ActivePolicy()->version, 1);
  EXPECT_EQ(policy().ListPolicyVersions()->size(), 1U);
}

TEST_P(PolicyStoreConformance, PolicyThatRemovesABusyQueueIsRefused) {
  ASSERT_TRUE(policy().ApplyPolicy(kVisionPolicy, "alice", "", 2000).has_value());
  auto spec = Spec("a");
  spec.tenant = "vision";
  spec.queue = "training/nlp";
  auto pending = *jobs().CreateJob(spec, 2100);
  spec.queue = "training";
  auto running = *jobs().CreateJob(spec, 2200);
  Place(running, 1, 2);

  auto refused = policy().ApplyPolicy(kDefaultOnly, "bob", "", 3000);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kInvalidArgument);
  EXPECT_EQ(refused.error().field, "queues");
  EXPECT_NE(refused.error().message.find("vision/training (1 job), vision/training/nlp (1 job)"),
            std::string::npos)
      << refused.error().message;
  auto rollback = policy().RollbackPolicy(1, "bob", "", 3000);
  ASSERT_FALSE(rollback.has_value());
  EXPECT_EQ(rollback.error().field, "to");
  EXPECT_TRUE(rollback.error().message.starts_with(
      "cannot roll back to v1: v1 removes queues that still hold pending or running jobs: "))
      << rollback.error().message;
  EXPECT_EQ(policy().ActivePolicy()->version, 2);
  EXPECT_EQ(policy().ListPolicyVersions()->size(), 2U);

  // Once the work is gone the queues may go.
  ASSERT_TRUE(control::CancelJob(jobs(), pending, "bob", 3100).has_value());
  ASSERT_TRUE(control::MarkRunExited(jobs(),
                                     {jobs().GetJob(running)->runs[0].run_id, 0, 0, 2300, 3200,
                                      model::StopCause::kNone, ""},
                                     3200)
                  .has_value());
  auto applied = policy().ApplyPolicy(kDefaultOnly, "bob", "", 3300);
  ASSERT_TRUE(applied.has_value()) << applied.error().message;
  EXPECT_EQ(*applied, 3);
}

TEST_P(PolicyStoreConformance, PreviewChecksEverythingAndChangesNothing) {
  auto preview = policy().PreviewPolicy(kVisionPolicy, "alice", 2000);
  ASSERT_TRUE(preview.has_value()) << preview.error().message;
  EXPECT_EQ(preview->version, 2);
  EXPECT_NE(preview->policy.FindQueue("vision/training/nlp"), nullptr);
  EXPECT_EQ(policy().ActivePolicy()->version, 1);
  EXPECT_EQ(policy().ListPolicyVersions()->size(), 1U);
  EXPECT_FALSE(policy().QueueExists("vision", "training").value());
  // The real apply still gets version 2.
  ASSERT_EQ(policy().ApplyPolicy(kVisionPolicy, "alice", "", 2100).value(), 2);
  auto spec = Spec("a");
  spec.tenant = "vision";
  spec.queue = "training";
  ASSERT_TRUE(jobs().CreateJob(spec, 2200).has_value());
  EXPECT_EQ(policy().PreviewPolicy(kDefaultOnly, "bob", 2300).error().field, "queues");
  EXPECT_EQ(policy().PreviewPolicy("queues: 3\n", "bob", 2300).error().field, "queues");
}

TEST_P(PolicyStoreConformance, JobsGoOnlyToQueuesOfTheActivePolicy) {
  auto spec = Spec("a");
  spec.tenant = "vision";
  spec.queue = "training";
  auto refused = jobs().CreateJob(spec, 1500);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "queue");
  EXPECT_NE(refused.error().message.find("queue vision/training does not exist in policy v1"),
            std::string::npos)
      << refused.error().message;
  ASSERT_TRUE(policy().ApplyPolicy(kVisionPolicy, "alice", "", 2000).has_value());
  EXPECT_TRUE(jobs().CreateJob(spec, 2100).has_value());
}

// The check of the base and the apply are one transaction: an apply made on
// a version another apply has since replaced changes nothing and names the
// version that landed in between.
TEST_P(PolicyStoreConformance, AnApplyOnAStaleBaseIsRefusedNamingTheVersionThatLanded) {
  auto v2 = policy().ApplyPolicyOnBase(kVisionPolicy, "alice", "", 1, 2000);
  ASSERT_TRUE(v2.has_value()) << v2.error().message;
  EXPECT_EQ(*v2, 2);

  auto stale = policy().ApplyPolicyOnBase(kDefaultOnly, "bob", "", 1, 3000);
  ASSERT_FALSE(stale.has_value());
  EXPECT_EQ(stale.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(stale.error().field, "base_version");
  EXPECT_NE(stale.error().message.find("version 2 was applied by alice"), std::string::npos)
      << stale.error().message;
  EXPECT_EQ(policy().ActivePolicy()->version, 2);
  EXPECT_EQ(policy().ListPolicyVersions()->size(), 2U);
  EXPECT_TRUE(policy().QueueExists("vision", "training").value());

  // On the active version, or with no base at all, it applies.
  auto v3 = policy().ApplyPolicyOnBase(kDefaultOnly, "bob", "", 2, 3100);
  ASSERT_TRUE(v3.has_value()) << v3.error().message;
  EXPECT_EQ(*v3, 3);
  auto v4 = policy().ApplyPolicyOnBase(kVisionPolicy, "carol", "", std::nullopt, 3200);
  ASSERT_TRUE(v4.has_value()) << v4.error().message;
  EXPECT_EQ(*v4, 4);
  EXPECT_EQ(policy().ActivePolicy()->applied_by, "carol");
}

// A rollback keeps the comment it is given, and restores the text of the
// version it names, not the one before the active version.
TEST_P(PolicyStoreConformance, ARollbackRestoresTheTextOfTheVersionNamedWithItsComment) {
  ASSERT_TRUE(policy().ApplyPolicy(kVisionPolicy, "alice", "", 2000).has_value());
  ASSERT_TRUE(policy().ApplyPolicy(kDefaultOnly, "bob", "", 3000).has_value());
  auto v4 = policy().RollbackPolicy(1, "carol", "back to the start", 4000);
  ASSERT_TRUE(v4.has_value()) << v4.error().message;
  auto active = policy().ActivePolicy();
  ASSERT_TRUE(active.has_value()) << active.error().message;
  EXPECT_EQ(active->version, 4);
  EXPECT_EQ(active->comment, "back to the start");
  EXPECT_EQ(active->applied_ms, 4000);
  EXPECT_EQ(active->rolled_back_from, 3);
  EXPECT_EQ(active->restores, 1);
  auto v1 = policy().GetPolicyVersion(1);
  ASSERT_TRUE(v1.has_value()) << v1.error().message;
  EXPECT_EQ(active->yaml, v1->yaml);
  EXPECT_EQ(active->normalized, v1->normalized);
  EXPECT_FALSE(policy().QueueExists("vision", "training").value());
  // Versions an apply made restore nothing.
  auto v2 = policy().GetPolicyVersion(2);
  ASSERT_TRUE(v2.has_value()) << v2.error().message;
  EXPECT_FALSE(v2->rolled_back_from.has_value());
  EXPECT_FALSE(v2->restores.has_value());
  EXPECT_EQ(v2->applied_ms, 2000);
}

INSTANTIATE_TEST_SUITE_P(Backends, PolicyStoreConformance,
                         ::testing::ValuesIn(tests::StoreBackends()), tests::BackendName);

}  // namespace
}  // namespace berth::store
