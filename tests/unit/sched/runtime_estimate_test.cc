// Run-time estimates without an oracle: the predictor (most specific key
// with enough runs wins, median, bounded memory, only runs that teach), and
// what the core does with predictions (shortest predicted GPU time first
// within a queue with a starvation bound, ETAs from predicted ends that
// name their basis and reserve nothing, a declared max runtime winning).
#include "sched/runtime_estimate.h"

#include <gtest/gtest.h>

#include "model/reason.h"
#include "sched/core_scheduler.h"
#include "unit/builders.h"
#include "unit/sched/plan_check.h"

namespace berth::sched {
namespace {

constexpr TimeMs kMinute = 60'000;
constexpr TimeMs kHour = 60 * kMinute;

RuntimeRecord Finished(std::string tenant, std::string user, std::string name, std::uint32_t gpus,
                       TimeMs ms, RunEnd end = RunEnd::kSucceeded) {
  return {std::move(tenant), std::move(user), std::move(name), {gpus, 1, false}, ms, end};
}

TEST(RuntimeHistory, NothingKnownPredictsNothing) {
  RuntimeHistory h;
  auto p = h.Predict({"vision", "ana", "train", {8, 1, false}});
  EXPECT_FALSE(p.known());
  EXPECT_EQ(p.basis, RuntimeBasis::kNone);
  EXPECT_EQ(p.runtime_ms, 0);
}

TEST(RuntimeHistory, MostSpecificKeyWithEnoughRunsWins) {
  RuntimeHistory h({.keep_per_key = 8, .min_samples = 3});
  // Three runs of ana's "train" at 8 GPUs (10h), and other 8-GPU jobs of
  // the tenant (1h) and of another tenant (5 min).
  for (int i = 0; i < 3; ++i) h.Add(Finished("vision", "ana", "train", 8, 10 * kHour));
  for (int i = 0; i < 5; ++i) h.Add(Finished("vision", "bo", "eval", 8, kHour));
  for (int i = 0; i < 9; ++i) h.Add(Finished("speech", "cy", "x", 8, 5 * kMinute));

  auto same_job = h.Predict({"vision", "ana", "train", {8, 1, false}});
  EXPECT_EQ(same_job.basis, RuntimeBasis::kUserName);
  EXPECT_EQ(same_job.runtime_ms, 10 * kHour);
  EXPECT_EQ(same_job.samples, 3);

  // A new job name of ana's at 8 GPUs: ana's 8-GPU runs (the same three).
  auto user_shape = h.Predict({"vision", "ana", "new", {8, 1, false}});
  EXPECT_EQ(user_shape.basis, RuntimeBasis::kUserShape);
  EXPECT_EQ(user_shape.runtime_ms, 10 * kHour);

  // dee has no history: the tenant's 8-GPU runs (ana's 3 and bo's 5: median 1h).
  auto tenant = h.Predict({"vision", "dee", "t", {8, 1, false}});
  EXPECT_EQ(tenant.basis, RuntimeBasis::kTenantShape);
  EXPECT_EQ(tenant.runtime_ms, kHour);
  EXPECT_EQ(tenant.samples, 8);

  // A new tenant: every 8-GPU run, of which the shape key keeps the 8 most
  // recent (all 5-minute runs).
  auto shape = h.Predict({"audio", "", "", {8, 1, false}});
  EXPECT_EQ(shape.basis, RuntimeBasis::kShape);
  EXPECT_EQ(shape.runtime_ms, 5 * kMinute);
  EXPECT_EQ(shape.samples, 8);

  // Another shape nobody ran: nothing.
  EXPECT_FALSE(h.Predict({"vision", "ana", "train2", {4, 1, false}}).known());
}

TEST(RuntimeHistory, TooFewRunsFallBackToABroaderKey) {
  RuntimeHistory h({.keep_per_key = 8, .min_samples = 3});
  h.Add(Finished("vision", "ana", "train", 8, 10 * kHour));
  h.Add(Finished("vision", "ana", "train", 8, 10 * kHour));  // two: not enough
  h.Add(Finished("vision", "bo", "eval", 8, kHour));
  auto p = h.Predict({"vision", "ana", "train", {8, 1, false}});
  // user+name and user+shape have 2 runs; tenant+shape has 3 (10h, 10h, 1h).
  EXPECT_EQ(p.basis, RuntimeBasis::kTenantShape);
  EXPECT_EQ(p.runtime_ms, 10 * kHour);
  EXPECT_EQ(p.samples, 3);
}

TEST(RuntimeHistory, UsersAreNamedWithinTheirTenant) {
  RuntimeHistory h({.keep_per_key = 8, .min_samples = 1});
  h.Add(Finished("vision", "ana", "train", 8, 10 * kHour));
  auto p = h.Predict({"speech", "ana", "train", {8, 1, false}});
  EXPECT_EQ(p.basis, RuntimeBasis::kShape);  // not vision's ana
}

TEST(RuntimeHistory, ShapesDifferByReplicasAndSlices) {
  RuntimeHistory h({.keep_per_key = 8, .min_samples = 1});
  h.Add({"t", "", "", {8, 4, false}, 3 * kHour, RunEnd::kSucceeded});
  EXPECT_FALSE(h.Predict({"t", "", "", {8, 1, false}}).known());
  EXPECT_FALSE(h.Predict({"t", "", "", {0, 4, true}}).known());
  EXPECT_EQ(h.Predict({"t", "", "", {8, 4, false}}).runtime_ms, 3 * kHour);
}

TEST(RuntimeHistory, MedianOfTheMostRecentRuns) {
  RuntimeHistory h({.keep_per_key = 3, .min_samples = 1});
  for (TimeMs ms : {kHour, 2 * kHour, 100 * kHour}) h.Add(Finished("t", "u", "n", 1, ms));
  EXPECT_EQ(h.Predict({"t", "u", "n", {1, 1, false}}).runtime_ms, 2 * kHour);  // not the mean
  // Two newer short runs push out the oldest two: 100h, 1m, 1m.
  h.Add(Finished("t", "u", "n", 1, kMinute));
  h.Add(Finished("t", "u", "n", 1, kMinute));
  auto p = h.Predict({"t", "u", "n", {1, 1, false}});
  EXPECT_EQ(p.runtime_ms, kMinute);
  EXPECT_EQ(p.samples, 3);
}

TEST(RuntimeHistory, ARunningJobsEndComesFromTheRunsThatLastedLongerThanItHasSoFar) {
  RuntimeHistory h({.keep_per_key = 16, .min_samples = 3});
  // Team t's 8-GPU runs: six of 5 minutes, then 2h, 4h, 6h and 8h.
  for (int i = 0; i < 6; ++i) h.Add(Finished("t", "", "", 8, 5 * kMinute));
  for (TimeMs run : {2 * kHour, 4 * kHour, 6 * kHour, 8 * kHour})
    h.Add(Finished("t", "", "", 8, run));
  const RuntimeQuery job{"t", "", "", {8, 1, false}};
  ASSERT_EQ(h.Predict(job).runtime_ms, 5 * kMinute);
  // Just started: what is known of any such run.
  EXPECT_EQ(h.PredictAfter(job, 0).runtime_ms, 5 * kMinute);
  // Running for an hour, it is one of the long ones: the lower quartile of
  // the four runs longer than an hour (2h, 4h, 6h, 8h) is 4h.
  const RuntimePrediction after_1h = h.PredictAfter(job, kHour);
  EXPECT_EQ(after_1h.runtime_ms, 4 * kHour);
  EXPECT_EQ(after_1h.basis, RuntimeBasis::kTenantShape);
  EXPECT_EQ(after_1h.samples, 4);
  // Past 5h only two of the team's runs went on (fewer than min_samples),
  // and anyone's 8-GPU runs are the same: the plain prediction, which
  // ExpectedEndOf treats as overrun.
  EXPECT_EQ(h.PredictAfter(job, 5 * kHour).runtime_ms, 5 * kMinute);
  // Other teams' long 8-GPU runs make the broader key enough: 6h, 7h, 8h,
  // 9h, 10h lasted longer than 5h; their lower quartile is 7h.
  for (TimeMs run : {7 * kHour, 9 * kHour, 10 * kHour}) h.Add(Finished("u", "", "", 8, run));
  const RuntimePrediction after_5h = h.PredictAfter(job, 5 * kHour);
  EXPECT_EQ(after_5h.runtime_ms, 7 * kHour);
  EXPECT_EQ(after_5h.basis, RuntimeBasis::kShape);
  EXPECT_EQ(after_5h.samples, 5);
}

TEST(RuntimeHistory, CancelledAndEvictedRunsTeachNothing) {
  RuntimeHistory h({.keep_per_key = 8, .min_samples = 1});
  h.Add(Finished("t", "u", "n", 1, kMinute, RunEnd::kCancelled));
  h.Add(Finished("t", "u", "n", 1, kMinute, RunEnd::kEvicted));
  h.Add(Finished("t", "u", "n", 1, 0));  // no run time
  EXPECT_EQ(h.version(), 0U);
  EXPECT_FALSE(h.Predict({"t", "u", "n", {1, 1, false}}).known());
  h.Add(Finished("t", "u", "n", 1, kHour, RunEnd::kFailed));
  h.Add(Finished("t", "u", "n", 1, kHour, RunEnd::kMaxRuntime));
  EXPECT_EQ(h.version(), 2U);
  EXPECT_EQ(h.Predict({"t", "u", "n", {1, 1, false}}).samples, 2);
}

TEST(RuntimeHistory, KeysAreBounded) {
  RuntimeHistory h({.keep_per_key = 2, .min_samples = 1, .max_keys = 40});
  // Every run its own user and name: 4 keys per run, far past the bound.
  for (int i = 0; i < 500; ++i) {
    h.Add(Finished("t", "u" + std::to_string(i), "n" + std::to_string(i), 1, kHour + i));
    EXPECT_LE(h.keys(), 40U);
  }
  // The newest run's own keys survive; the oldest user's are forgotten.
  EXPECT_EQ(h.Predict({"t", "u499", "n499", {1, 1, false}}).basis, RuntimeBasis::kUserName);
  EXPECT_EQ(h.Predict({"t", "u0", "n0", {1, 1, false}}).basis, RuntimeBasis::kTenantShape);
}

TEST(RuntimeHistory, KeysDoNotRunTogether) {
  RuntimeShape s{1, 1, false};
  EXPECT_NE(RuntimeKey(RuntimeBasis::kUserName, "t", "ab", "c", s),
            RuntimeKey(RuntimeBasis::kUserName, "t", "a", "bc", s));
  EXPECT_NE(RuntimeKey(RuntimeBasis::kTenantShape, "t", "", "", {1, 11, false}),
            RuntimeKey(RuntimeBasis::kTenantShape, "t", "", "", {11, 1, false}));
}

TEST(ExpectedEnd, DeclaredWinsThenPredictionThenOverrunFallback) {
  const TimeMs now = 10 * kHour;
  auto declared = ExpectedEndOf(now, 9 * kHour, 2 * kHour, 30 * kMinute);
  EXPECT_EQ(declared.end_ms, 11 * kHour);
  EXPECT_FALSE(declared.predicted);
  auto predicted = ExpectedEndOf(now, 9 * kHour, 0, 2 * kHour);
  EXPECT_EQ(predicted.end_ms, 11 * kHour);
  EXPECT_TRUE(predicted.predicted);
  EXPECT_FALSE(predicted.overrun);
  // Ran 1h on a 30-min prediction: expected to run as long again (1h more).
  auto overrun = ExpectedEndOf(now, 9 * kHour, 0, 30 * kMinute);
  EXPECT_EQ(overrun.end_ms, 11 * kHour);
  EXPECT_TRUE(overrun.overrun);
  EXPECT_EQ(ExpectedEndOf(now, 9 * kHour, 0, 0).end_ms, 0);
}

// The core, with predictions on the snapshot.

NodeView EstNode(std::string name, std::uint32_t gpus) {
  return tests::ReadyH100View(std::move(name), gpus);
}

PendingJob Waiting(std::int64_t id, std::uint32_t gpus, TimeMs submitted, TimeMs predicted) {
  PendingJob p;
  p.id = id;
  p.tenant = "default";
  p.queue = "default";
  p.submitted_at_ms = submitted;
  p.resources.gpus = gpus;
  if (predicted > 0) p.predicted = {predicted, RuntimeBasis::kTenantShape, 5};
  return p;
}

RunningJob Holding(std::int64_t id, const std::string& node, std::uint32_t gpus, TimeMs started,
                   TimeMs predicted) {
  RunningJob r;
  r.id = id;
  r.tenant = "default";
  r.queue = "default";
  r.started_at_ms = started;
  r.resources.gpus = gpus;
  ReplicaPlacement rp{0, node, {}};
  for (std::uint32_t i = 0; i < gpus; ++i) rp.gpu_indices.push_back(i);
  r.replicas = {rp};
  if (predicted > 0) r.predicted = {predicted, RuntimeBasis::kShape, 7};
  return r;
}

std::int64_t Count(const model::Reason& r, std::string_view key) {
  auto it = r.counts.find(key);
  return it == r.counts.end() ? -1 : it->second;
}

const model::Reason* ReasonOf(const Plan& plan, std::int64_t id) {
  for (const auto& d : plan.pending) {
    if (d.job_id == id) return &d.reason;
  }
  return nullptr;
}

TEST(ShortFirst, ShorterPredictedGpuTimeGoesFirstAtEqualPriority) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  // Room for one 8-GPU job. Job 1 came first but is predicted 10h; job 2
  // 1h; job 3 has no prediction.
  s.pending = {Waiting(1, 8, 9 * kHour, 10 * kHour), Waiting(2, 8, 9 * kHour + 1, kHour),
               Waiting(3, 8, 8 * kHour, 0)};
  auto plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 2);
  // Job 1 is next in line, the unknown job last (though submitted first).
  EXPECT_EQ(Count(*ReasonOf(plan, 1), model::kPosition), 1);
  EXPECT_EQ(Count(*ReasonOf(plan, 3), model::kPosition), 2);
  // Their reasons carry their own predictions.
  EXPECT_EQ(Count(*ReasonOf(plan, 1), model::kPredictedRuntimeMs), 10 * kHour);
  EXPECT_EQ(Count(*ReasonOf(plan, 1), model::kPredictedBasis),
            static_cast<std::int64_t>(RuntimeBasis::kTenantShape));
  EXPECT_EQ(Count(*ReasonOf(plan, 1), model::kPredictedSamples), 5);
  EXPECT_EQ(Count(*ReasonOf(plan, 3), model::kPredictedRuntimeMs), -1);
}

