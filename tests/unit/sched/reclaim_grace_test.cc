// Reclaim that does not waste: the policy's reclaim_grace holds a reclaim
// back while borrowers may still end or checkpoint, the guarantee wins once
// it has passed, and victims are chosen by the GPU time they would lose.
#include <gtest/gtest.h>

#include "model/reason.h"
#include "sched/core_scheduler.h"
#include "unit/builders.h"
#include "unit/sched/plan_check.h"

namespace berth::sched {
namespace {

constexpr TimeMs kMinute = 60'000;
constexpr TimeMs kHour = 60 * kMinute;

NodeView GraceNode(std::string name, std::uint32_t gpus) {
  return tests::ReadyH100View(std::move(name), gpus);
}

model::Policy GracePolicy(const std::string& grace) {
  auto p = model::ParsePolicy("reclaim_grace: " + grace +
                              "\n"
                              "queues:\n"
                              "  - {name: vision, quota: {gpus: 8}, children: [{name: q}]}\n"
                              "  - {name: speech, children: [{name: q}]}\n");
  EXPECT_TRUE(p.has_value()) << p.error().message;
  return p.value_or(model::DefaultPolicy());
}

// A speech job (borrowing: speech has no guarantee) holding `gpus` GPUs of
// `node` from index `first`.
RunningJob Borrower(std::int64_t id, const std::string& node, std::uint32_t first,
                    std::uint32_t gpus, TimeMs started) {
  RunningJob r;
  r.id = id;
  r.tenant = "speech";
  r.queue = "q";
  r.started_at_ms = started;
  r.resources.gpus = gpus;
  ReplicaPlacement rp{0, node, {}};
  for (std::uint32_t i = first; i < first + gpus; ++i) rp.gpu_indices.push_back(i);
  r.replicas = {rp};
  return r;
}

void Hold(Snapshot& s) {
  for (const auto& r : s.running) {
    for (const auto& rp : r.replicas) {
      for (auto& n : s.nodes) {
        if (n.name != rp.node) continue;
        for (auto idx : rp.gpu_indices) n.gpus[idx].free = false;
      }
    }
  }
}

PendingJob VisionJob(std::int64_t id, std::uint32_t gpus, TimeMs reclaim_since) {
  PendingJob j;
  j.id = id;
  j.tenant = "vision";
  j.queue = "q";
  j.submitted_at_ms = 1;
  j.resources.gpus = gpus;
  j.reclaim_since_ms = reclaim_since;
  return j;
}

const model::Reason* WhyOf(const Plan& plan, std::int64_t id) {
  for (const auto& d : plan.pending) {
    if (d.job_id == id) return &d.reason;
  }
  return nullptr;
}

// Node a full of borrower 1 (8 GPUs since 0), now 2h.
Snapshot OneBorrower(const std::string& grace, TimeMs reclaim_since) {
  Snapshot s;
  s.now_ms = 2 * kHour;
  s.policy = GracePolicy(grace);
  s.nodes = {GraceNode("a", 8)};
  s.running = {Borrower(1, "a", 0, 8, 0)};
  Hold(s);
  s.pending = {VisionJob(10, 8, reclaim_since)};
  return s;
}

TEST(ReclaimGrace, ItWaitsAndSaysWhenAndWhatReclaimingNowWouldCost) {
  Snapshot s = OneBorrower("30m", 0);
  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_TRUE(plan.placements.empty());
  const model::Reason* why = WhyOf(plan, 10);
  ASSERT_NE(why, nullptr);
  const auto& c = why->counts;
  // First needed now: the grace runs to now + 30m.
  EXPECT_EQ(c.at(std::string(model::kReclaimSinceMs)), 2 * kHour);
  EXPECT_EQ(c.at(std::string(model::kReclaimAtMs)), 2 * kHour + 30 * kMinute);
  EXPECT_EQ(c.at(std::string(model::kReclaimInMs)), 30 * kMinute);
  EXPECT_EQ(c.at(std::string(model::kReclaimVictims)), 1);
  EXPECT_EQ(c.at(std::string(model::kReclaimFirstVictim)), 1);
  EXPECT_EQ(c.at(std::string(model::kReclaimWorkLostMs)), 2 * kHour);
  EXPECT_EQ(c.at(std::string(model::kReclaimLostMgpuMs)), 8000 * 2 * kHour);
  // Not "reclaiming all would not free enough": it would.
  EXPECT_FALSE(c.contains(std::string(model::kReclaimCandidates)));
  // Its start is the grace's end, on the GPUs the reclaim would give it,
  // held for it meanwhile.
  EXPECT_EQ(c.at(std::string(model::kEtaMs)), 2 * kHour + 30 * kMinute);
  ASSERT_EQ(plan.reservations.size(), 1U);
  EXPECT_EQ(plan.reservations[0].job_id, 10);
  EXPECT_EQ(plan.reservations[0].start_ms, 2 * kHour + 30 * kMinute);
  EXPECT_EQ(plan.reservations[0].replicas[0].node, "a");
  const std::string text = model::RenderReason(*why, model::Lang::kEn);
  EXPECT_NE(text.find("reclaims lent GPUs at 02:30 UTC (in 30m)"), std::string::npos) << text;
  EXPECT_NE(text.find("1 borrower job(s), job 1 first"), std::string::npos) << text;
  EXPECT_NE(text.find("16.0 GPU-hours"), std::string::npos) << text;
  const std::string zh = model::RenderReason(*why, model::Lang::kZh);
  EXPECT_NE(zh.find("收回借出的 GPU"), std::string::npos) << zh;
}

TEST(ReclaimGrace, ABorrowerPredictedToEndBeforeTheGraceGivesTheEarlierStart) {
  // Borrower 1 is predicted to end at 2h10m, before the grace's end (2h30m):
  // the job is told 2h10m, from the prediction, and the grace's GPUs are
  // held for it all the same (the reservation, a bound, is unchanged).
  Snapshot s = OneBorrower("30m", 0);
  s.running[0].predicted = {2 * kHour + 10 * kMinute, RuntimeBasis::kShape, 5};
  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.evictions.empty());
  const model::Reason* why = WhyOf(plan, 10);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->counts.at(std::string(model::kEtaMs)), 2 * kHour + 10 * kMinute);
  EXPECT_EQ(why->counts.at(std::string(model::kEtaBasis)),
            static_cast<std::int64_t>(model::EtaBasis::kPredicted));
  EXPECT_EQ(why->counts.at(std::string(model::kEtaAfterJob)), 1);
  EXPECT_EQ(why->counts.at(std::string(model::kEtaReserved)), 1);
  ASSERT_EQ(plan.reservations.size(), 1U);
  EXPECT_EQ(plan.reservations[0].start_ms, 2 * kHour + 30 * kMinute);
  // Predicted to end after the grace: the grace's end is the start.
  s.running[0].predicted.runtime_ms = 3 * kHour;
  plan = CoreScheduler().Schedule(s);
  why = WhyOf(plan, 10);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->counts.at(std::string(model::kEtaMs)), 2 * kHour + 30 * kMinute);
  EXPECT_EQ(why->counts.at(std::string(model::kEtaBasis)),
            static_cast<std::int64_t>(model::EtaBasis::kGrace));
}

