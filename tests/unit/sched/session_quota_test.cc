// Whether notebook sessions and batch training share a tenant's GPUs is
// how the policy nests their queues (docs/services.md, "Sessions and
// quota"). Both layouts of that page, on the scheduler itself: a session's
// replica is a non-preemptible job of its interactive queue.
#include <gtest/gtest.h>

#include "sched/core_scheduler.h"
#include "unit/builders.h"

namespace berth::sched {
namespace {

// The page's two policies, as written there.
constexpr const char* kShared = R"(queues:
  - name: vision
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: training
      - name: notebooks
        kind: interactive
)";

constexpr const char* kSeparate = R"(queues:
  - name: vision
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: training
        quota:
          gpus: {guaranteed: 6, borrow_limit: 0}
      - name: notebooks
        kind: interactive
        quota:
          gpus: {guaranteed: 2, borrow_limit: 0}
)";

PendingJob Waiting(std::int64_t id, const std::string& queue, std::uint32_t gpus,
                   bool preemptible) {
  PendingJob j;
  j.id = id;
  j.tenant = "vision";
  j.queue = queue;
  j.submitted_at_ms = id;
  j.resources.gpus = gpus;
  j.preemptible = preemptible;
  return j;
}

PendingJob Session(std::int64_t id) {
  PendingJob j = Waiting(id, "notebooks", 1, false);
  j.service = "vision/nb" + std::to_string(id);
  return j;
}

RunningJob Holding(std::int64_t id, const std::string& queue, std::uint32_t gpus,
                   std::uint32_t first) {
  RunningJob r;
  r.id = id;
  r.tenant = "vision";
  r.queue = queue;
  r.preemptible = false;
  r.started_at_ms = 0;
  r.resources.gpus = gpus;
  ReplicaPlacement rp{0, "a", {}};
  for (std::uint32_t i = 0; i < gpus; ++i) rp.gpu_indices.push_back(first + i);
  r.replicas = {rp};
  return r;
}

Snapshot Cluster(const char* policy, std::uint32_t gpus, std::vector<RunningJob> running,
                 std::vector<PendingJob> pending) {
  Snapshot s;
  s.now_ms = 3'600'000;
  auto p = model::ParsePolicy(policy);
  EXPECT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  s.policy = p.value_or(model::DefaultPolicy());
  s.nodes = {tests::ReadyH100View("a", gpus)};
  s.running = std::move(running);
  for (const auto& r : s.running) {
    for (auto idx : r.replicas[0].gpu_indices) s.nodes[0].gpus[idx].free = false;
  }
  s.pending = std::move(pending);
  return s;
}

std::vector<std::int64_t> Placed(const Plan& plan) {
  std::vector<std::int64_t> ids;
  for (const auto& p : plan.placements) ids.push_back(p.job_id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(SessionQuota, SharedANotebookTakesWhatTrainingLeavesOfTheTenantsGuarantee) {
  // Training holds 7 of the tenant's 8: one session fits, the second is
  // over the tenant's guarantee (a session is not preemptible).
  Plan plan = CoreScheduler().Schedule(
      Cluster(kShared, 16, {Holding(1, "training", 7, 0)}, {Session(10), Session(11)}));
  EXPECT_EQ(Placed(plan), (std::vector<std::int64_t>{10}));
  EXPECT_TRUE(plan.evictions.empty());
  // With training at 8, no session runs, though 8 GPUs are free.
  Plan full =
      CoreScheduler().Schedule(Cluster(kShared, 16, {Holding(1, "training", 8, 0)}, {Session(10)}));
  EXPECT_TRUE(full.placements.empty());
  EXPECT_TRUE(full.evictions.empty());
}

TEST(SessionQuota, SeparateNotebooksHaveTheirOwnGPUsAndNoMore) {
  // Training holds 6: two sessions run, the third is past the notebooks'
  // limit with GPUs free.
  Plan plan = CoreScheduler().Schedule(Cluster(kSeparate, 16, {Holding(1, "training", 6, 0)},
                                               {Session(10), Session(11), Session(12)}));
  EXPECT_EQ(Placed(plan), (std::vector<std::int64_t>{10, 11}));
  // Training never takes the notebooks' 2, even while no session runs:
  // 8 GPUs of training wait (over its limit), 6 run.
  Plan training =
      CoreScheduler().Schedule(Cluster(kSeparate, 8, {}, {Waiting(20, "training", 8, true)}));
  EXPECT_TRUE(training.placements.empty());
  ASSERT_EQ(training.pending.size(), 1U);
  EXPECT_EQ(training.pending[0].reason.code, model::ReasonCode::kOverQuota);
  Plan six =
      CoreScheduler().Schedule(Cluster(kSeparate, 8, {}, {Waiting(21, "training", 6, true)}));
  EXPECT_EQ(Placed(six), (std::vector<std::int64_t>{21}));
  // And with training at its 6, the sessions get theirs.
  Plan sessions = CoreScheduler().Schedule(
      Cluster(kSeparate, 8, {Holding(1, "training", 6, 0)}, {Session(10), Session(11)}));
  EXPECT_EQ(Placed(sessions), (std::vector<std::int64_t>{10, 11}));
}

}  // namespace
}  // namespace berth::sched
