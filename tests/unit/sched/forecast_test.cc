// The forecast: the scheduler run forward over expected ends (sched/forecast.h).
#include "sched/forecast.h"

#include <gtest/gtest.h>

#include <atomic>

#include "sched/core_scheduler.h"

namespace berth::sched {
namespace {

constexpr TimeMs kHour = 3'600'000;

NodeView FourGpus(std::string name) {
  NodeView n;
  n.name = std::move(name);
  n.ready = true;
  n.cpu_millis_free = 64'000;
  n.memory_bytes_free = 512ULL << 30;
  for (std::uint32_t i = 0; i < 4; ++i) {
    n.gpus.push_back({i, n.name + "-" + std::to_string(i), "H100-80GB", 80ULL << 30, true, true});
  }
  return n;
}

PendingJob Waiting(std::int64_t id, std::string tenant, std::uint32_t gpus, TimeMs runtime) {
  PendingJob j;
  j.id = id;
  j.tenant = std::move(tenant);
  j.queue = "q";
  j.submitted_at_ms = id;
  j.resources.gpus = gpus;
  j.max_runtime_ms = runtime;
  return j;
}

// Job 1 holds node a's four GPUs until 1h (declared).
Snapshot Busy(const char* policy) {
  Snapshot s;
  auto p = model::ParsePolicy(policy);
  EXPECT_TRUE(p.has_value()) << p.error().message;
  s.policy = p.value_or(model::DefaultPolicy());
  s.nodes = {FourGpus("a")};
  for (auto& g : s.nodes[0].gpus) g.free = false;
  RunningJob r;
  r.id = 1;
  r.tenant = "x";
  r.queue = "q";
  r.resources.gpus = 4;
  r.max_runtime_ms = kHour;
  r.replicas = {{0, "a", {0, 1, 2, 3}}};
  s.running = {r};
  return s;
}

constexpr const char* kTwoTenants =
    "queues:\n"
    "  - {name: x, children: [{name: q}]}\n"
    "  - {name: y, children: [{name: q}]}\n";

TEST(Forecast, AJobBehindItsHeadStartsWhenTheHeadEnds) {
  // The cycle's own estimate gives job 3 only "not before the head"; the
  // forecast runs job 2 from 1h to 2h and then job 3.
  Snapshot s = Busy(kTwoTenants);
  s.pending = {Waiting(2, "x", 4, kHour), Waiting(3, "x", 4, kHour)};
  const Forecast f = ForecastStarts(CoreScheduler(), s);
  EXPECT_EQ(f.end, ForecastEnd::kAllStarted);
  ASSERT_TRUE(f.start_ms.contains(2));
  ASSERT_TRUE(f.start_ms.contains(3));
  EXPECT_EQ(f.start_ms.at(2), kHour);
  EXPECT_EQ(f.start_ms.at(3), 2 * kHour);
  EXPECT_FALSE(f.predicted.at(3));  // declared max runtimes only
  EXPECT_EQ(f.cycles, 3U);          // now, 1h, 2h
}

TEST(Forecast, TheQueueFairShareServesFirstGoesFirst) {
  // Tenant x has used far more than y: when the GPUs come back, y's head
  // goes first although x's was submitted earlier, and x's waits for it.
  Snapshot s = Busy(kTwoTenants);
  s.decayed_usage = {{"x/q", 1'000'000'000}, {"y/q", 0}};
  s.pending = {Waiting(2, "x", 4, kHour), Waiting(3, "y", 4, 2 * kHour)};
  const Forecast f = ForecastStarts(CoreScheduler(), s);
  ASSERT_TRUE(f.start_ms.contains(2));
  ASSERT_TRUE(f.start_ms.contains(3));
  EXPECT_EQ(f.start_ms.at(3), kHour);
  EXPECT_EQ(f.start_ms.at(2), 3 * kHour);
}

TEST(Forecast, APredictedEndMarksTheStartsThatStandOnIt) {
  Snapshot s = Busy(kTwoTenants);
  s.running[0].max_runtime_ms = 0;
  s.running[0].predicted = {kHour / 2, RuntimeBasis::kShape, 5};
  s.pending = {Waiting(2, "x", 4, kHour)};
  const Forecast f = ForecastStarts(CoreScheduler(), s);
  ASSERT_TRUE(f.start_ms.contains(2));
  EXPECT_EQ(f.start_ms.at(2), kHour / 2);
  EXPECT_TRUE(f.predicted.at(2));
}

TEST(Forecast, NothingWithAKnownEndForeseesNoStart) {
  Snapshot s = Busy(kTwoTenants);
  s.running[0].max_runtime_ms = 0;  // and no prediction
  s.pending = {Waiting(2, "x", 4, kHour)};
  const Forecast f = ForecastStarts(CoreScheduler(), s);
  EXPECT_EQ(f.end, ForecastEnd::kNoKnownEnd);
  EXPECT_TRUE(f.start_ms.empty());
  EXPECT_EQ(f.cycles, 1U);
}

TEST(Forecast, StopsAtItsCycleLimitAndItsHorizon) {
  Snapshot s = Busy(kTwoTenants);
  s.pending = {Waiting(2, "x", 4, kHour), Waiting(3, "x", 4, kHour), Waiting(4, "x", 4, kHour)};
  const Forecast two = ForecastStarts(CoreScheduler(), s, {.max_cycles = 2});
  EXPECT_EQ(two.end, ForecastEnd::kCycleLimit);
  EXPECT_EQ(two.cycles, 2U);
  EXPECT_TRUE(two.start_ms.contains(2));
  EXPECT_FALSE(two.start_ms.contains(3));
  const Forecast near = ForecastStarts(CoreScheduler(), s, {.horizon_ms = kHour + kHour / 2});
  EXPECT_EQ(near.end, ForecastEnd::kHorizon);
  EXPECT_TRUE(near.start_ms.contains(2));
  EXPECT_FALSE(near.start_ms.contains(3));
}

TEST(Forecast, ACancelledForecastStopsAtItsNextStep) {
  // berthd's shutdown sets the flag while a forecast runs: the forecast
  // ends at its next step, whatever is left of its budget. Set from the
  // start, only the first scheduler run is made.
  Snapshot s = Busy(kTwoTenants);
  s.pending = {Waiting(2, "x", 4, kHour), Waiting(3, "x", 4, kHour)};
  const std::atomic<bool> cancel{true};
  const Forecast f = ForecastStarts(CoreScheduler(), s, {.cancel = &cancel});
  EXPECT_EQ(f.end, ForecastEnd::kCancelled);
  EXPECT_EQ(f.cycles, 1U);
  EXPECT_TRUE(f.start_ms.empty());
  const std::atomic<bool> go_on{false};
  const Forecast whole = ForecastStarts(CoreScheduler(), s, {.cancel = &go_on});
  EXPECT_EQ(whole.end, ForecastEnd::kAllStarted);
  EXPECT_EQ(whole.start_ms.at(3), 2 * kHour);
}

TEST(Forecast, StartsFromThePlanItIsGiven) {
  // A plan already made of the snapshot is carried out, not made again: a
  // plan that places job 2 now (as if the cycle had) is what the forecast
  // starts from.
  Snapshot s = Busy(kTwoTenants);
  s.nodes.push_back(FourGpus("b"));
  s.pending = {Waiting(2, "x", 4, kHour), Waiting(3, "y", 4, kHour)};
  const Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  const Forecast f = ForecastStarts(CoreScheduler(), s, {}, &plan);
  const std::int64_t now_placed = plan.placements[0].job_id;
  const std::int64_t other = now_placed == 2 ? 3 : 2;
  EXPECT_EQ(f.start_ms.at(now_placed), 0);
  EXPECT_EQ(f.start_ms.at(other), kHour);
}

TEST(Forecast, LeavesTheSnapshotAsItWas) {
  Snapshot s = Busy(kTwoTenants);
  s.pending = {Waiting(2, "x", 4, kHour)};
  const Snapshot before = s;
  (void)ForecastStarts(CoreScheduler(), s);
  EXPECT_EQ(s.pending.size(), before.pending.size());
  EXPECT_EQ(s.running.size(), before.running.size());
  EXPECT_FALSE(s.nodes[0].gpus[0].free);
  EXPECT_EQ(s.now_ms, before.now_ms);
}

}  // namespace
}  // namespace berth::sched