TEST(ShortFirst, GpuTimeNotJustRunTime) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  // 8 GPUs for 1h (8 GPU-h) against 1 GPU for 4h (4 GPU-h): the 1-GPU job first.
  s.pending = {Waiting(1, 8, 9 * kHour, kHour), Waiting(2, 1, 9 * kHour + 1, 4 * kHour)};
  auto plan = CoreScheduler().Schedule(s);
  ASSERT_FALSE(plan.placements.empty());
  EXPECT_EQ(plan.placements[0].job_id, 2);
}

TEST(ShortFirst, AJobWaitingPastTheBoundGoesBackToSubmitOrder) {
  Snapshot s;
  s.now_ms = 30 * kHour;
  s.nodes = {EstNode("n1", 8)};
  // Job 1 (long) has waited 25h, past a bound of 24h; job 2 is short.
  s.policy.short_first_max_wait_ms = 24 * kHour;
  s.pending = {Waiting(1, 8, 5 * kHour, 10 * kHour), Waiting(2, 8, 29 * kHour, kMinute)};
  auto plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 1);
  // Within the bound the short one would have gone first.
  s.now_ms = 28 * kHour;
  s.pending[1].submitted_at_ms = 27 * kHour;
  plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 2);
}

TEST(ShortFirst, OffIsSubmitOrderAndPriorityStillWins) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  s.pending = {Waiting(1, 8, 9 * kHour, 10 * kHour), Waiting(2, 8, 9 * kHour + 1, kHour)};
  s.policy.short_first_max_wait_ms = 0;
  auto plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 1);
  // On, but the long job has a higher priority.
  s.policy.short_first_max_wait_ms = model::kDefaultShortFirstMaxWaitMs;
  s.pending[0].priority = model::Priority::kHigh;
  plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 1);
}

