// SimulatedProvider::Sample: GPU readings derived from the running jobs'
// declared load profiles (docs/jobs.md, "Simulated load").
#include <gtest/gtest.h>

#include "agent/sim_cluster.h"
#include "agent/sim_provider.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;
using testing::WriteText;

constexpr std::uint64_t kGi = std::uint64_t{1} << 30;

model::NodeInfo Node(std::string_view model = "H100-80GB", std::uint64_t memory = 80 * kGi) {
  model::NodeInfo node;
  node.name = "sim-a";
  node.gpus = SimulatedGpus(node.name, model, memory, 4, {});
  return node;
}

GpuOccupant Whole(std::uint32_t gpu, std::string run, model::LoadProfile load, TimeMs started = 0) {
  return {gpu, std::move(run), started, load, 0, 0};
}

model::LoadProfile Steady(std::uint32_t util, std::uint32_t memory_pct = 50) {
  model::LoadProfile p;
  p.util_pct = util;
  p.memory_pct = memory_pct;
  return p;
}

// The jitter is at most 2 points either way and never leaves 0-100.
void ExpectNear(std::uint32_t got, std::uint32_t want) {
  EXPECT_GE(got + 2, want) << got << " vs " << want;
  EXPECT_LE(got, std::min(want + 2, 100u)) << got << " vs " << want;
}

// Temperature, power and memory-controller load follow the utilization read.
void ExpectDerived(const model::GpuSample& s, std::uint32_t board_watts) {
  EXPECT_EQ(s.mem_util_pct, s.util_pct * 6 / 10);
  EXPECT_EQ(s.temperature_c, 30 + static_cast<std::int32_t>(s.util_pct / 2));
  EXPECT_EQ(s.power_mw, 60'000 + s.util_pct * (board_watts * 1000 - 60'000) / 100);
}

