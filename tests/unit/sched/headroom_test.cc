// Inference headroom (policy pools[].inference_headroom): a pool's last GPUs
// are kept for inference replicas. Jobs that are not inference replicas may
// use them only if preemptible, and an inference replica that cannot be
// placed takes them back from such jobs at once, whatever their priority,
// quota or the reclaim grace, but only where such jobs hold the headroom.
#include <gtest/gtest.h>

#include "model/reason.h"
#include "sched/core_scheduler.h"
#include "unit/builders.h"

namespace berth::sched {
namespace {

constexpr TimeMs kMinute = 60'000;
constexpr TimeMs kHour = 60 * kMinute;

model::Policy HeadroomPolicy(const std::string& grace) {
  auto p = model::ParsePolicy("reclaim_grace: " + grace +
                              "\n"
                              "pools:\n"
                              "  - {name: default, selector: {}, inference_headroom: {gpus: 2}}\n"
                              "queues:\n"
                              "  - name: ml\n"
                              "    children:\n"
                              "      - {name: training}\n"
                              "      - {name: serving, kind: inference}\n");
  EXPECT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  return p.value_or(model::DefaultPolicy());
}

PendingJob Training(std::int64_t id, std::uint32_t gpus, bool preemptible) {
  PendingJob j;
  j.id = id;
  j.tenant = "ml";
  j.queue = "training";
  j.submitted_at_ms = 1;
  j.resources.gpus = gpus;
  j.preemptible = preemptible;
  return j;
}

PendingJob Replica(std::int64_t id, std::uint32_t gpus) {
  PendingJob j;
  j.id = id;
  j.tenant = "ml";
  j.queue = "serving";
  j.submitted_at_ms = 2;
  j.resources.gpus = gpus;
  j.preemptible = false;  // one of the service's minimum
  j.service = "ml/coder";
  return j;
}

RunningJob Holding(std::int64_t id, std::uint32_t gpus, bool preemptible) {
  RunningJob r;
  r.id = id;
  r.tenant = "ml";
  r.queue = "training";
  r.priority = model::Priority::kHigh;  // priority does not shield it from headroom reclaim
  r.preemptible = preemptible;
  r.started_at_ms = 0;
  r.resources.gpus = gpus;
  ReplicaPlacement rp{0, "a", {}};
  for (std::uint32_t i = 0; i < gpus; ++i) rp.gpu_indices.push_back(i);
  r.replicas = {rp};
  return r;
}

Snapshot OneNode(const std::string& grace, std::vector<RunningJob> running,
                 std::vector<PendingJob> pending) {
  Snapshot s;
  s.now_ms = 2 * kHour;
  s.policy = HeadroomPolicy(grace);
  s.nodes = {tests::ReadyH100View("a", 8)};
  s.running = std::move(running);
  for (const auto& r : s.running) {
    for (auto idx : r.replicas[0].gpu_indices) s.nodes[0].gpus[idx].free = false;
  }
  s.pending = std::move(pending);
  return s;
}

const model::Reason* WhyOf(const Plan& plan, std::int64_t id) {
  for (const auto& d : plan.pending) {
    if (d.job_id == id) return &d.reason;
  }
  return nullptr;
}

TEST(InferenceHeadroom, ANonPreemptibleTrainingJobMayNotUseItAndSaysSo) {
  // 7 of 8 GPUs would reach into the pool's 2 GPUs of headroom.
  Plan plan = CoreScheduler().Schedule(OneNode("0s", {}, {Training(10, 7, false)}));
  EXPECT_TRUE(plan.placements.empty());
  const model::Reason* why = WhyOf(plan, 10);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->code, model::ReasonCode::kNoNodeFits);
  EXPECT_EQ(why->counts.at(std::string(model::kCauseInferenceHeadroom)), 1);
  EXPECT_EQ(why->detail, "headroom_pool=default");
  const std::string text = model::RenderReason(*why, model::Lang::kEn);
  EXPECT_NE(text.find("pool default keeps its last GPUs for inference replicas"), std::string::npos)
      << text;
  EXPECT_NE(text.find("if it were preemptible"), std::string::npos) << text;
  EXPECT_NE(model::RenderReason(*why, model::Lang::kZh).find("inference_headroom"),
            std::string::npos);