TEST(ShortFirst, ADeclaredMaxRuntimeWinsOverAPrediction) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  // Job 1 is predicted 1 min but declares 5h; job 2 is predicted 1h.
  s.pending = {Waiting(1, 8, 9 * kHour, kMinute), Waiting(2, 8, 9 * kHour + 1, kHour)};
  s.pending[0].max_runtime_ms = 5 * kHour;
  auto plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 2);
  // Its reason shows no prediction: the declared runtime is what counts.
  EXPECT_EQ(Count(*ReasonOf(plan, 1), model::kPredictedRuntimeMs), -1);
}

TEST(PredictedEta, ARunningJobWithoutMaxRuntimeGivesAPredictedEta) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  s.running = {Holding(7, "n1", 8, 9 * kHour, 3 * kHour)};
  HoldGpus(s.nodes, s.running[0].resources, s.running[0].replicas, true);
  s.pending = {Waiting(1, 8, 9 * kHour, kHour)};
  auto plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  const model::Reason* r = ReasonOf(plan, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Count(*r, model::kEtaMs), 12 * kHour);
  EXPECT_EQ(Count(*r, model::kEtaBasis), static_cast<std::int64_t>(model::EtaBasis::kPredicted));
  EXPECT_EQ(Count(*r, model::kEtaAfterJob), 7);
  EXPECT_EQ(Count(*r, model::kEtaAfterMs), 12 * kHour);
  EXPECT_EQ(Count(*r, model::kEtaAfterOverrun), -1);
  EXPECT_EQ(Count(*r, model::kEtaUnknown), -1);
  // A prediction is no bound: nothing is reserved on it.
  EXPECT_EQ(Count(*r, model::kEtaReserved), 0);
  EXPECT_TRUE(plan.reservations.empty());
}

