// "Would run now if" hints are verified by running the cycle again on the
// same snapshot with the hint's one change made to the job (sched/hints.h):
// a hint the second cycle does not bear out is dropped, and the budget of
// checks per pass never lets an unchecked hint through unless an earlier
// pass checked and showed it.
#include "sched/hints.h"

#include <gtest/gtest.h>

#include "model/reason.h"
#include "sched/core_scheduler.h"
#include "unit/builders.h"

namespace berth::sched {
namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;

// Node `a`: 8 free A100s. Node `h`: 8 H100s, all held by job 1. Jobs 10 and
// 11 each ask for 4 H100s.
Snapshot ModelsSnapshot() {
  Snapshot s;
  s.now_ms = 3'600'000;
  NodeView a = tests::ReadyH100View("a", 8);
  for (auto& g : a.gpus) g.model = "A100-80GB";
  NodeView h = tests::ReadyH100View("h", 8);
  for (auto& g : h.gpus) g.free = false;
  s.nodes = {a, h};
  RunningJob holder;
  holder.id = 1;
  holder.tenant = "default";
  holder.queue = "default";
  holder.priority = model::Priority::kHigh;
  holder.started_at_ms = 0;
  holder.resources.gpus = 8;
  holder.replicas = {{0, "h", {0, 1, 2, 3, 4, 5, 6, 7}}};
  s.running = {holder};
  for (std::int64_t id : {10, 11}) {
    PendingJob j;
    j.id = id;
    j.tenant = "default";
    j.queue = "default";
    j.submitted_at_ms = id;
    j.resources.gpus = 4;
    j.resources.gpu_model = "H100-80GB";
    s.pending.push_back(j);
  }
  return s;
}

const model::Reason* ReasonOf(const Plan& plan, std::int64_t id) {
  for (const auto& d : plan.pending) {
    if (d.job_id == id) return &d.reason;
  }
  return nullptr;
}

TEST(Hints, AReasonsHintIsReadBackAsTheChangeItNames) {
  model::Reason r;
  r.detail = "gpu_model=A100-80GB";
  EXPECT_EQ(HintOf(r), (Hint{Hint::Kind::kGpuModel, "A100-80GB", 0}));
  r.detail = "gpu_memory=42949672960";
  EXPECT_EQ(HintOf(r), (Hint{Hint::Kind::kGpuMemory, "", 40 * kGiB}));
  r.detail = "gpu_memory=40Gi";  // not a byte count: no hint
  EXPECT_EQ(HintOf(r), std::nullopt);
  r.detail = "pool=west";
  EXPECT_EQ(HintOf(r), (Hint{Hint::Kind::kPool, "west", 0}));
  r.detail = "headroom_pool=default";
  EXPECT_EQ(HintOf(r), (Hint{Hint::Kind::kPreemptible, "default", 0}));
  r.detail = "queue_pool=vision inference";
  Hint bound{Hint::Kind::kQueuePool, "inference", 0};
  bound.queue = "vision";
  EXPECT_EQ(HintOf(r), bound);
  r.detail = "queue_pool=vision";  // no pool
  EXPECT_EQ(HintOf(r), std::nullopt);
  r.detail = "vision gpus";  // a quota reason's queue and resource
  EXPECT_EQ(HintOf(r), std::nullopt);
  r.counts[std::string(model::kWouldFitGpusPerReplica)] = 2;
  EXPECT_EQ(HintOf(r), (Hint{Hint::Kind::kGpusPerReplica, "", 2}));

  model::Reason with;
  with.detail = "pool=west";
  with.counts[std::string(model::kWouldFitGpusPerReplica)] = 2;
  with.counts["nodes"] = 3;
  DropHint(with);
  EXPECT_EQ(HintOf(with), std::nullopt);
  EXPECT_EQ(with.detail, "");
  EXPECT_EQ(with.counts.at("nodes"), 3) << "the rest of the reason stands";
  model::Reason quota;
  quota.detail = "vision gpus";
  DropHint(quota);
  EXPECT_EQ(quota.detail, "vision gpus");
}

TEST(Hints, ApplyingAHintMakesExactlyItsChange) {
  PendingJob j;
  j.resources.gpus = 8;
  j.replicas = 2;
  j.resources.gpu_model = "H100-80GB";
  PendingJob smaller = j;
  ASSERT_TRUE(ApplyHint({Hint::Kind::kGpusPerReplica, "", 4}, smaller));
  EXPECT_EQ(smaller.resources.gpus, 4U);
  EXPECT_EQ(smaller.replicas, 4U);
  EXPECT_EQ(smaller.resources.gpu_model, "H100-80GB");
  PendingJob odd = j;
  EXPECT_FALSE(ApplyHint({Hint::Kind::kGpusPerReplica, "", 3}, odd)) << "16 GPUs are not 3s";
  PendingJob model = j;
  ASSERT_TRUE(ApplyHint({Hint::Kind::kGpuModel, "A100-80GB", 0}, model));
  EXPECT_EQ(model.resources.gpu_model, "A100-80GB");
  EXPECT_EQ(model.resources.gpus, 8U);
  PendingJob pool = j;
  ASSERT_TRUE(ApplyHint({Hint::Kind::kPool, "west", 0}, pool));
  EXPECT_EQ(pool.pool, "west");
  PendingJob preemptible = j;
  ASSERT_TRUE(ApplyHint({Hint::Kind::kPreemptible, "default", 0}, preemptible));
  EXPECT_EQ(preemptible.preemptible, std::optional<bool>(true));
  PendingJob unchanged = j;
  Hint bind{Hint::Kind::kQueuePool, "inference", 0};
  bind.queue = "vision";
  EXPECT_FALSE(ApplyHint(bind, unchanged)) << "binding a pool is the policy's change";
}

// Queue vision is bound to pool training, which is full; pool inference
// has room. Bound to vision as well, the job runs: the check binds it on a
// copy of the policy and gives the policy back.
TEST(Hints, APoolTheQueueIsNotBoundToIsCheckedByBindingIt) {
  Snapshot s;
  s.now_ms = 3'600'000;
  auto policy = model::ParsePolicy(
      "pools:\n"
      "  - {name: training, selector: {pool: training}}\n"
      "  - {name: inference, selector: {pool: inference}}\n"
      "queues:\n"
      "  - {name: vision, pools: [training], children: [{name: training}]}\n");
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  s.policy = *policy;
  NodeView t1 = tests::ReadyH100View("t1", 8);
  t1.labels["pool"] = "training";
  for (auto& g : t1.gpus) g.free = false;
  NodeView i1 = tests::ReadyH100View("i1", 8);
  i1.labels["pool"] = "inference";
  s.nodes = {i1, t1};
  PendingJob j;
  j.id = 10;
  j.tenant = "vision";
  j.queue = "training";
  j.resources.gpus = 4;
  s.pending = {j};
  CoreScheduler core;
  Plan plan = core.Schedule(s);
  ASSERT_EQ(plan.pending.size(), 1U);
  Hint bind{Hint::Kind::kQueuePool, "inference", 0};
  bind.queue = "vision";
  EXPECT_EQ(HintOf(plan.pending[0].reason), bind) << model::RenderReason(plan.pending[0].reason);
  Snapshot scratch = s;
  EXPECT_TRUE(HintHolds(core, scratch, 10, bind));
  EXPECT_EQ(scratch.policy.FindQueue("vision")->pools, std::vector<std::string>{"training"});
  Hint unknown = bind;
  unknown.queue = "nlp";
  EXPECT_FALSE(HintHolds(core, scratch, 10, unknown)) << "no such queue";
  Hint bound_already = bind;
  bound_already.value = "training";
  EXPECT_FALSE(HintHolds(core, scratch, 10, bound_already)) << "already bound: no change";
}

TEST(Hints, AHintTheCycleBearsOutIsKept) {
  const Snapshot s = ModelsSnapshot();
  CoreScheduler core;
  Plan plan = core.Schedule(s);
  ASSERT_TRUE(plan.placements.empty());
  ASSERT_NE(ReasonOf(plan, 10), nullptr);
  ASSERT_EQ(HintOf(*ReasonOf(plan, 10)), (Hint{Hint::Kind::kGpuModel, "A100-80GB", 0}))
      << model::RenderReason(*ReasonOf(plan, 10));

  const HintCheck check = VerifyHints(core, s, plan, 8);
  EXPECT_GE(check.found, 1U);
  EXPECT_EQ(check.verified, check.found);
  EXPECT_EQ(check.refuted, 0U);
  EXPECT_EQ(HintOf(*ReasonOf(plan, 10)), (Hint{Hint::Kind::kGpuModel, "A100-80GB", 0}));
  EXPECT_NE(model::RenderReason(*ReasonOf(plan, 10)).find("would run now with gpu_model A100-80GB"),
            std::string::npos);
}

TEST(Hints, AHintTheCycleRefusesIsDropped) {
  const Snapshot s = ModelsSnapshot();
  CoreScheduler core;
  Plan plan = core.Schedule(s);
  // A hint no cycle would bear out: there is no B200 in the cluster.
  for (auto& d : plan.pending) d.reason.detail = "gpu_model=B200";
  const HintCheck check = VerifyHints(core, s, plan, 8);
  EXPECT_EQ(check.found, 2U);
  EXPECT_EQ(check.refuted, 2U);
  EXPECT_EQ(check.verified, 0U);
  for (const auto& d : plan.pending) {
    EXPECT_EQ(HintOf(d.reason), std::nullopt) << "job " << d.job_id;
    EXPECT_EQ(model::RenderReason(d.reason).find("would run"), std::string::npos);
  }
}

TEST(Hints, TheCheckMakesOneChangeToOneJobAndGivesTheSnapshotBack) {
  Snapshot s = ModelsSnapshot();
  Snapshot scratch = s;
  CoreScheduler core;
  EXPECT_TRUE(HintHolds(core, scratch, 10, {Hint::Kind::kGpuModel, "A100-80GB", 0}));
  EXPECT_FALSE(HintHolds(core, scratch, 10, {Hint::Kind::kGpuModel, "B200", 0}));
  EXPECT_FALSE(HintHolds(core, scratch, 99, {Hint::Kind::kGpuModel, "A100-80GB", 0}))
      << "a job not in the snapshot";
  // A gang of three 4-GPU replicas finds room for two on the eight A100s:
  // on another model it would still not run.
  scratch.pending[0].replicas = 3;
  EXPECT_FALSE(HintHolds(core, scratch, 10, {Hint::Kind::kGpuModel, "A100-80GB", 0}));
  EXPECT_EQ(scratch.pending[0].resources.gpu_model, "H100-80GB") << "given back as it was";
  ASSERT_EQ(scratch.pending.size(), s.pending.size());
  scratch.pending[0].replicas = 1;
  for (std::size_t i = 0; i < s.pending.size(); ++i) {
    EXPECT_EQ(scratch.pending[i].resources.gpu_model, s.pending[i].resources.gpu_model);
    EXPECT_EQ(scratch.pending[i].replicas, s.pending[i].replicas);
  }
}

TEST(Hints, TheBudgetChecksNewHintsFirstAndNeverShowsAnUncheckedOne) {
  const Snapshot s = ModelsSnapshot();
  CoreScheduler core;
  Plan plan = core.Schedule(s);
  ASSERT_TRUE(HintOf(*ReasonOf(plan, 10)).has_value());
  // Job 11 waits behind job 10, and gets no hint of its own; on another
  // model it would run now, on GPUs job 10 could never use, so the same
  // hint holds for it too.
  for (auto& d : plan.pending) {
    if (d.job_id == 11) d.reason.detail = "gpu_model=A100-80GB";
  }

  // Budget 1, nothing shown before: the older job's hint is checked, the
  // other is dropped unchecked.
  Plan first = plan;
  HintCheck check = VerifyHints(core, s, first, 1);
  EXPECT_EQ(check.verified, 1U);
  EXPECT_EQ(check.unchecked, 1U);
  EXPECT_TRUE(HintOf(*ReasonOf(first, 10)).has_value());
  EXPECT_FALSE(HintOf(*ReasonOf(first, 11)).has_value());

  // The next pass: job 10's hint was shown, so job 11's is checked first,
  // and job 10 keeps the hint an earlier pass verified.
  Plan second = plan;
  check = VerifyHints(core, s, second, 1, [](std::int64_t id, const Hint&) { return id == 10; });
  EXPECT_EQ(check.verified, 1U);
  EXPECT_EQ(check.kept_from_before, 1U);
  EXPECT_EQ(check.unchecked, 0U);
  EXPECT_TRUE(HintOf(*ReasonOf(second, 10)).has_value());
  EXPECT_TRUE(HintOf(*ReasonOf(second, 11)).has_value());

  // No budget: nothing is checked and only what was shown before stays.
  Plan none = plan;
  check = VerifyHints(core, s, none, 0, [](std::int64_t id, const Hint&) { return id == 11; });
  EXPECT_EQ(check.verified + check.refuted, 0U);
  EXPECT_FALSE(HintOf(*ReasonOf(none, 10)).has_value());
  EXPECT_TRUE(HintOf(*ReasonOf(none, 11)).has_value());
}

}  // namespace
}  // namespace berth::sched
