// berth-sim's jobs through the control layer's transitions (sim/lifecycle.h):
// one gang placed, evicted, hit by a node failure and finished, with the
// record checked after each step, and the disagreements the simulator
// treats as internal errors.
#include "sim/lifecycle.h"

#include <gtest/gtest.h>

#include "sim/engine.h"

namespace berth::sim {
namespace {

using model::JobState;
using model::ReasonCode;
using model::RunState;

SimJob Gang() {
  SimJob j;
  j.id = 7;
  j.name = "gang";
  j.tenant = "t1";
  j.queue = "training";
  j.submit_ms = 1'000;
  j.duration_ms = 600'000;
  j.replicas = 2;
  j.resources.gpus = 2;
  return j;
}

sched::Placement OnTwoNodes() {
  sched::Placement p;
  p.job_id = 7;
  p.replicas = {{0, "node-0000", {0, 1}}, {1, "node-0001", {2, 3}}};
  return p;
}

TEST(SimLifecycle, AJobArrivesPendingWithItsTraceSpec) {
  const auto job = ArrivedJob(Gang());
  EXPECT_EQ(job.id, 7);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.spec.tenant, "t1");
  EXPECT_EQ(job.spec.queue, "training");
  EXPECT_EQ(job.spec.replicas, 2U);
  EXPECT_EQ(job.spec.resources.gpus, 2U);
  EXPECT_EQ(job.submitted_at_ms, 1'000);
  EXPECT_EQ(job.spec.retry.on, std::vector<std::string>{"node_lost"});
}

TEST(SimLifecycle, PlacedEvictedLostAndFinishedThroughTheTransitions) {
  const SimNodes nodes(UniformNodes(2, 8, "H100-80GB"));
  auto job = ArrivedJob(Gang());

  ASSERT_TRUE(PlaceAndStart(job, OnTwoNodes(), nodes.index(), 3, 10'000).has_value());
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempts, 1U);
  EXPECT_EQ(job.policy_version, 3);
  ASSERT_EQ(job.runs.size(), 2U);
  EXPECT_EQ(job.runs[1].state, RunState::kRunning);
  EXPECT_EQ(job.runs[1].gpu_uuids, (std::vector<std::string>{"node-0001-gpu2", "node-0001-gpu3"}));
  EXPECT_TRUE(job.timeline.empty());  // events are dropped

  sched::Eviction e;
  e.job_id = 7;
  e.cause = sched::EvictionCause::kPreempt;
  e.reason = {ReasonCode::kPreempted, {{"by_job", 9}}, "t1/training"};
  ASSERT_TRUE(EvictAndExit(job, e, 20'000).has_value());
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.reason.code, ReasonCode::kPreempted);
  EXPECT_EQ(job.failures, 0U);
  for (const auto& r : job.runs) {
    EXPECT_EQ(r.state, RunState::kExited);
    EXPECT_EQ(r.stopped_for, model::StopCause::kPreempted);
    EXPECT_EQ(r.finished_at_ms, 20'000);
  }

  ASSERT_TRUE(PlaceAndStart(job, OnTwoNodes(), nodes.index(), 3, 30'000).has_value());
  EXPECT_EQ(job.attempts, 2U);
  ASSERT_TRUE(LoseNode(job, "node-0001", 1, 40'000).has_value());
  // A node_lost failure, which the simulated job's retry policy requeues at once.
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.reason.code, ReasonCode::kRetrying);
  EXPECT_EQ(job.failures, 1U);
  EXPECT_EQ(job.retry_after_ms, 40'000);
  EXPECT_EQ(job.runs[0].stopped_for, model::StopCause::kGang);
  EXPECT_EQ(job.runs[1].stopped_for, model::StopCause::kLost);

  ASSERT_TRUE(PlaceAndStart(job, OnTwoNodes(), nodes.index(), 3, 50'000).has_value());
  EXPECT_FALSE(job.retry_after_ms.has_value());
  ASSERT_TRUE(Complete(job, 650'000).has_value());
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.finished_at_ms, 650'000);
  EXPECT_EQ(job.exit_code, 0);
  EXPECT_EQ(job.attempts, 3U);
}

TEST(SimLifecycle, DisagreeingWithTheRecordIsAnInternalError) {
  const SimNodes nodes(UniformNodes(2, 8, "H100-80GB"));
  auto job = ArrivedJob(Gang());
  ASSERT_TRUE(PlaceAndStart(job, OnTwoNodes(), nodes.index(), 1, 10'000).has_value());

  // Placed twice: PlaceJob refuses a job that is not Pending.
  auto twice = PlaceAndStart(job, OnTwoNodes(), nodes.index(), 1, 20'000);
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().code, Code::kInternal);
  EXPECT_NE(twice.error().message.find("Running"), std::string::npos) << twice.error().message;

  // The simulation counts a different number of node failures than the record.
  auto placed = ArrivedJob(Gang());
  ASSERT_TRUE(PlaceAndStart(placed, OnTwoNodes(), nodes.index(), 1, 10'000).has_value());
  auto lost = LoseNode(placed, "node-0000", 2, 30'000);
  ASSERT_FALSE(lost.has_value());
  EXPECT_EQ(lost.error().code, Code::kInternal);
  EXPECT_NE(lost.error().message.find("1 failures"), std::string::npos) << lost.error().message;

  // A job never placed cannot finish.
  auto pending = ArrivedJob(Gang());
  auto done = Complete(pending, 40'000);
  ASSERT_FALSE(done.has_value());
  EXPECT_EQ(done.error().code, Code::kInternal);
}

}  // namespace
}  // namespace berth::sim