TEST(PredictedEta, WithoutAPredictionItStaysUnknown) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  s.running = {Holding(7, "n1", 8, 9 * kHour, 0)};
  HoldGpus(s.nodes, s.running[0].resources, s.running[0].replicas, true);
  s.pending = {Waiting(1, 8, 9 * kHour, kHour)};
  auto plan = CoreScheduler().Schedule(s);
  const model::Reason* r = ReasonOf(plan, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Count(*r, model::kEtaUnknown),
            static_cast<std::int64_t>(model::EtaUnknown::kBlockedByUnlimited));
  EXPECT_EQ(Count(*r, model::kEtaBlockedBy), 7);
}

TEST(PredictedEta, OverrunJobUsesTheFallbackAndSaysSo) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  // Started 2h ago, predicted 1h: expected 2h more.
  s.running = {Holding(7, "n1", 8, 8 * kHour, kHour)};
  HoldGpus(s.nodes, s.running[0].resources, s.running[0].replicas, true);
  s.pending = {Waiting(1, 8, 9 * kHour, kHour)};
  auto plan = CoreScheduler().Schedule(s);
  const model::Reason* r = ReasonOf(plan, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Count(*r, model::kEtaMs), 12 * kHour);
  EXPECT_EQ(Count(*r, model::kEtaAfterOverrun), 1);
}