  // Outside the headroom it runs: 6 of 8.
  Plan six = CoreScheduler().Schedule(OneNode("0s", {}, {Training(11, 6, false)}));
  ASSERT_EQ(six.placements.size(), 1U);
  EXPECT_EQ(six.placements[0].job_id, 11);
}

TEST(InferenceHeadroom, APreemptibleTrainingJobFillsIt) {
  Plan plan = CoreScheduler().Schedule(OneNode("0s", {}, {Training(10, 8, true)}));
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 10);
  EXPECT_TRUE(plan.evictions.empty());
}

TEST(InferenceHeadroom, APendingInferenceReplicaReclaimsItNamingTheService) {
  // A high-priority preemptible training job fills the pool; a replica of
  // ml/coder takes GPUs back from it.
  Plan plan = CoreScheduler().Schedule(OneNode("0s", {Holding(1, 8, true)}, {Replica(10, 2)}));
  ASSERT_EQ(plan.evictions.size(), 1U);
  const Eviction& e = plan.evictions[0];
  EXPECT_EQ(e.job_id, 1);
  EXPECT_EQ(e.by_job, 10);
  EXPECT_EQ(e.cause, EvictionCause::kReclaim);
  EXPECT_EQ(e.reason.code, model::ReasonCode::kHeadroomReclaimed);
  EXPECT_EQ(e.reason.detail, "ml/coder default");
  const std::string text = model::RenderReason(e.reason, model::Lang::kEn);
  EXPECT_NE(text.find("reclaimed for inference service ml/coder (job 10) from pool default's "
                      "inference headroom"),
            std::string::npos)
      << text;
  EXPECT_NE(model::RenderReason(e.reason, model::Lang::kZh).find("ml/coder"), std::string::npos);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 10);
  EXPECT_EQ(plan.placements[0].after_evicting, (std::vector<std::int64_t>{1}));
}

TEST(InferenceHeadroom, TheHeadroomIsTakenBackAtOnceWhateverTheReclaimGrace) {
  // The training job took the headroom on preemptible terms: the replica
  // does not wait out the 30m grace that protects lenders' work.
  Plan plan = CoreScheduler().Schedule(OneNode("30m", {Holding(1, 8, true)}, {Replica(10, 2)}));
  ASSERT_EQ(plan.evictions.size(), 1U);
  EXPECT_EQ(plan.evictions[0].job_id, 1);
  EXPECT_EQ(plan.evictions[0].reason.code, model::ReasonCode::kHeadroomReclaimed);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 10);
}

TEST(InferenceHeadroom, TrainingWithinThePoolsShareIsNotTakenThroughIt) {
  // Inference replicas already hold the headroom (GPUs 6, 7); training holds
  // the other 6, its share: a further replica finds no headroom to take back.
  RunningJob serving;
  serving.id = 2;
  serving.tenant = "ml";
  serving.queue = "serving";
  serving.preemptible = false;
  serving.service = "ml/coder";
  serving.resources.gpus = 2;
  serving.replicas = {ReplicaPlacement{0, "a", {6, 7}}};
  Snapshot s = OneNode("0s", {Holding(1, 6, true)}, {Replica(10, 2)});
  s.running.push_back(serving);
  s.nodes[0].gpus[6].free = false;
  s.nodes[0].gpus[7].free = false;
  Plan plan = CoreScheduler().Schedule(s);
  for (const auto& e : plan.evictions) {
    EXPECT_NE(e.reason.code, model::ReasonCode::kHeadroomReclaimed) << e.job_id;
  }
  EXPECT_TRUE(plan.placements.empty());
}

TEST(InferenceHeadroom, AnInferenceReplicaNeverEvictsANonPreemptibleJobThroughIt) {
  Plan plan = CoreScheduler().Schedule(OneNode("0s", {Holding(1, 8, false)}, {Replica(10, 2)}));
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_NE(WhyOf(plan, 10), nullptr);
}

TEST(InferenceHeadroom, AJobThatIsNotAReplicaReclaimsNothingThroughIt) {
  // The same job in the inference queue without a service is no replica.
  PendingJob plain = Replica(10, 2);
  plain.service.clear();
  Plan plan = CoreScheduler().Schedule(OneNode("0s", {Holding(1, 8, true)}, {plain}));
  EXPECT_TRUE(plan.evictions.empty());
}

}  // namespace
}  // namespace berth::sched