TEST(ReclaimGrace, JobsBehindTheHeadHearItsPredictedStartNotTheGracesEnd) {
  // Job 11 waits behind job 10 in vision/q. The head is told 2h10m (its
  // borrower's predicted end, before the grace's end): job 11 cannot start
  // before that, and hears that, not the later bound.
  Snapshot s = OneBorrower("30m", 0);
  s.running[0].predicted = {2 * kHour + 10 * kMinute, RuntimeBasis::kShape, 5};
  PendingJob behind = VisionJob(11, 8, 0);
  behind.submitted_at_ms = 2;
  s.pending.push_back(behind);
  Plan plan = CoreScheduler().Schedule(s);
  const model::Reason* why = WhyOf(plan, 11);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->code, model::ReasonCode::kBehindInQueue);
  EXPECT_EQ(why->counts.at(std::string(model::kNotBeforeMs)), 2 * kHour + 10 * kMinute);
  EXPECT_EQ(why->counts.at(std::string(model::kNotBeforeInMs)), 10 * kMinute);
  // The head's reservation, which backfill behind it respects, still runs
  // from the grace's end.
  ASSERT_EQ(plan.reservations.size(), 1U);
  EXPECT_EQ(plan.reservations[0].start_ms, 2 * kHour + 30 * kMinute);
}

TEST(ReclaimGrace, TheGraceCountsFromWhenTheJobFirstNeededTheReclaim) {
  // Needed since 1h45m: 15 minutes of the grace are left.
  Snapshot s = OneBorrower("30m", 105 * kMinute);
  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.evictions.empty());
  const model::Reason* why = WhyOf(plan, 10);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->counts.at(std::string(model::kReclaimSinceMs)), 105 * kMinute);
  EXPECT_EQ(why->counts.at(std::string(model::kReclaimInMs)), 15 * kMinute);
}