TEST(PredictedEta, DeclaredEndsStayDeclaredAndReserve) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  s.running = {Holding(7, "n1", 8, 9 * kHour, kMinute)};
  s.running[0].max_runtime_ms = 2 * kHour;  // wins over the 1-min prediction
  HoldGpus(s.nodes, s.running[0].resources, s.running[0].replicas, true);
  s.pending = {Waiting(1, 8, 9 * kHour, kHour)};
  auto plan = CoreScheduler().Schedule(s);
  const model::Reason* r = ReasonOf(plan, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Count(*r, model::kEtaMs), 11 * kHour);
  EXPECT_EQ(Count(*r, model::kEtaBasis), static_cast<std::int64_t>(model::EtaBasis::kDeclared));
  EXPECT_EQ(Count(*r, model::kEtaReserved), 1);
}

TEST(PredictedEta, APredictedRuntimeDoesNotBackfill) {
  Snapshot s;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  // 4 GPUs free; a 4-GPU job runs until 11h (declared). The head needs 8
  // (reserved at 11h); job 2 behind it is predicted 10 min but declares
  // nothing: berthd would not stop it, so it may not take the reserved GPUs.
  s.running = {Holding(7, "n1", 4, 9 * kHour, 0)};
  s.running[0].max_runtime_ms = 2 * kHour;
  HoldGpus(s.nodes, s.running[0].resources, s.running[0].replicas, true);
  s.pending = {Waiting(1, 8, 8 * kHour, 0), Waiting(2, 4, 9 * kHour, 10 * kMinute)};
  s.policy.short_first_max_wait_ms = 0;  // submit order: job 1 is the head
  auto plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.reservations.size(), 1U);
  // Declaring 10 minutes lets it backfill.
  s.pending[1].max_runtime_ms = 10 * kMinute;
  plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 2);
}

