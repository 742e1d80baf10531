// Decayed usage: the ledger's arithmetic, and the controller feeding it to
// the scheduler from a real SqliteStore, across passes and restarts.
#include "model/usage_ledger.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <numbers>

#include "common/clock.h"
#include "control/controller.h"
#include "control/lifecycle.h"
#include "sched/core_scheduler.h"
#include "store/sqlite_store.h"
#include "unit/builders.h"
#include "unit/server/controller_fixture.h"

namespace berth::server {
namespace {

using model::UsageInterval;
using model::UsageLedger;

constexpr std::int64_t kHour = 3'600'000;

// Milli-GPU-seconds of `gpus` GPUs held from `ago_start` to `ago_end` before now.
double Expected(double gpus, double ago_start_h, double ago_end_h, double half_life_h = 1) {
  double h_s = half_life_h * 3600;
  return gpus * 1000 * h_s / std::numbers::ln2 *
         (std::exp2(-ago_end_h / half_life_h) - std::exp2(-ago_start_h / half_life_h));
}

TEST(UsageLedger, AFinishedRunIsWorthItsGpuTimeDecayedByAge) {
  UsageLedger ledger;
  const TimeMs now = 100 * kHour;
  ledger.Reset(kHour, now, {{"a/x", 2000, now - 2 * kHour, now - kHour}});
  auto u = ledger.At(now, {});
  ASSERT_TRUE(u.contains("a/x"));
  EXPECT_NEAR(static_cast<double>(u["a/x"]), Expected(2, 2, 1), 1.0);
  // One half-life later it is worth half.
  auto later = ledger.At(now + kHour, {});
  EXPECT_NEAR(static_cast<double>(later["a/x"]), Expected(2, 2, 1) / 2, 1.0);
}

TEST(UsageLedger, RunningWorkCountsUpToNowAndQueuesStaySeparate) {
  UsageLedger ledger;
  const TimeMs now = 10 * kHour;
  ledger.Reset(kHour, now, {});
  ledger.Fold({"a/x", 1000, now - 3 * kHour, now - 2 * kHour}, now - kHour);
  auto u = ledger.At(now, {{"b/y", 8000, now - kHour, 0}});
  EXPECT_NEAR(static_cast<double>(u["a/x"]), Expected(1, 3, 2), 1.0);
  EXPECT_NEAR(static_cast<double>(u["b/y"]), Expected(8, 1, 0), 1.0);
  // The same GPU-hour is worth more the more recent it is.
  EXPECT_GT(Expected(1, 1, 0), Expected(1, 3, 2));
}

TEST(UsageLedger, ResetWithAnotherHalfLifeRecomputes) {
  UsageLedger ledger;
  const TimeMs now = 10 * kHour;
  std::vector<UsageInterval> history{{"a/x", 1000, now - 2 * kHour, now - kHour}};
  ledger.Reset(kHour, now, history);
  ledger.Reset(2 * kHour, now, history);
  EXPECT_EQ(ledger.half_life_ms(), 2 * kHour);
  EXPECT_NEAR(static_cast<double>(ledger.At(now, {})["a/x"]), Expected(1, 2, 1, 2), 1.0);
}

// Keeps the snapshot of the last cycle, and schedules with the real core.
class Recording : public sched::Scheduler {
 public:
  sched::Plan Schedule(const sched::Snapshot& s) const override {
    last = s;
    return core.Schedule(s);
  }
  mutable sched::Snapshot last;
  sched::CoreScheduler core;
};

class DecayedUsageTest : public ControllerFixture<Recording> {
 protected:
  DecayedUsageTest() : ControllerFixture(1'000 * kHour) {}

  void SetUp() override {
    ControllerFixture::SetUp();
    if (HasFatalFailure()) return;
    model::NodeInfo n = tests::H100Node(8);
    ASSERT_TRUE(store_->UpsertNode(n, clock_.NowMs()).has_value());
  }
  std::int64_t Submit(const std::string& name, std::uint32_t gpus, std::uint32_t share_millis = 0) {
    model::JobSpec s;
    s.name = name;
    s.command = {"true"};
    s.resources.gpus = gpus;
    s.resources.gpu_share_millis = share_millis;
    return *store_->CreateJob(s, clock_.NowMs());
  }
  // Places job `id` on n1's first `gpus` GPUs, and starts it now unless told not to.
  std::string Start(std::int64_t id, std::uint32_t gpus, bool started = true) {
    sched::Placement p{id, {{0, "n1", {}}}};
    for (std::uint32_t g = 0; g < gpus; ++g) p.replicas[0].gpu_indices.push_back(g);
    sched::Plan plan;
    plan.placements.push_back(p);
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, clock_.NowMs()).has_value());
    std::string run_id = store_->GetJob(id)->runs.at(0).run_id;
    if (started) MarkStarted(run_id);
    return run_id;
  }
  void MarkStarted(const std::string& run_id) {
    EXPECT_TRUE(
        control::MarkRunStarted(*store_, run_id, 42, clock_.NowMs(), clock_.NowMs()).has_value());
  }
  void End(const std::string& run_id) {
    store::RunExit e;
    e.run_id = run_id;
    e.ended_at_ms = clock_.NowMs();
    ASSERT_TRUE(control::MarkRunExited(*store_, e, clock_.NowMs()).has_value());
  }
  double UsageOf(const std::string& queue) {
    auto it = scheduler_.last.decayed_usage.find(queue);
    return it == scheduler_.last.decayed_usage.end() ? 0.0 : static_cast<double>(it->second);
  }
};

TEST_F(DecayedUsageTest, RunningAndFinishedWorkReachTheSchedulerOnceThroughRestarts) {
  auto run = Start(Submit("big", 4), 4);
  ASSERT_TRUE(controller_->RunPass().has_value());  // sees the run active
  clock_.Advance(kHour);
  Submit("waiting", 8);
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_NEAR(UsageOf("default/default"), Expected(4, 1, 0), 1.0);

  End(run);
  clock_.Advance(kHour);
  ASSERT_TRUE(controller_->RunPass().has_value());
  ASSERT_TRUE(controller_->RunPass().has_value());  // a second pass must not fold it again
  EXPECT_NEAR(UsageOf("default/default"), Expected(4, 2, 1), 1.0);

  // berthd restarts: the same figure comes back from the run history.
  Reopen();
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_NEAR(UsageOf("default/default"), Expected(4, 2, 1), 1.0);
}

TEST_F(DecayedUsageTest, ASliceCountsItsShareOfTheGpu) {
  auto run = Start(Submit("half", 0, 500), 1);
  Submit("waiting", 8);
  ASSERT_TRUE(controller_->RunPass().has_value());
  clock_.Advance(kHour);
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_NEAR(UsageOf("default/default"), Expected(0.5, 1, 0), 1.0);
  End(run);
  clock_.Advance(kHour);
  Reopen();  // from the run history: still half a GPU
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_NEAR(UsageOf("default/default"), Expected(0.5, 2, 1), 1.0);
}

TEST_F(DecayedUsageTest, ARunThatStartsAndEndsBetweenPassesStillCounts) {
  Submit("waiting", 8);
  ASSERT_TRUE(controller_->RunPass().has_value());
  auto run = Start(Submit("short", 2), 2, /*started=*/false);
  ASSERT_TRUE(controller_->RunPass().has_value());  // seen placed, never seen running
  MarkStarted(run);
  clock_.Advance(kHour / 2);
  End(run);
  clock_.Advance(kHour / 2);
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_NEAR(UsageOf("default/default"), Expected(2, 1, 0.5), 1.0);
}

}  // namespace
}  // namespace berth::server