TEST(ReclaimGrace, OnceTheGraceHasPassedTheGuaranteeWins) {
  // Needed since 1h30m: the grace ended at 2h, the cycle's now.
  Snapshot s = OneBorrower("30m", 90 * kMinute);
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.evictions.size(), 1U);
  EXPECT_EQ(plan.evictions[0].job_id, 1);
  EXPECT_EQ(plan.evictions[0].cause, EvictionCause::kReclaim);
  EXPECT_EQ(plan.evictions[0].work_lost_ms, 2 * kHour);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 10);
  EXPECT_EQ(CheckPlan(s, plan), "");
  // One millisecond earlier it still waits.
  s.pending[0].reclaim_since_ms = 90 * kMinute + 1;
  plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.evictions.empty());
}

TEST(ReclaimGrace, NoGraceReclaimsAtOnce) {
  Snapshot s = OneBorrower("0s", 0);
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.evictions.size(), 1U);
  EXPECT_EQ(plan.evictions[0].job_id, 1);
}

TEST(ReclaimGrace, ABorrowerThatCheckpointedSinceTheJobBeganWaitingIsTakenAtOnce) {
  // Two borrowers of 4 GPUs on node a; the job needs 4. Borrower 1
  // checkpointed at 1h50m, after the job began waiting (1h45m); borrower 2
  // checkpoints too, but last did at 1h40m, before.
  Snapshot s;
  s.now_ms = 2 * kHour;
  s.policy = GracePolicy("30m");
  s.nodes = {GraceNode("a", 8)};
  RunningJob saved = Borrower(1, "a", 0, 4, 0);
  saved.checkpoints = true;
  saved.last_checkpoint_ms = 110 * kMinute;
  RunningJob stale = Borrower(2, "a", 4, 4, 0);
  stale.checkpoints = true;
  stale.last_checkpoint_ms = 100 * kMinute;
  s.running = {saved, stale};
  Hold(s);
  s.pending = {VisionJob(10, 4, 105 * kMinute)};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.evictions.size(), 1U);
  EXPECT_EQ(plan.evictions[0].job_id, 1);
  EXPECT_EQ(plan.evictions[0].work_lost_ms, 10 * kMinute);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(CheckPlan(s, plan), "");

  // Had borrower 1 saved before the job began waiting, nothing would go.
  s.running[0].last_checkpoint_ms = 100 * kMinute;
  plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.evictions.empty());
  const model::Reason* why = WhyOf(plan, 10);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->counts.at(std::string(model::kReclaimVictims)), 1);
}

TEST(ReclaimGrace, TheVictimIsTheOneThatLosesTheLeastGpuTime) {
  // Borrower 1 holds all of node a for 10 minutes (80 GPU-minutes unsaved);
  // borrower 2 one GPU of node b for 30 minutes (30 GPU-minutes). The rest
  // of b is held by a job that may not be evicted. A 1-GPU job goes where
  // less work is lost: job 2, though its own work lost is the longer.
  Snapshot s;
  s.now_ms = 2 * kHour;
  s.policy = GracePolicy("0s");
  s.nodes = {GraceNode("a", 8), GraceNode("b", 8)};
  RunningJob whole = Borrower(1, "a", 0, 8, s.now_ms - 10 * kMinute);
  RunningJob one = Borrower(2, "b", 0, 1, s.now_ms - 30 * kMinute);
  RunningJob pinned = Borrower(3, "b", 1, 7, 0);
  pinned.preemptible = false;
  s.running = {whole, one, pinned};
  Hold(s);
  s.pending = {VisionJob(10, 1, 0)};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.evictions.size(), 1U);
  EXPECT_EQ(plan.evictions[0].job_id, 2);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].replicas[0].node, "b");
  EXPECT_EQ(CheckPlan(s, plan), "");
}

TEST(ReclaimGrace, OfEqualLossTheVictimThatCheckpointsGoesFirst) {
  // Both lose 4 GPUs x 20 minutes; job 2 resumes from its checkpoint, job 1
  // (the lower id) would start over.
  Snapshot s;
  s.now_ms = 2 * kHour;
  s.policy = GracePolicy("0s");
  s.nodes = {GraceNode("a", 8)};
  RunningJob fresh = Borrower(1, "a", 0, 4, s.now_ms - 20 * kMinute);
  RunningJob resumes = Borrower(2, "a", 4, 4, 0);
  resumes.checkpoints = true;
  resumes.last_checkpoint_ms = s.now_ms - 20 * kMinute;
  s.running = {fresh, resumes};
  Hold(s);
  s.pending = {VisionJob(10, 4, 0)};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.evictions.size(), 1U);
  EXPECT_EQ(plan.evictions[0].job_id, 2);
}

}  // namespace
}  // namespace berth::sched
