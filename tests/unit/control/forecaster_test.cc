// The forecaster: forecasts made off the caller's thread, at most once per
// interval, read by job (control/forecaster.h).
#include "control/forecaster.h"

#include <gtest/gtest.h>

#include <utility>

#include "sched/core_scheduler.h"

namespace berth::server {
namespace {

constexpr TimeMs kHour = 3'600'000;

// One 4-GPU node held until 1h (declared); job 2 (4 GPUs, 1h) waits.
sched::Snapshot OneWaiting(TimeMs now) {
  sched::Snapshot s;
  s.now_ms = now;
  sched::NodeView n;
  n.name = "a";
  n.ready = true;
  n.cpu_millis_free = 64'000;
  n.memory_bytes_free = 512ULL << 30;
  for (std::uint32_t i = 0; i < 4; ++i) {
    sched::GpuView g{i, "a-" + std::to_string(i), "H100-80GB", 80ULL << 30, true, false};
    n.gpus.push_back(g);
  }
  s.nodes = {n};
  sched::RunningJob r;
  r.id = 1;
  r.tenant = "default";
  r.queue = "default";
  r.resources.gpus = 4;
  r.started_at_ms = now;
  r.max_runtime_ms = kHour;
  r.replicas = {{0, "a", {0, 1, 2, 3}}};
  s.running = {r};
  sched::PendingJob p;
  p.id = 2;
  p.tenant = "default";
  p.queue = "default";
  p.resources.gpus = 4;
  p.max_runtime_ms = kHour;
  s.pending = {p};
  return s;
}

TEST(Forecaster, AnOfferedSnapshotIsForecastAndReadByJob) {
  const sched::CoreScheduler scheduler;
  Forecaster f(scheduler, {.interval_ms = 60'000});
  EXPECT_FALSE(f.Of(2).has_value());  // none made yet
  ASSERT_TRUE(f.Wants(1'000));
  f.Offer(OneWaiting(1'000));
  f.Drain();
  const auto job = f.Of(2);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->start_ms, 1'000 + kHour);
  EXPECT_EQ(job->made_at_ms, 1'000);
  EXPECT_FALSE(job->predicted);
  EXPECT_EQ(job->cycles, 2U);
  EXPECT_FALSE(f.Of(1).has_value());  // a running job has no forecast
}

TEST(Forecaster, TakesAtMostOneSnapshotPerInterval) {
  const sched::CoreScheduler scheduler;
  Forecaster f(scheduler, {.interval_ms = 60'000});
  f.Offer(OneWaiting(1'000));
  f.Drain();
  EXPECT_FALSE(f.Wants(30'000));
  f.Offer(OneWaiting(30'000));  // dropped: too soon
  f.Drain();
  EXPECT_EQ(f.Of(2)->made_at_ms, 1'000);
  EXPECT_TRUE(f.Wants(61'000));
  f.Offer(OneWaiting(61'000));
  f.Drain();
  EXPECT_EQ(f.Of(2)->made_at_ms, 61'000);
  EXPECT_EQ(f.Of(2)->start_ms, 61'000 + kHour);
}

TEST(Forecaster, ALargeSnapshotGetsFewerSchedulerRuns) {
  // Three jobs of an hour wait in a chain behind the running one. With a
  // budget of 8 job-cycles over 4 jobs the forecast makes 2 runs (now and
  // 1h): only the first is foreseen, so a flood of waiting jobs bounds the
  // forecast's cost instead of growing it.
  const sched::CoreScheduler scheduler;
  Forecaster f(scheduler, {.interval_ms = 60'000, .max_cycles = 128, .job_cycles = 8});
  sched::Snapshot s = OneWaiting(1'000);
  for (std::int64_t id : {3, 4}) {
    sched::PendingJob p = s.pending.front();
    p.id = id;
    p.submitted_at_ms = id;
    s.pending.push_back(p);
  }
  f.Offer(std::move(s));
  f.Drain();
  ASSERT_TRUE(f.Of(2).has_value());
  EXPECT_EQ(f.Of(2)->start_ms, 1'000 + kHour);
  EXPECT_EQ(f.Of(2)->cycles, 2U);
  EXPECT_FALSE(f.Of(3).has_value());
  EXPECT_FALSE(f.Of(4).has_value());
}

TEST(Forecaster, AnIntervalOfZeroMakesNone) {
  const sched::CoreScheduler scheduler;
  Forecaster f(scheduler, {.interval_ms = 0});
  EXPECT_FALSE(f.Wants(1'000));
  f.Offer(OneWaiting(1'000));
  f.Drain();
  EXPECT_FALSE(f.Of(2).has_value());
}

}  // namespace
}  // namespace berth::server