TEST(PredictedEta, ALaterHeadWaitsForTheGpusAnEarlierHeadIsExpectedToTake) {
  // Two teams' queues, one 8-GPU node held by job 7 until 12h (predicted).
  // Each queue's head needs the whole node: the head decided first is
  // expected to take it at 12h and hold it for its predicted run time, so
  // the other's estimate is that much later, not 12h as well.
  auto policy = model::ParsePolicy(
      "queues:\n"
      "  - {name: a, children: [{name: q}]}\n"
      "  - {name: b, children: [{name: q}]}\n");
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  Snapshot s;
  s.policy = *policy;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  s.running = {Holding(7, "n1", 8, 9 * kHour, 3 * kHour)};
  s.running[0].tenant = "a";
  s.running[0].queue = "q";
  HoldGpus(s.nodes, s.running[0].resources, s.running[0].replicas, true);
  s.pending = {Waiting(1, 8, 9 * kHour, 2 * kHour), Waiting(2, 8, 9 * kHour, kHour)};
  s.pending[0].tenant = "a";
  s.pending[0].queue = "q";
  s.pending[1].tenant = "b";
  s.pending[1].queue = "q";
  auto plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  EXPECT_TRUE(plan.reservations.empty());  // estimates only: nothing is held
  const model::Reason* r1 = ReasonOf(plan, 1);
  const model::Reason* r2 = ReasonOf(plan, 2);
  ASSERT_NE(r1, nullptr);
  ASSERT_NE(r2, nullptr);
  const bool first_is_1 = Count(*r1, model::kEtaMs) == 12 * kHour;
  const model::Reason& first = first_is_1 ? *r1 : *r2;
  const model::Reason& second = first_is_1 ? *r2 : *r1;
  const TimeMs first_runs = first_is_1 ? 2 * kHour : kHour;
  EXPECT_EQ(Count(first, model::kEtaMs), 12 * kHour);
  EXPECT_EQ(Count(second, model::kEtaMs), 12 * kHour + first_runs);
  EXPECT_EQ(Count(second, model::kEtaBasis),
            static_cast<std::int64_t>(model::EtaBasis::kPredicted));
  // Heads are expected only as many as may hold reservations: with none,
  // both are told 12h.
  s.policy.backfill.max_reservations = 0;
  plan = CoreScheduler().Schedule(s);
  EXPECT_EQ(Count(*ReasonOf(plan, 1), model::kEtaMs), 12 * kHour);
  EXPECT_EQ(Count(*ReasonOf(plan, 2), model::kEtaMs), 12 * kHour);
  s.policy.backfill.max_reservations = model::Policy{}.backfill.max_reservations;
  // Alone, the second head would have been told 12h.
  s.pending.erase(s.pending.begin() + (first_is_1 ? 0 : 1));
  plan = CoreScheduler().Schedule(s);
  const model::Reason* alone = ReasonOf(plan, first_is_1 ? 2 : 1);
  ASSERT_NE(alone, nullptr);
  EXPECT_EQ(Count(*alone, model::kEtaMs), 12 * kHour);
}

TEST(PredictedEta, AnEarlierHeadWithoutAPredictionLeavesTheEstimateAsItWas) {
  // The same, but the head decided first has no predicted run time: its end
  // is unknown, so it is not counted (an estimate behind it would be none).
  auto policy = model::ParsePolicy(
      "queues:\n"
      "  - {name: a, children: [{name: q}]}\n"
      "  - {name: b, children: [{name: q}]}\n");
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  Snapshot s;
  s.policy = *policy;
  s.now_ms = 10 * kHour;
  s.nodes = {EstNode("n1", 8)};
  s.running = {Holding(7, "n1", 8, 9 * kHour, 3 * kHour)};
  HoldGpus(s.nodes, s.running[0].resources, s.running[0].replicas, true);
  s.pending = {Waiting(1, 8, 9 * kHour, 0), Waiting(2, 8, 9 * kHour, 0)};
  s.pending[0].tenant = "a";
  s.pending[0].queue = "q";
  s.pending[1].tenant = "b";
  s.pending[1].queue = "q";
  auto plan = CoreScheduler().Schedule(s);
  EXPECT_EQ(Count(*ReasonOf(plan, 1), model::kEtaMs), 12 * kHour);
  EXPECT_EQ(Count(*ReasonOf(plan, 2), model::kEtaMs), 12 * kHour);
}

}  // namespace
}  // namespace berth::sched
