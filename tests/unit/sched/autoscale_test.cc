// The autoscaler as a pure function: a load step panics within the panic
// window, panic never scales down, scale-down waits out the down window,
// scale to zero waits out the idle window and only where enabled with min
// 0, a waiting request scales from zero at once, min/max hold with their
// reasons, no data keeps the replicas, and the reason's words carry its
// numbers. Each test drives Decide on a 2 s tick, as berthd does.
#include "sched/autoscale.h"

#include <gtest/gtest.h>

#include <vector>

namespace berth::sched {
namespace {

constexpr TimeMs kTick = 2'000;

// Concurrency target 10 at 100% utilization: one replica per 10 in flight.
model::Autoscaling Spec() {
  model::Autoscaling a;
  a.signal = model::AutoscaleSignal::kConcurrency;
  a.target_milli = 10'000;
  a.target_utilization_pct = 100;
  a.stable_window_ms = 60'000;
  a.panic_window_ms = 6'000;
  a.panic_threshold_pct = 200;
  a.up_stabilization_ms = 0;
  a.down_stabilization_ms = 120'000;
  return a;
}

// A service driven tick by tick; replicas become ready at once when
// `instant` (the tests are about decisions, not cold starts).
struct Driver {
  model::Autoscaling spec = Spec();
  model::ReplicaBounds bounds{1, 50};
  TimeMs now = 0;
  std::uint32_t ready = 1;
  std::vector<AutoscaleSample> samples;
  AutoscaleState state;
  AutoscaleDecision last;