TEST(SimulatedTelemetry, SteadyLoadOnWholeGpusAndIdleGpusAtZero) {
  SimulatedProvider provider(Node());
  std::vector<GpuOccupant> occ{Whole(0, "1.0.1", Steady(85, 60), 1'000),
                               Whole(1, "1.0.1", Steady(85, 60), 1'000)};
  auto samples = provider.Sample(occ, 600'000);
  ASSERT_TRUE(samples.has_value()) << samples.error().message;
  ASSERT_EQ(samples->size(), 4u);
  for (std::uint32_t i = 0; i < 2; ++i) {
    const auto& s = (*samples)[i];
    EXPECT_EQ(s.gpu, i);
    EXPECT_EQ(s.at_ms, 600'000);
    EXPECT_FALSE(s.uuid.empty());
    ExpectNear(s.util_pct, 85);
    EXPECT_EQ(s.memory_total_bytes, 80 * kGi);
    EXPECT_EQ(s.memory_used_bytes, 48 * kGi);  // 60% of 80 GiB
    EXPECT_EQ(s.run_ids, std::vector<std::string>{"1.0.1"});
    ExpectDerived(s, 700);
    EXPECT_EQ(s.ecc_sbe_total, 0u);
    EXPECT_EQ(s.ecc_dbe_total, 0u);
    EXPECT_EQ(s.last_xid, 0u);
  }
  for (std::uint32_t i = 2; i < 4; ++i) {
    const auto& s = (*samples)[i];
    EXPECT_EQ(s.util_pct, 0u);  // no jitter on an idle card
    EXPECT_EQ(s.memory_used_bytes, 0u);
    EXPECT_TRUE(s.run_ids.empty());
    EXPECT_EQ(s.temperature_c, 30);
    EXPECT_EQ(s.power_mw, 60'000u);
  }
}

TEST(SimulatedTelemetry, JitterIsDeterministicAndStaysInRange) {
  SimulatedProvider a(Node());
  SimulatedProvider b(Node());
  std::vector<GpuOccupant> occ{Whole(0, "r", Steady(99)), Whole(1, "s", Steady(1))};
  bool varied = false;
  std::uint32_t first = 0;
  for (TimeMs t = 0; t < 60'000; t += 1'000) {
    auto x = a.Sample(occ, t);
    auto y = b.Sample(occ, t);
    ASSERT_TRUE(x && y);
    EXPECT_EQ(*x, *y);
    EXPECT_LE((*x)[0].util_pct, 100u);
    ExpectNear((*x)[0].util_pct, 99);
    ExpectNear((*x)[1].util_pct, 1);
    if (t == 0) first = (*x)[0].util_pct;
    varied = varied || (*x)[0].util_pct != first;
  }
  EXPECT_TRUE(varied) << "a minute of samples should not all read the same";
}

TEST(SimulatedTelemetry, PeriodicAndIdleAfterFollowTheRunsAge) {
  SimulatedProvider provider(Node());
  model::LoadProfile p;
  p.pattern = model::LoadPattern::kPeriodic;
  p.util_pct = 90;
  p.idle_util_pct = 0;
  p.period_ms = 120'000;
  p.idle_after_ms = 600'000;
  const TimeMs start = 1'700'000'000'000;
  std::vector<GpuOccupant> occ{Whole(0, "r", p, start)};
  auto at = [&](TimeMs age) { return (*provider.Sample(occ, start + age))[0].util_pct; };
  ExpectNear(at(10'000), 90);
  EXPECT_EQ(at(70'000), 0u);  // second half of the period
  ExpectNear(at(130'000), 90);
  EXPECT_EQ(at(610'000), 0u);  // idle_after has passed
  // An idle allocation reads its idle utilization throughout.
  model::LoadProfile idle;
  idle.pattern = model::LoadPattern::kIdle;
  idle.idle_util_pct = 0;
  idle.memory_pct = 10;
  std::vector<GpuOccupant> held{Whole(1, "n", idle, start)};
  auto s = provider.Sample(held, start + 5'000);
  EXPECT_EQ((*s)[1].util_pct, 0u);
  EXPECT_EQ((*s)[1].memory_used_bytes, 8 * kGi);
  EXPECT_EQ((*s)[1].run_ids, std::vector<std::string>{"n"});
}

TEST(SimulatedTelemetry, SlicesAddTheirShareAndCapAt100) {
  SimulatedProvider provider(Node());
  // Two quarter slices at 80% and a half slice at 40%: 20 + 20 + 20 = 60.
  std::vector<GpuOccupant> occ{{0, "a", 0, Steady(80, 50), 250, 20 * kGi},
                               {0, "b", 0, Steady(80, 100), 250, 20 * kGi},
                               {0, "c", 0, Steady(40, 10), 500, 40 * kGi},
                               // Memory slices: share from bytes (40Gi of 80Gi: 500 millis).
                               {1, "d", 0, Steady(100, 50), 0, 40 * kGi},
                               {1, "e", 0, Steady(100, 50), 0, 40 * kGi},
                               {1, "f", 0, Steady(100, 50), 0, 40 * kGi}};
  auto samples = provider.Sample(occ, 1'000);
  ASSERT_TRUE(samples.has_value());
  const auto& a = (*samples)[0];
  ExpectNear(a.util_pct, 60);
  // Memory: 50% of 20Gi + 100% of 20Gi + 10% of 40Gi.
  EXPECT_EQ(a.memory_used_bytes, 10 * kGi + 20 * kGi + 4 * kGi);
  EXPECT_EQ(a.run_ids, (std::vector<std::string>{"a", "b", "c"}));
  ExpectDerived(a, 700);
  const auto& b = (*samples)[1];
  ExpectNear(b.util_pct, 100);  // 150 capped
  EXPECT_LE(b.util_pct, 100u);
  EXPECT_EQ(b.memory_used_bytes, 60 * kGi);
  ExpectDerived(b, 700);
}

TEST(SimulatedTelemetry, BoardPowerByModel) {
  EXPECT_EQ(SimulatedBoardPowerWatts("H100-80GB"), 700u);
  EXPECT_EQ(SimulatedBoardPowerWatts("A100-40GB"), 400u);
  EXPECT_EQ(SimulatedBoardPowerWatts("L40S-48GB"), 350u);
  EXPECT_EQ(SimulatedBoardPowerWatts("T4-16GB"), 300u);
  SimulatedProvider a100(Node("A100-40GB", 40 * kGi));
  std::vector<GpuOccupant> occ{Whole(0, "r", Steady(50))};
  auto s = a100.Sample(occ, 0);
  ASSERT_TRUE(s.has_value());
  ExpectDerived((*s)[0], 400);
  EXPECT_EQ((*s)[0].memory_used_bytes, 20 * kGi);
  EXPECT_EQ((*s)[3].power_mw, 60'000u);
}

TEST(SimulatedTelemetry, LastXidComesFromAnInjectedFaultAndStays) {
  TempDir dir;
  auto faults = dir.path() / "faults";
  WriteText(faults, "2 Xid 79: GPU has fallen off the bus\n1 ECC page retirement\n");
  SimulatedProvider provider(Node(), faults);
  auto s = provider.Sample({}, 0);
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ((*s)[2].last_xid, 79u);
  EXPECT_EQ((*s)[1].last_xid, 0u);  // a fault without an Xid
  EXPECT_EQ((*s)[0].last_xid, 0u);
  // The last Xid seen stays after the fault is cleared, as NVML's would.
  WriteText(faults, "");
  s = provider.Sample({}, 1'000);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ((*s)[2].last_xid, 79u);
  // A broken faults file is the provider's error.
  WriteText(faults, "gpu3 Xid 48\n");
  EXPECT_FALSE(provider.Sample({}, 2'000).has_value());
  EXPECT_EQ(XidOf("Xid 48: double bit ECC error"), 48u);
  EXPECT_EQ(XidOf("nvmlDeviceGetUUID: Unknown Error"), 0u);
}

}  // namespace
}  // namespace berth::agent
