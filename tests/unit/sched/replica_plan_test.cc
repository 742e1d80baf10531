// The service controller's pure half: which replicas to stop, how many to
// create, under scaling, rolling updates and crash back-off.
#include "sched/replica_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace berth::sched {
namespace {

ReplicaView Running(std::int64_t id, std::int64_t revision) {
  return {id, revision, true};
}
ReplicaView Starting(std::int64_t id, std::int64_t revision) {
  return {id, revision, false};
}

ReplicaPlanInput Want(std::uint32_t desired, std::vector<ReplicaView> replicas,
                      std::int64_t revision = 1) {
  ReplicaPlanInput in;
  in.revision = revision;
  in.desired = desired;
  in.replicas = std::move(replicas);
  in.now_ms = 1'000'000;
  return in;
}

std::vector<std::int64_t> Stopped(const ReplicaPlan& plan) {
  std::vector<std::int64_t> ids;
  for (const auto& s : plan.stop) ids.push_back(s.job_id);
  return ids;
}

TEST(ReplicaPlan, ANewServiceCreatesEveryDesiredReplica) {
  ReplicaPlan plan = PlanReplicas(Want(3, {}));
  EXPECT_EQ(plan.create, 3U);
  EXPECT_TRUE(plan.stop.empty());
  EXPECT_EQ(plan.phase, ReplicaPhase::kScaling);
}

TEST(ReplicaPlan, AServiceWithItsReplicasRunningIsSteady) {
  ReplicaPlan plan = PlanReplicas(Want(2, {Running(1, 1), Running(2, 1)}));
  EXPECT_EQ(plan.create, 0U);
  EXPECT_TRUE(plan.stop.empty());
  EXPECT_EQ(plan.phase, ReplicaPhase::kSteady);
}

TEST(ReplicaPlan, ReplicasStillStartingAreScaling) {
  ReplicaPlan plan = PlanReplicas(Want(2, {Running(1, 1), Starting(2, 1)}));
  EXPECT_EQ(plan.create, 0U);
  EXPECT_EQ(plan.phase, ReplicaPhase::kScaling);
}

TEST(ReplicaPlan, ScalingDownStopsReplicasAboveTheMinimumFirst) {
  // 1 and 2 hold the minimum (non-preemptible); 3 and 4 borrow above it. A
  // scale-down to 2 stops the preemptible ones, even the older and ready.
  ReplicaView above_old{3, 1, true, 0, true};
  ReplicaView above_new{4, 1, true, 0, true};
  ReplicaPlan plan = PlanReplicas(Want(2, {Running(1, 1), Starting(2, 1), above_old, above_new}));
  EXPECT_EQ(Stopped(plan), (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(plan.create, 0U);
}

TEST(ReplicaPlan, ScalingDownStopsStartingReplicasFirstThenTheNewest) {
  ReplicaPlan plan =
      PlanReplicas(Want(1, {Running(1, 1), Running(5, 1), Starting(3, 1), Running(4, 1)}));
  EXPECT_EQ(Stopped(plan), (std::vector<std::int64_t>{3, 5, 4}));
  for (const auto& s : plan.stop) EXPECT_EQ(s.cause, ReplicaStopCause::kScaledDown);
  EXPECT_EQ(plan.create, 0U);
}

TEST(ReplicaPlan, ScalingToZeroStopsEveryReplica) {
  ReplicaPlan plan = PlanReplicas(Want(0, {Running(1, 1), Running(2, 1)}));
  EXPECT_EQ(plan.stop.size(), 2U);
  EXPECT_EQ(plan.create, 0U);
}

TEST(ReplicaPlan, ARollingUpdateSurgesFirstAndKeepsTheOldServing) {
  // max_surge 1, max_unavailable 0 (the defaults): one new replica, no old
  // one stopped until a new one runs.
  ReplicaPlanInput in = Want(2, {Running(1, 1), Running(2, 1)}, 2);
  ReplicaPlan plan = PlanReplicas(in);
  EXPECT_EQ(plan.create, 1U);
  EXPECT_TRUE(plan.stop.empty());
  EXPECT_EQ(plan.phase, ReplicaPhase::kRollingOut);

  // The new one still starting: nothing more.
  in.replicas.push_back(Starting(3, 2));
  plan = PlanReplicas(in);
  EXPECT_EQ(plan.create, 0U);
  EXPECT_TRUE(plan.stop.empty());

  // It runs: one old replica goes, and the second new one is created.
  in.replicas.back().ready = true;
  plan = PlanReplicas(in);
  EXPECT_EQ(Stopped(plan), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(plan.stop[0].cause, ReplicaStopCause::kReplaced);
  EXPECT_EQ(plan.create, 1U);

  // Both new ones run: the last old replica goes and the rollout is done
  // at the next round.
  in.replicas = {Running(1, 1), Running(3, 2), Running(4, 2)};
  plan = PlanReplicas(in);
  EXPECT_EQ(Stopped(plan), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(plan.create, 0U);
  in.replicas = {Running(3, 2), Running(4, 2)};
  EXPECT_EQ(PlanReplicas(in).phase, ReplicaPhase::kSteady);
}

TEST(ReplicaPlan, WithoutSurgeAnUpdateStopsAnOldReplicaFirst) {
  ReplicaPlanInput in = Want(2, {Running(1, 1), Running(2, 1)}, 2);
  in.rollout.max_surge = 0;
  in.rollout.max_unavailable = 1;
  ReplicaPlan plan = PlanReplicas(in);
  EXPECT_EQ(Stopped(plan), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(plan.create, 1U);
  // One old serving, the new one starting: nothing until it runs.
  in.replicas = {Running(1, 1), Starting(3, 2)};
  plan = PlanReplicas(in);
  EXPECT_TRUE(plan.stop.empty());
  EXPECT_EQ(plan.create, 0U);
}

TEST(ReplicaPlan, AnUpdateThatNeverRunsKeepsTheOldRevisionServing) {
  // The new revision's replica never starts: the old ones stay, and no more
  // new ones are made than the surge allows.
  ReplicaPlanInput in = Want(2, {Running(1, 1), Running(2, 1), Starting(3, 2)}, 2);
  for (int round = 0; round < 3; ++round) {
    ReplicaPlan plan = PlanReplicas(in);
    EXPECT_TRUE(plan.stop.empty());
    EXPECT_EQ(plan.create, 0U);
    EXPECT_EQ(plan.phase, ReplicaPhase::kRollingOut);
  }
}

TEST(ReplicaPlan, AnOldReplicaNotYetRunningIsReplacedAtOnce) {
  ReplicaPlan plan = PlanReplicas(Want(1, {Starting(1, 1)}, 2));
  EXPECT_EQ(Stopped(plan), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(plan.stop[0].cause, ReplicaStopCause::kReplaced);
  EXPECT_EQ(plan.create, 1U);
}

TEST(ReplicaPlan, CrashesHoldTheReplacementForADoublingBackoff) {
  EXPECT_EQ(CrashBackoffMs(0), 0);
  EXPECT_EQ(CrashBackoffMs(1), 10'000);
  EXPECT_EQ(CrashBackoffMs(2), 20'000);
  EXPECT_EQ(CrashBackoffMs(5), 160'000);
  EXPECT_EQ(CrashBackoffMs(6), 300'000);
  EXPECT_EQ(CrashBackoffMs(1000), 300'000);

  ReplicaPlanInput in = Want(2, {Running(1, 1)});
  in.recent_crashes = 2;
  in.last_crash_ms = in.now_ms - 5'000;
  ReplicaPlan plan = PlanReplicas(in);
  EXPECT_EQ(plan.create, 0U);
  EXPECT_EQ(plan.phase, ReplicaPhase::kBackingOff);
  ASSERT_TRUE(plan.backoff_until_ms);
  EXPECT_EQ(*plan.backoff_until_ms, in.last_crash_ms + 20'000);

  in.now_ms = *plan.backoff_until_ms;
  plan = PlanReplicas(in);
  EXPECT_EQ(plan.create, 1U);
  EXPECT_FALSE(plan.backoff_until_ms);
}

TEST(ReplicaPlan, ABackoffNeverHoldsAScaleDown) {
  ReplicaPlanInput in = Want(1, {Running(1, 1), Running(2, 1)});
  in.recent_crashes = 3;
  in.last_crash_ms = in.now_ms;
  ReplicaPlan plan = PlanReplicas(in);
  EXPECT_EQ(Stopped(plan), (std::vector<std::int64_t>{2}));
  EXPECT_FALSE(plan.backoff_until_ms);
}

// Whatever the replicas, a plan never stops one twice, never creates beyond
// desired + surge, and never leaves fewer running than desired -
// max_unavailable when it could keep them.
TEST(ReplicaPlan, BoundsHoldForEveryMixOfReplicas) {
  for (std::uint32_t desired = 0; desired <= 4; ++desired) {
    for (std::uint32_t surge = 0; surge <= 2; ++surge) {
      for (std::uint32_t unavailable = 0; unavailable <= 2; ++unavailable) {
        if (surge == 0 && unavailable == 0) continue;
        for (int mask = 0; mask < 256; ++mask) {
          // Four replicas: bit 2i present, bit 2i+1 running; alternating revisions.
          ReplicaPlanInput in = Want(desired, {}, 2);
          in.rollout.max_surge = surge;
          in.rollout.max_unavailable = unavailable;
          std::uint32_t running = 0;
          for (int i = 0; i < 4; ++i) {
            if ((mask >> (2 * i) & 1) == 0) continue;
            const bool run = (mask >> (2 * i + 1) & 1) != 0;
            in.replicas.push_back({i + 1, i % 2 == 0 ? 1 : 2, run});
            running += run ? 1 : 0;
          }
          ReplicaPlan plan = PlanReplicas(in);
          auto ids = Stopped(plan);
          std::sort(ids.begin(), ids.end());
          EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
          const std::size_t left = in.replicas.size() - ids.size();
          EXPECT_LE(left + plan.create, std::max<std::size_t>(desired + surge, in.replicas.size()))
              << "mask " << mask;
          std::uint32_t running_left = running;
          for (const auto& s : plan.stop) {
            for (const auto& r : in.replicas) {
              if (r.job_id == s.job_id && r.ready) --running_left;
            }
          }
          const std::uint32_t floor = desired > unavailable ? desired - unavailable : 0;
          EXPECT_GE(running_left, std::min(running, floor)) << "mask " << mask;
        }
      }
    }
  }
}

}  // namespace
}  // namespace berth::sched

namespace berth::sched {
namespace {

TEST(ReplicaPlan, ANewRevisionThatNeverBecomesReadyPausesTheRolloutAndTheOldKeepsServing) {
  ReplicaPlanInput in;
  in.revision = 3;
  in.desired = 2;
  in.now_ms = 1'000'000;
  in.replicas = {{1, 2, true, 0}, {2, 2, true, 0}, {3, 3, false, in.now_ms - 60'000}};
  ReplicaPlan plan = PlanReplicas(in);
  EXPECT_TRUE(plan.stop.empty());  // nothing old goes while the new is not ready
  EXPECT_EQ(plan.create, 0U);      // the surge is used by the new one
  EXPECT_EQ(plan.phase, ReplicaPhase::kRollingOut);
  // Past the progress deadline: paused, still nothing stopped.
  in.now_ms += kRolloutProgressDeadlineMs;
  plan = PlanReplicas(in);
  EXPECT_TRUE(plan.stop.empty());
  EXPECT_EQ(plan.phase, ReplicaPhase::kRolloutPaused);
  EXPECT_EQ(ReplicaPhaseName(plan.phase), "rollout_paused");
  // It becomes ready after all: the rollout goes on.
  in.replicas[2] = {3, 3, true, 0};
  plan = PlanReplicas(in);
  EXPECT_EQ(plan.phase, ReplicaPhase::kRollingOut);
  EXPECT_EQ(plan.stop.size(), 1U);
}

TEST(ReplicaPlan, AnOldReplicaThatIsNotReadyIsReplacedAtOnce) {
  ReplicaPlanInput in;
  in.revision = 2;
  in.desired = 1;
  in.now_ms = 1'000'000;
  in.replicas = {{1, 1, false, in.now_ms - 5'000}};
  ReplicaPlan plan = PlanReplicas(in);
  ASSERT_EQ(plan.stop.size(), 1U);
  EXPECT_EQ(plan.stop[0].cause, ReplicaStopCause::kReplaced);
  EXPECT_EQ(plan.create, 1U);
}

// Canary steps: 4 replicas of revision 1 serving, revision 2 applied with
// steps of 25% (paused 1 min) and 50% (until resumed).
ReplicaPlanInput Canary(std::vector<ReplicaView> replicas, std::uint32_t step,
                        TimeMs ready_since_ms = 0) {
  ReplicaPlanInput in = Want(4, std::move(replicas), 2);
  in.rollout.canary = {{25, 60'000}, {50, 0}};
  in.canary = ReplicaPlanInput::CanaryAt{step, ready_since_ms};
  return in;
}
std::vector<ReplicaView> OldFour() {
  return {Running(1, 1), Running(2, 1), Running(3, 1), Running(4, 1)};
}

TEST(ReplicaPlan, ACanaryStepStartsItsShareOfReplicasAndKeepsTheOldOnes) {
  ReplicaPlan plan = PlanReplicas(Canary(OldFour(), 0));
  EXPECT_EQ(plan.phase, ReplicaPhase::kCanary);
  EXPECT_EQ(plan.create, 1U);  // 25% of 4
  EXPECT_TRUE(plan.stop.empty());
  ASSERT_TRUE(plan.canary);
  EXPECT_EQ(plan.canary->weight_pct, 25U);
  EXPECT_EQ(plan.canary->replicas, 1U);
  EXPECT_FALSE(plan.canary->ready);
  EXPECT_FALSE(plan.canary->pause_ends_ms);
  EXPECT_FALSE(plan.canary->advance);

  // Ready: the old four still serve, none more is made, the pause runs.
  auto replicas = OldFour();
  replicas.push_back(Running(5, 2));
  plan = PlanReplicas(Canary(replicas, 0));
  EXPECT_EQ(plan.create, 0U);
  EXPECT_TRUE(plan.stop.empty());
  ASSERT_TRUE(plan.canary && plan.canary->ready);
  EXPECT_EQ(plan.canary->pause_ends_ms, 1'000'000 + 60'000);
  EXPECT_FALSE(plan.canary->advance);
  // Ready for a minute: on to the next step.
  plan = PlanReplicas(Canary(replicas, 0, 1'000'000 - 60'000));
  EXPECT_TRUE(plan.canary->advance);
  plan = PlanReplicas(Canary(replicas, 0, 1'000'000 - 59'999));
  EXPECT_FALSE(plan.canary->advance);
}

TEST(ReplicaPlan, AStepWithoutAPauseWaitsToBeResumed) {
  auto replicas = OldFour();
  replicas.push_back(Running(5, 2));
  ReplicaPlan plan = PlanReplicas(Canary(replicas, 1));
  EXPECT_EQ(plan.create, 1U);  // 50% of 4: one more
  EXPECT_FALSE(plan.canary->awaiting_resume);
  replicas.push_back(Running(6, 2));
  plan = PlanReplicas(Canary(replicas, 1, 1));
  EXPECT_EQ(plan.phase, ReplicaPhase::kCanary);
  EXPECT_TRUE(plan.canary->awaiting_resume);
  EXPECT_FALSE(plan.canary->advance);  // however long it has been ready
  EXPECT_FALSE(plan.canary->pause_ends_ms);
  EXPECT_TRUE(plan.stop.empty());
}

TEST(ReplicaPlan, AfterTheLastStepTheRollingUpdateReplacesTheRest) {
  auto replicas = OldFour();
  replicas.push_back(Running(5, 2));
  replicas.push_back(Running(6, 2));
  ReplicaPlan plan = PlanReplicas(Canary(replicas, 2));  // past the last step
  EXPECT_EQ(plan.phase, ReplicaPhase::kRollingOut);
  EXPECT_FALSE(plan.canary);
  EXPECT_EQ(Stopped(plan).size(), 2U);  // two old ones go, two stay ready
}

TEST(ReplicaPlan, ACanaryNeverRunsMoreOfEitherRevisionThanItsShare) {
  // A step at 25% with three new replicas (the step before, a scale-down):
  // two go; old ones above the desired count go too.
  std::vector<ReplicaView> replicas = OldFour();
  replicas.push_back(Running(9, 1));
  for (std::int64_t id : {5, 6, 7}) replicas.push_back(Running(id, 2));
  ReplicaPlan plan = PlanReplicas(Canary(replicas, 0));
  EXPECT_EQ(plan.create, 0U);
  EXPECT_EQ(Stopped(plan).size(), 3U);
  for (const auto& s : plan.stop) EXPECT_EQ(s.cause, ReplicaStopCause::kScaledDown);
}

TEST(ReplicaPlan, ACanaryThatNeverBecomesReadyPausesTheRollout) {
  auto replicas = OldFour();
  ReplicaView broken{5, 2, false, 1'000'000 - kRolloutProgressDeadlineMs};
  replicas.push_back(broken);
  ReplicaPlan plan = PlanReplicas(Canary(replicas, 0));
  EXPECT_EQ(plan.phase, ReplicaPhase::kRolloutPaused);
  EXPECT_TRUE(plan.stop.empty());  // the old revision keeps serving
  EXPECT_FALSE(plan.canary->ready);
}

TEST(ReplicaPlan, CanaryWeightsSplitTheRequestsAsTheStepSays) {
  // As a step has them: ceil(pct x desired) new replicas beside the old
  // revision's desired ones.
  for (std::uint32_t pct : {1U, 5U, 10U, 25U, 33U, 50U, 90U, 99U, 100U}) {
    for (std::uint32_t old = 1; old <= 60; ++old) {
      {
        const std::uint32_t cur = std::max<std::uint32_t>(1, (pct * old + 99) / 100);
        const auto [wc, wo] = CanaryWeights(pct, cur, old);
        ASSERT_GE(wc, 1) << pct << " " << cur << " " << old;
        ASSERT_LE(wc, 256);
        ASSERT_GE(wo, pct == 100 ? 0 : 1);
        ASSERT_LE(wo, 256);
        const double share = double(wc) * cur / (double(wc) * cur + double(wo) * old);
        // Exact below HAProxy's bound; within a point or so once scaled.
        EXPECT_NEAR(share * 100, pct, 1.5) << pct << " " << cur << " " << old;
      }
    }
  }
  EXPECT_EQ(CanaryWeights(10, 1, 3), std::make_pair(30, 90));
  EXPECT_EQ(CanaryWeights(100, 2, 2), std::make_pair(100, 0));
  EXPECT_EQ(CanaryWeights(30, 0, 2), std::make_pair(100, 100));
}

}  // namespace
}  // namespace berth::sched