  // One tick with `concurrency` in flight during it; returns the decision
  // and applies it.
  const AutoscaleDecision& Tick(std::int64_t concurrency, std::int64_t requests = -1) {
    now += kTick;
    samples.push_back(
        {now, concurrency * 1000, concurrency, requests < 0 ? concurrency : requests});
    last = Decide({spec, bounds, now, ready, 0, samples, state});
    state = last.state;
    ready = last.desired;
    return last;
  }
};

TEST(Autoscale, SteadyLoadAtTargetIsStable) {
  Driver d;
  d.ready = 3;
  for (int i = 0; i < 40; ++i) d.Tick(30);
  EXPECT_EQ(d.last.desired, 3U);
  EXPECT_EQ(d.last.reason.code, AutoscaleCode::kStable);
  EXPECT_EQ(d.last.reason.observed_milli, 30'000);
  EXPECT_EQ(d.last.reason.target_milli, 10'000);
}

TEST(Autoscale, TargetUtilizationScalesTheTarget) {
  Driver d;
  d.spec.target_utilization_pct = 70;  // 7 per replica
  d.ready = 1;
  for (int i = 0; i < 40; ++i) d.Tick(70);
  EXPECT_EQ(d.last.reason.target_milli, 7'000);
  EXPECT_EQ(d.last.desired, 10U);
}

TEST(Autoscale, ALoadStepPanicsAndScalesUpWithinThePanicWindow) {
  Driver d;
  d.ready = 2;
  for (int i = 0; i < 30; ++i) d.Tick(20);  // a minute at 2 x 10
  ASSERT_EQ(d.last.desired, 2U);
  // Load jumps to 100 in flight: 5x what 2 replicas serve.
  const TimeMs step = d.now;
  std::uint32_t first_up_at = 0;
  for (int i = 1; i <= 3 && first_up_at == 0; ++i) {
    d.Tick(100);
    if (d.last.desired > 2) first_up_at = static_cast<std::uint32_t>(d.now - step);
  }
  ASSERT_NE(first_up_at, 0U) << "no scale-up within 3 ticks";
  EXPECT_LE(first_up_at, d.spec.panic_window_ms);
  EXPECT_EQ(d.last.reason.code, AutoscaleCode::kPanic);
  EXPECT_EQ(d.last.reason.window_ms, 6'000);
  // The 60 s stable average alone would still ask for far fewer.
  const std::int64_t stable_avg = (28 * 20 + 100 * first_up_at / kTick) * 1000 / 30;
  EXPECT_LT(stable_avg, 2 * 10'000 * 2);
  for (int i = 0; i < 3; ++i) d.Tick(100);
  EXPECT_EQ(d.last.desired, 10U);  // the panic window's 100 / 10
}

TEST(Autoscale, NoScaleDownWhilePanicking) {
  Driver d;
  d.ready = 2;
  for (int i = 0; i < 30; ++i) d.Tick(20);
  TimeMs panic_began = 0;
  for (int i = 0; i < 4; ++i) {
    d.Tick(100);
    if (panic_began == 0 && d.last.reason.code == AutoscaleCode::kPanic) panic_began = d.now;
  }
  ASSERT_NE(panic_began, 0);
  ASSERT_EQ(d.last.reason.code, AutoscaleCode::kPanic);
  const std::uint32_t peak = d.last.desired;
  // The load falls away at once. Panic lasts a stable window past the last
  // sample over the threshold (at least past its start), and while it lasts
  // the replicas never go down, although the panic window asks for 1.
  TimeMs panic_ended = 0;
  for (int i = 0; i < 100 && panic_ended == 0; ++i) {
    d.Tick(5);
    if (d.last.reason.code != AutoscaleCode::kPanic) {
      panic_ended = d.now;
    } else {
      ASSERT_GE(d.last.desired, peak) << "at " << d.now;
      if (i >= 3) {
        ASSERT_EQ(d.last.reason.would_be, 1U) << "at " << d.now;
      }
    }
  }
  ASSERT_NE(panic_ended, 0);
  EXPECT_GE(panic_ended, panic_began + d.spec.stable_window_ms);
  // Out of panic, the down window still remembers the panic's recommendations.
  EXPECT_EQ(d.last.reason.code, AutoscaleCode::kStabilizingDown);
  EXPECT_EQ(d.last.desired, peak);
}

TEST(Autoscale, ScaleDownWaitsForTheDownStabilizationWindow) {
  Driver d;
  d.spec.panic_threshold_pct = 0;  // no panic: stabilization alone
  d.ready = 1;
  for (int i = 0; i < 60; ++i) d.Tick(80);
  ASSERT_EQ(d.last.desired, 8U);
  const TimeMs drop = d.now;
  TimeMs down_at = 0;
  for (int i = 0; i < 200 && down_at == 0; ++i) {
    d.Tick(10);
    if (d.last.desired < 8) down_at = d.now;
    if (down_at == 0 && d.now - drop > d.spec.stable_window_ms) {
      EXPECT_EQ(d.last.reason.code, AutoscaleCode::kStabilizingDown);
    }
  }
  ASSERT_NE(down_at, 0);
  // The stable window must first forget the load, then the down window
  // must hold no recommendation of 8.
  EXPECT_GE(down_at - drop, d.spec.down_stabilization_ms);
  EXPECT_LE(down_at - drop, d.spec.stable_window_ms + d.spec.down_stabilization_ms);
  // A shorter down window lets it go sooner.
  Driver fast;
  fast.spec.panic_threshold_pct = 0;
  fast.spec.down_stabilization_ms = 0;
  fast.ready = 1;
  for (int i = 0; i < 60; ++i) fast.Tick(80);
  TimeMs fast_down = 0;
  for (int i = 0; i < 200 && fast_down == 0; ++i) {
    fast.Tick(10);
    if (fast.last.desired < 8) fast_down = fast.now;
  }
  EXPECT_LT(fast_down - drop, down_at - drop);
}

TEST(Autoscale, UpStabilizationHoldsAScaleUp) {
  Driver d;
  d.spec.panic_threshold_pct = 0;
  d.spec.up_stabilization_ms = 30'000;
  d.ready = 1;
  for (int i = 0; i < 30; ++i) d.Tick(10);
  d.Tick(40);
  EXPECT_EQ(d.last.desired, 1U);
  EXPECT_EQ(d.last.reason.code, AutoscaleCode::kStabilizingUp);
  EXPECT_EQ(d.last.reason.window_ms, 30'000);
  for (int i = 0; i < 20; ++i) d.Tick(40);
  EXPECT_GT(d.last.desired, 1U);
}

// A service at min 0 with scale to zero, whose traffic stops.
Driver ZeroDriver(bool enabled, std::uint32_t min) {
  Driver d;
  d.bounds = {min, 10};
  d.spec.scale_to_zero.enabled = enabled;
  d.spec.scale_to_zero.idle_window_ms = 30'000;
  d.spec.down_stabilization_ms = 0;
  d.ready = 2;
  for (int i = 0; i < 30; ++i) d.Tick(15);
  return d;
}

TEST(Autoscale, ScaleToZeroOnlyAfterTheIdleWindow) {
  Driver d = ZeroDriver(true, 0);
  const TimeMs quiet = d.now;
  TimeMs zero_at = 0;
  for (int i = 0; i < 100 && zero_at == 0; ++i) {
    d.Tick(0, 0);
    if (d.last.desired == 0) {
      zero_at = d.now;
    } else if (d.last.reason.code == AutoscaleCode::kIdle) {
      EXPECT_EQ(d.last.desired, 1U);
      EXPECT_LT(d.last.reason.idle_ms, 30'000);
    }
  }
  ASSERT_NE(zero_at, 0);
  EXPECT_EQ(d.last.reason.code, AutoscaleCode::kScaleToZero);
  EXPECT_GE(zero_at - quiet, 30'000);
  EXPECT_GE(d.last.reason.idle_ms, 30'000);
  // The stable window must have forgotten the load too.
  EXPECT_GE(zero_at - quiet, d.spec.stable_window_ms);
}

TEST(Autoscale, NoScaleToZeroUnlessEnabledWithMinZero) {
  for (auto [enabled, min] : {std::pair{false, 0U}, std::pair{true, 1U}, std::pair{false, 1U}}) {
    Driver d = ZeroDriver(enabled, min);
    for (int i = 0; i < 300; ++i) d.Tick(0, 0);
    EXPECT_EQ(d.last.desired, 1U) << enabled << " " << min;
    EXPECT_EQ(d.last.reason.code, AutoscaleCode::kHeldByMin) << enabled << " " << min;
    EXPECT_EQ(d.last.reason.bound, 1U);
  }
}

TEST(Autoscale, TheFirstWaitingRequestScalesFromZero) {
  Driver d = ZeroDriver(true, 0);
  for (int i = 0; i < 100; ++i) d.Tick(0, 0);
  ASSERT_EQ(d.ready, 0U);
  // One request arrives: the gateway holds it, and the next call (berthd
  // calls at once when one is held) starts a replica, whatever the
  // stable window's average says.
  d.now += 100;
  d.samples.push_back({d.now, 1000, 1, 1});
  auto dec = Decide({d.spec, d.bounds, d.now, 0, 0, d.samples, d.state});
  EXPECT_EQ(dec.desired, 1U);
  EXPECT_EQ(dec.reason.code, AutoscaleCode::kScaleFromZero);
  EXPECT_EQ(dec.reason.waiting, 1);
  // With the replica still starting, the next tick keeps it.
  d.state = dec.state;
  d.now += kTick;
  d.samples.push_back({d.now, 1000, 1, 0});
  auto next = Decide({d.spec, d.bounds, d.now, 0, 1, d.samples, d.state});
  EXPECT_EQ(next.desired, 1U);
}

TEST(Autoscale, MinAndMaxHoldWithTheirReasons) {
  Driver d;
  d.bounds = {2, 4};
  d.ready = 2;
  for (int i = 0; i < 40; ++i) d.Tick(5);
  EXPECT_EQ(d.last.desired, 2U);
  EXPECT_EQ(d.last.reason.code, AutoscaleCode::kHeldByMin);
  EXPECT_EQ(d.last.reason.would_be, 1U);
  EXPECT_EQ(d.last.reason.bound, 2U);
  d.spec.panic_threshold_pct = 0;
  for (int i = 0; i < 40; ++i) d.Tick(300);
  EXPECT_EQ(d.last.desired, 4U);
  EXPECT_EQ(d.last.reason.code, AutoscaleCode::kHeldByMax);
  EXPECT_EQ(d.last.reason.would_be, 30U);
  EXPECT_EQ(d.last.reason.bound, 4U);
}

TEST(Autoscale, NoDataKeepsTheReplicas) {
  model::Autoscaling spec = Spec();
  auto dec = Decide({spec, {1, 10}, 100'000, 3, 1, {}, {}});
  EXPECT_EQ(dec.desired, 4U);
  EXPECT_EQ(dec.reason.code, AutoscaleCode::kNoData);
  // Samples older than the stable window are no data either.
  std::vector<AutoscaleSample> old{{10'000, 500'000, 50, 50}};
  dec = Decide({spec, {1, 10}, 100'000, 3, 0, old, {}});
  EXPECT_EQ(dec.desired, 3U);
  EXPECT_EQ(dec.reason.code, AutoscaleCode::kNoData);
}

TEST(Autoscale, P95LatencyScalesInProportion) {
  model::Autoscaling spec = Spec();
  spec.signal = model::AutoscaleSignal::kP95Latency;
  spec.target_milli = 500'000;  // 500 ms
  spec.panic_threshold_pct = 0;
  std::vector<AutoscaleSample> s;
  for (TimeMs t = 2'000; t <= 60'000; t += kTick) s.push_back({t, 900'000, 10, 10});
  auto dec = Decide({spec, {1, 20}, 60'000, 4, 0, s, {}});
  EXPECT_EQ(dec.desired, 8U);  // ceil(4 x 900 / 500)
}

TEST(Autoscale, TheDecisionIsAPureFunctionOfItsInput) {
  Driver a;
  Driver b;
  for (int i = 0; i < 50; ++i) {
    a.Tick(i * 3 % 70);
    b.Tick(i * 3 % 70);
    ASSERT_EQ(a.last.desired, b.last.desired);
    ASSERT_EQ(a.last.state, b.last.state);
    ASSERT_EQ(a.last.reason, b.last.reason);
  }
}

TEST(Autoscale, TheRenderedReasonNamesItsNumbers) {
  Driver d;
  d.ready = 2;
  for (int i = 0; i < 30; ++i) d.Tick(20);
  for (int i = 0; i < 3; ++i) d.Tick(100);
  const std::string panic = RenderAutoscaleReason(d.last.reason);
  for (const char* piece :
       {"panic", "6s", "concurrency", "100", "200%", "10 per replica", "desired 10"}) {
    EXPECT_NE(panic.find(piece), std::string::npos) << piece << " in: " << panic;
  }
  AutoscaleReason held;
  held.code = AutoscaleCode::kHeldByMax;
  held.observed_milli = 412'500;
  held.target_milli = 7'000;
  held.window_ms = 60'000;
  held.would_be = 59;
  held.bound = 8;
  held.desired = 8;
  held.current = 8;
  held.ready = 6;
  const std::string text = RenderAutoscaleReason(held);
  for (const char* piece :
       {"held by max", "412.5", "7 per replica", "59 replicas", "maximum of 8", "1m", "6 ready"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << piece << " in: " << text;
  }
  AutoscaleReason idle;
  idle.code = AutoscaleCode::kIdle;
  idle.idle_ms = 12'000;
  idle.window_ms = 30'000;
  const std::string idle_text = RenderAutoscaleReason(idle);
  EXPECT_NE(idle_text.find("12s"), std::string::npos) << idle_text;
  EXPECT_NE(idle_text.find("30s"), std::string::npos) << idle_text;
  EXPECT_EQ(AutoscaleCodeName(AutoscaleCode::kScaleFromZero), "scale_from_zero");
}

}  // namespace
}  // namespace berth::sched
