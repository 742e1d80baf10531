// The lifecycle's named transitions, alone: records in, the job as each
// leaves it and its events out. No store, no clock.
#include "control/transitions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/reason.h"

namespace berth::control {
namespace {

using model::JobRecord;
using model::JobState;
using model::ReasonCode;
using model::RunRecord;
using model::RunState;

constexpr TimeMs kNow = 1'000'000;

RunRecord Exited(std::uint32_t replica, std::int32_t code,
                 model::StopCause stopped_for = model::StopCause::kNone,
                 std::uint32_t attempt = 1) {
  RunRecord r;
  r.run_id = "7." + std::to_string(replica) + "." + std::to_string(attempt);
  r.job_id = 7;
  r.replica = replica;
  r.attempt = attempt;
  r.node = "node-a";
  r.state = RunState::kExited;
  r.exit_code = code;
  r.stopped_for = stopped_for;
  return r;
}

JobRecord Running(std::vector<RunRecord> runs) {
  JobRecord j;
  j.id = 7;
  j.state = JobState::kRunning;
  j.started_at_ms = kNow - 60'000;
  j.attempts = 1;
  j.runs = std::move(runs);
  return j;
}

TEST(SettleAttempt, WaitsWhileARunOfTheLatestAttemptIsActive) {
  RunRecord live = Exited(1, 0);
  live.state = RunState::kRunning;
  live.exit_code.reset();
  EXPECT_FALSE(SettleAttempt(Running({Exited(0, 0), live}), kNow));
  // A run of an earlier attempt still shown as running does not hold it.
  RunRecord old = live;
  old.attempt = 0;
  EXPECT_TRUE(SettleAttempt(Running({Exited(0, 0), Exited(1, 0), old}), kNow));
}

TEST(SettleAttempt, AllZeroSucceeds) {
  auto u = SettleAttempt(Running({Exited(0, 0), Exited(1, 0)}), kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kSucceeded);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kSucceeded);
  EXPECT_EQ(u->job.finished_at_ms, kNow);
  EXPECT_EQ(u->job.exit_code, 0);
  EXPECT_FALSE(u->job.signal);
  ASSERT_EQ(u->events.size(), 1U);
  EXPECT_EQ(u->events[0].event, "Succeeded");
  EXPECT_EQ(u->events[0].state, JobState::kSucceeded);
  EXPECT_EQ(u->events[0].time_ms, kNow);
}

TEST(SettleAttempt, ANonZeroExitFailsWithThatReplicaNotThePeersBerthStopped) {
  JobRecord job = Running({Exited(0, 143, model::StopCause::kGang), Exited(1, 3)});
  job.spec.retry.on.clear();
  auto u = SettleAttempt(job, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kFailed);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kFailedExitCode);
  EXPECT_EQ(u->job.reason.counts.at("replica"), 1);
  EXPECT_EQ(u->job.reason.counts.at("exit_code"), 3);
  EXPECT_EQ(u->job.reason.counts.at("retry_class_excluded"), 1);
  EXPECT_EQ(u->job.exit_code, 3);
  EXPECT_EQ(u->job.failures, 1U);
}

TEST(SettleAttempt, AKilledReplicaHasASignalAndNoExitCode) {
  RunRecord killed = Exited(0, 0);
  killed.exit_code.reset();
  killed.signal = 9;
  auto u = SettleAttempt(Running({killed}), kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.reason.counts.at("signal"), 9);
  EXPECT_FALSE(u->job.reason.counts.contains("exit_code"));
  EXPECT_FALSE(u->job.exit_code);
  EXPECT_EQ(u->job.signal, 9);
}

TEST(SettleAttempt, CancelWinsOverAnEviction) {
  JobRecord job = Running({Exited(0, 143, model::StopCause::kPreempted)});
  job.cancel_requested = true;
  job.cancelled_by = "alice";
  auto u = SettleAttempt(job, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kCancelled);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kCancelled);
  EXPECT_EQ(u->job.reason.detail, "alice");
  EXPECT_EQ(u->events.at(0).event, "Cancelled");
}

TEST(SettleAttempt, AnEvictedJobIsRequeuedKeepingItsEvictionReason) {
  JobRecord job = Running(
      {Exited(0, 143, model::StopCause::kPreempted), Exited(1, 143, model::StopCause::kPreempted)});
  job.reason = {ReasonCode::kPreempted, {{"by_job", 9}}, "team-a/prod"};
  auto u = SettleAttempt(job, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kPending);
  EXPECT_FALSE(u->job.started_at_ms);
  EXPECT_FALSE(u->job.finished_at_ms);
  EXPECT_EQ(u->job.reason, job.reason);
  EXPECT_EQ(u->job.failures, 0U);
  ASSERT_EQ(u->events.size(), 1U);
  EXPECT_EQ(u->events[0].event, "Requeued");
  EXPECT_EQ(u->events[0].message,
            "every replica stopped after it was preempted; waiting to be placed again");
}

TEST(SettleAttempt, ADrainedJobWaitsWithTheDrainAsItsReason) {
  auto u = SettleAttempt(Running({Exited(0, 0, model::StopCause::kDrained)}), kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kPending);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kDrained);
  EXPECT_EQ(u->job.reason.detail, "node-a");
  EXPECT_NE(u->events.at(0).message.find("node node-a is being drained"), std::string::npos);
}

TEST(SettleAttempt, AnEvictedReplicaThatAlsoFailedIsAFailure) {
  JobRecord job = Running({Exited(0, 143, model::StopCause::kMoved), Exited(1, 2)});
  job.spec.retry.on.clear();
  auto u = SettleAttempt(job, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kFailed);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kFailedExitCode);
}

TEST(SettleAttempt, AGpuErrorRetriesWithBackoffDoubledAndCapped) {
  RunRecord gpu = Exited(0, 0, model::StopCause::kGpuError);
  gpu.stop_detail = "Xid 79 on GPU 3";
  JobRecord job = Running({gpu});
  job.spec.retry = {.max_attempts = 20, .backoff_ms = 10'000, .on = {"gpu_hardware"}};
  auto first = SettleAttempt(job, kNow);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->job.state, JobState::kPending);
  EXPECT_EQ(first->job.failures, 1U);
  EXPECT_EQ(first->job.retry_after_ms, kNow + 10'000);
  EXPECT_EQ(first->job.reason.code, ReasonCode::kRetrying);
  EXPECT_EQ(first->job.reason.counts.at("backoff_s"), 10);
  EXPECT_EQ(first->job.reason.detail.rfind("gpu_hardware: ", 0), 0U);
  EXPECT_EQ(first->events.at(0).event, "Retrying");
  EXPECT_FALSE(first->job.finished_at_ms);

  job.failures = 3;  // the fourth failure waits 10 s * 2^3
  EXPECT_EQ(SettleAttempt(job, kNow)->job.retry_after_ms, kNow + 80'000);
  job.failures = 9;  // 10 s * 2^9 is past the one-hour cap
  EXPECT_EQ(SettleAttempt(job, kNow)->job.retry_after_ms, kNow + model::kMaxRetryBackoffMs);
}

TEST(SettleAttempt, RetriesExhaustedFailsAndSaysSo) {
  JobRecord job = Running({Exited(0, 0, model::StopCause::kGpuError)});
  job.spec.retry = {.max_attempts = 3, .backoff_ms = 1000, .on = {"gpu_hardware"}};
  job.failures = 2;
  auto u = SettleAttempt(job, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kFailed);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kGpuFailed);
  EXPECT_EQ(u->job.reason.counts.at("attempts"), 3);
  EXPECT_EQ(u->job.reason.counts.at("retries_exhausted"), 1);
  EXPECT_EQ(u->job.failures, 3U);
  EXPECT_FALSE(u->job.exit_code);  // a hardware fault, not the job's exit
}

TEST(SettleAttempt, APolicyCapOfOneStopsARetryTheJobAskedForAndSaysWhose) {
  JobRecord job = Running({Exited(0, 3)});
  job.spec.retry = {.max_attempts = 2, .backoff_ms = 1000, .on = {"user_code"}};
  // Without a cap the job's block retries it.
  auto uncapped = SettleAttempt(job, kNow);
  ASSERT_TRUE(uncapped);
  EXPECT_EQ(uncapped->job.state, JobState::kPending);

  auto u = SettleAttempt(job, kNow, model::AttemptCap{1, "ml/training"});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kFailed);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kFailedExitCode);
  EXPECT_EQ(u->job.failures, 1U);
  EXPECT_EQ(u->job.reason.counts.at("retries_exhausted"), 1);
  EXPECT_EQ(u->job.reason.counts.at("retry_cap"), 1);
  EXPECT_EQ(u->job.reason.counts.at("retry_asked"), 2);
  EXPECT_EQ(u->job.reason.counts.at("retry_cap_queue"), 1);
  const std::string en = model::RenderReason(u->job.reason);
  EXPECT_NE(en.find("its queue's retry policy allows 1 attempt (the job asked for 2)"),
            std::string::npos)
      << en;
  const std::string zh = model::RenderReason(u->job.reason, model::Lang::kZh);
  EXPECT_NE(zh.find("所在队列的重试策略只允许尝试 1 次（作业要求 2 次）"), std::string::npos) << zh;
  EXPECT_NE(u->events.back().message.find("its queue's retry policy"), std::string::npos);
}

TEST(SettleAttempt, ACapAboveTheFailuresRetriesCountingTheCappedAttempts) {
  JobRecord job = Running({Exited(0, 3)});
  job.spec.retry = {.max_attempts = 5, .backoff_ms = 1000, .on = {"user_code"}};
  // The top level's cap of 2: the first failure retries, "attempt 1 of 2".
  auto first = SettleAttempt(job, kNow, model::AttemptCap{2, ""});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->job.state, JobState::kPending);
  EXPECT_EQ(first->job.reason.counts.at("max_attempts"), 2);
  // The second is the last: the cluster's policy, not the queue's, says so.
  job.failures = 1;
  auto second = SettleAttempt(job, kNow, model::AttemptCap{2, ""});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->job.state, JobState::kFailed);
  EXPECT_EQ(second->job.reason.counts.at("attempts"), 2);
  EXPECT_FALSE(second->job.reason.counts.contains("retry_cap_queue"));
  const std::string en = model::RenderReason(second->job.reason);
  EXPECT_NE(en.find("(after 2 attempts); the cluster's retry policy allows 2 attempts (the job "
                    "asked for 5)"),
            std::string::npos)
      << en;
}

TEST(SettleAttempt, ACapTheJobsOwnBlockIsUnderChangesNothing) {
  // The job's own attempts run out first: the usual words, no cap counts.
  JobRecord job = Running({Exited(0, 3)});
  job.spec.retry = {.max_attempts = 2, .backoff_ms = 1000, .on = {"user_code"}};
  job.failures = 1;
  auto u = SettleAttempt(job, kNow, model::AttemptCap{4, "ml"});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kFailed);
  EXPECT_EQ(u->job.reason.counts.at("retries_exhausted"), 1);
  EXPECT_FALSE(u->job.reason.counts.contains("retry_cap"));
  EXPECT_NE(model::RenderReason(u->job.reason).find("its retry policy has no attempts left"),
            std::string::npos);
  // A class the job does not retry is not the cap's doing either.
  job.failures = 0;
  job.spec.retry.on = {"node_lost"};
  auto excluded = SettleAttempt(job, kNow, model::AttemptCap{1, "ml"});
  ASSERT_TRUE(excluded);
  EXPECT_EQ(excluded->job.reason.counts.at("retry_class_excluded"), 1);
  EXPECT_FALSE(excluded->job.reason.counts.contains("retry_cap"));
}

TEST(SettleAttempt, ALostOrFencedRunIsANodeLostFailure) {
  JobRecord lost = Running({Exited(0, 0, model::StopCause::kLost)});
  lost.runs[0].start_error = "node node-a stopped answering";
  lost.spec.retry.on.clear();
  auto u = SettleAttempt(lost, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kRunLost);
  EXPECT_EQ(u->job.reason.detail, "node node-a stopped answering");

  JobRecord fenced = Running({Exited(0, 0, model::StopCause::kFenced)});
  fenced.spec.retry.on = {"node_lost"};
  fenced.spec.retry.max_attempts = 1;
  u = SettleAttempt(fenced, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kFailed);
  EXPECT_NE(u->job.reason.detail.find("(fenced)"), std::string::npos);
  EXPECT_EQ(u->job.reason.counts.at("retries_exhausted"), 1);
}

// A cause a newer Berth wrote (read as kUnknown) is a stop for no known
// cause: not the job's failure, and no eviction to requeue for.
TEST(SettleAttempt, AnUnknownStopCauseNeitherFailsNorRequeues) {
  JobRecord job = Running({Exited(0, 143, model::StopCause::kUnknown), Exited(1, 0)});
  auto u = SettleAttempt(job, kNow);
  ASSERT_TRUE(u);
  EXPECT_NE(u->job.state, JobState::kPending);
  EXPECT_NE(u->job.state, JobState::kFailed);
  EXPECT_EQ(u->job.failures, 0U);
}

TEST(RecordExit, AnUnknownStopCauseIsAStopAndStopsNoGang) {
  RunRecord stopping = Exited(0, 0);
  stopping.state = RunState::kRunning;
  stopping.exit_code.reset();
  stopping.stop_requested = true;
  stopping.stopped_for = model::StopCause::kUnknown;
  RunRecord peer = stopping;
  peer.run_id = "7.1.1";
  peer.replica = 1;
  peer.stop_requested = false;
  peer.stopped_for = model::StopCause::kNone;
  model::RunExit exit;
  exit.run_id = stopping.run_id;
  exit.signal = 15;
  exit.ended_at_ms = kNow;
  auto u = RecordExit(Running({stopping, peer}), exit, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->run.stopped_for, model::StopCause::kUnknown);
  EXPECT_FALSE(u->job.job.runs[1].stop_requested) << "not a failure: the gang runs on";
  ASSERT_FALSE(u->job.events.empty());
  EXPECT_NE(u->job.events[0].message.find("(stopped: unknown)"), std::string::npos)
      << u->job.events[0].message;
}

TEST(SettleAttempt, MaxRuntimeAndStartErrorsHaveTheirOwnReasons) {
  JobRecord slow = Running({Exited(0, 143, model::StopCause::kMaxRuntime)});
  slow.spec.max_runtime_ms = 3'600'000;
  slow.spec.retry.on.clear();
  auto u = SettleAttempt(slow, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kMaxRuntimeExceeded);
  EXPECT_EQ(u->job.reason.counts.at("max_runtime_s"), 3600);
  EXPECT_EQ(u->job.exit_code, 143);

  RunRecord bad = Exited(0, 127);
  bad.start_error = "exec: trainer: not found";
  JobRecord missing = Running({bad});
  u = SettleAttempt(missing, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kFailedToStart);
  EXPECT_EQ(u->job.reason.detail, "exec: trainer: not found");
  EXPECT_FALSE(u->job.reason.counts.contains("run_identity"));

  missing.runs[0].failure_class = "run_identity";
  u = SettleAttempt(missing, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.reason.counts.at("run_identity"), 1);
}

model::RunExit ExitOf(const std::string& run_id, std::int32_t code) {
  model::RunExit e;
  e.run_id = run_id;
  e.exit_code = code;
  e.started_at_ms = kNow - 50'000;
  e.ended_at_ms = kNow - 10;
  return e;
}

JobRecord Gang() {
  RunRecord a = Exited(0, 0);
  RunRecord b = Exited(1, 0);
  for (RunRecord* r : {&a, &b}) {
    r->state = RunState::kRunning;
    r->exit_code.reset();
    r->started_at_ms = kNow - 50'000;
  }
  return Running({a, b});
}

TEST(RecordExit, AFailedReplicaStopsItsGangAndTheLastExitSettles) {
  JobRecord job = Gang();
  job.spec.retry.on.clear();
  auto u = RecordExit(job, ExitOf("7.1.1", 3), kNow);
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->settled);
  EXPECT_EQ(u->run.state, RunState::kExited);
  EXPECT_EQ(u->run.exit_code, 3);
  EXPECT_EQ(u->run.finished_at_ms, kNow - 10);
  EXPECT_TRUE(u->job.job.runs[0].stop_requested);
  EXPECT_EQ(u->job.job.runs[0].stopped_for, model::StopCause::kGang);
  ASSERT_EQ(u->job.events.size(), 1U);
  EXPECT_EQ(u->job.events[0].event, "Exited");
  EXPECT_EQ(u->job.events[0].message, "replica 1 on node-a exited with code 3");

  // The peer's exit ends the attempt: the failure is replica 1's.
  model::RunExit peer = ExitOf("7.0.1", 143);
  peer.stopped_for = model::StopCause::kCancelled;  // the agent's echo of a plain stop
  peer.clean_stop = true;
  u = RecordExit(u->job.job, peer, kNow);
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->settled);
  EXPECT_EQ(u->run.stopped_for, model::StopCause::kGang);  // Berth's cause wins over the echo
  EXPECT_EQ(u->job.job.state, JobState::kFailed);
  EXPECT_EQ(u->job.job.reason.counts.at("replica"), 1);
  ASSERT_EQ(u->job.events.size(), 2U);
  EXPECT_EQ(u->job.events[0].message,
            "replica 0 on node-a exited with code 143 (stopped: gang); it exited within its "
            "grace period");
  EXPECT_EQ(u->job.events[1].event, "Failed");
  // Recorded once: the same exit again changes nothing.
  EXPECT_FALSE(RecordExit(u->job.job, peer, kNow));
}

TEST(RecordExit, MaxRuntimeIsTheAgentsToSayAndANeverStartedRunHasNoStart) {
  JobRecord job = Gang();
  job.runs[1].state = RunState::kStarting;
  job.runs[1].started_at_ms.reset();
  job.runs[1].stop_requested = true;
  job.runs[1].stopped_for = model::StopCause::kCancelled;
  model::RunExit e = ExitOf("7.1.1", 0);
  e.never_started = true;
  auto u = RecordExit(job, e, kNow);
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->run.started_at_ms);
  EXPECT_NE(u->job.events[0].message.find("was never started"), std::string::npos);

  model::RunExit slow = ExitOf("7.0.1", 0);
  slow.signal = 9;
  slow.stopped_for = model::StopCause::kMaxRuntime;
  slow.last_checkpoint_ms = kNow - 2'510;
  u = RecordExit(job, slow, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->run.stopped_for, model::StopCause::kMaxRuntime);
  EXPECT_FALSE(u->run.exit_code);
  EXPECT_EQ(u->run.signal, 9);
  EXPECT_EQ(u->run.last_checkpoint_ms, kNow - 2'510);
  EXPECT_NE(u->job.events[0].message.find("killed by signal 9 (stopped: max_runtime); last "
                                          "checkpoint 2.5 s before the exit"),
            std::string::npos)
      << u->job.events[0].message;
}

TEST(RecordExit, AnUnknownRunChangesNothing) {
  EXPECT_FALSE(RecordExit(Gang(), ExitOf("7.9.1", 0), kNow));
}

JobRecord WithActiveRuns() {
  RunRecord a = Exited(0, 0);
  a.state = RunState::kRunning;
  RunRecord b = Exited(1, 0);
  b.state = RunState::kStarting;
  RunRecord old = Exited(0, 1, model::StopCause::kNone, 0);
  return Running({old, a, b});
}

TEST(EvictJob, AsksEveryActiveRunToStopForTheCause) {
  sched::Eviction e;
  e.job_id = 7;
  e.by_job = 9;
  e.cause = sched::EvictionCause::kPreempt;
  e.reason = {ReasonCode::kPreempted, {{"by_job", 9}}, {}};
  auto u = EvictJob(WithActiveRuns(), e, nullptr, kNow);
  ASSERT_TRUE(u);
  const auto& runs = u->victim.job.runs;
  EXPECT_FALSE(runs[0].stop_requested);  // exited long ago
  EXPECT_TRUE(runs[1].stop_requested);
  EXPECT_EQ(runs[1].stopped_for, model::StopCause::kPreempted);
  EXPECT_EQ(runs[2].stopped_for, model::StopCause::kPreempted);
  EXPECT_EQ(u->victim.job.reason, e.reason);
  EXPECT_EQ(u->victim.job.state, JobState::kRunning);  // Pending once its runs have exited
  EXPECT_EQ(u->victim.events.at(0).event, "Preempting");
  EXPECT_FALSE(u->by);
}

TEST(EvictJob, AMoveTellsBothJobs) {
  sched::Eviction e;
  e.job_id = 7;
  e.by_job = 9;
  e.cause = sched::EvictionCause::kMove;
  e.work_lost_ms = 42'000;
  e.moved_from = {{0, "node-a", {0, 1}}};
  e.moved_to = {{0, "node-b", {2, 3}}};
  JobRecord by;
  by.id = 9;
  auto u = EvictJob(WithActiveRuns(), e, &by, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->victim.job.runs[1].stopped_for, model::StopCause::kMoved);
  EXPECT_EQ(u->victim.events.at(0).event, "Moving");
  EXPECT_NE(u->victim.events[0].message.find("from node-a GPUs [0,1] to node-b GPUs [2,3]"),
            std::string::npos);
  ASSERT_TRUE(u->by);
  EXPECT_EQ(u->by->job.id, 9);
  EXPECT_EQ(u->by->events.at(0).event, "Consolidating");
  EXPECT_NE(u->by->events[0].message.find("about 42 s"), std::string::npos);
}

TEST(EvictJob, NothingToEvictOnceFinishedOrCancelling) {
  sched::Eviction e;
  e.job_id = 7;
  JobRecord done = WithActiveRuns();
  done.state = JobState::kSucceeded;
  EXPECT_FALSE(EvictJob(done, e, nullptr, kNow));
  JobRecord cancelling = WithActiveRuns();
  cancelling.cancel_requested = true;
  EXPECT_FALSE(EvictJob(cancelling, e, nullptr, kNow));
}

TEST(PlaceJob, StartsTheNextAttemptOnThePlannedGpus) {
  model::NodeInfo node;
  node.name = "node-a";
  for (std::uint32_t i = 0; i < 2; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.memory_bytes = 80ULL << 30;
    node.gpus.push_back(g);
  }
  NodeIndex nodes{{"node-a", &node}};
  JobRecord job;
  job.id = 7;
  job.state = JobState::kPending;
  job.attempts = 2;
  job.retry_after_ms = kNow - 5;
  job.runs = {Exited(0, 1, model::StopCause::kNone, 2)};
  sched::Placement p;
  p.job_id = 7;
  p.replicas = {{0, "node-a", {1}}};
  p.borrowed = sched::Placement::Borrowed{"team-a/dev", 3000, 2000};
  auto u = PlaceJob(job, p, nodes, 4, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kScheduled);
  EXPECT_EQ(u->job.attempts, 3U);
  EXPECT_EQ(u->job.policy_version, 4);
  EXPECT_FALSE(u->job.retry_after_ms);
  ASSERT_EQ(u->job.runs.size(), 1U);  // only the new runs
  const auto& run = u->job.runs[0];
  EXPECT_EQ(run.run_id, "7.0.3");
  EXPECT_EQ(run.state, RunState::kStarting);
  EXPECT_EQ(run.gpu_uuids, (std::vector<std::string>{"GPU-1"}));
  EXPECT_EQ(run.gpu_share_millis, 0U);
  ASSERT_EQ(u->events.size(), 2U);
  EXPECT_EQ(u->events[0].event, "Scheduled");
  EXPECT_EQ(u->events[0].message, "replica 0 on node-a GPUs [1]; under policy v4");
  EXPECT_EQ(u->events[0].policy_version, 4);
  EXPECT_EQ(u->events[1].event, "Borrowing");

  // Ahead of its queue's head: an event names the head and why it could
  // never use what this job took.
  p.ahead_of = sched::Placement::AheadOf{10, {{"gpu_model_mismatch", 1}}};
  u = PlaceJob(job, p, nodes, 4, kNow);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->events.size(), 3U);
  EXPECT_EQ(u->events[2].event, "AheadOfHead");
  EXPECT_NE(u->events[2].message.find("runs ahead of job 10"), std::string::npos);
  EXPECT_NE(u->events[2].message.find("1 no GPU of the requested model"), std::string::npos)
      << u->events[2].message;
  p.ahead_of.reset();

  // A slice holds its share of the card it is placed on.
  job.spec.resources.gpu_share_millis = 250;
  u = PlaceJob(job, p, nodes, 4, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.runs[0].gpu_share_millis, 250U);
  EXPECT_NE(u->events[0].message.find("(a slice: 250 mGPU"), std::string::npos);
}

TEST(PlaceJob, DroppedWhenNoLongerPendingOrCancelling) {
  JobRecord job;
  job.id = 7;
  job.state = JobState::kPending;
  job.cancel_requested = true;
  sched::Placement p;
  EXPECT_FALSE(PlaceJob(job, p, {}, 1, kNow));
  job.cancel_requested = false;
  job.state = JobState::kScheduled;
  EXPECT_FALSE(PlaceJob(job, p, {}, 1, kNow));
}

TEST(CancelJob, APendingJobIsCancelledAtOnce) {
  JobRecord job;
  job.id = 7;
  auto u = CancelJob(job, "alice", kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kCancelled);
  EXPECT_TRUE(u->job.cancel_requested);
  EXPECT_EQ(u->job.cancelled_by, "alice");
  EXPECT_EQ(u->job.finished_at_ms, kNow);
  EXPECT_EQ(u->job.reason.code, ReasonCode::kCancelled);
  EXPECT_EQ(u->events.at(0).message, "cancelled by alice before it started");
}

TEST(CancelJob, ARunningJobsRunsStopForTheCancelOverAnEarlierCause) {
  JobRecord job = WithActiveRuns();
  job.runs[2].stop_requested = true;
  job.runs[2].stopped_for = model::StopCause::kPreempted;
  auto u = CancelJob(job, "alice", kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.state, JobState::kRunning);  // Cancelled once its runs have exited
  EXPECT_FALSE(u->job.runs[0].stop_requested);  // an exited run of an earlier attempt
  EXPECT_EQ(u->job.runs[1].stopped_for, model::StopCause::kCancelled);
  EXPECT_EQ(u->job.runs[2].stopped_for, model::StopCause::kCancelled);
  EXPECT_EQ(u->events.at(0).event, "CancelRequested");
}

TEST(CancelJob, AFinishedJobIsRefusedNamingItsState) {
  JobRecord job = WithActiveRuns();
  job.state = JobState::kFailed;
  auto u = CancelJob(job, "alice", kNow);
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().code, Code::kFailedPrecondition);
  EXPECT_NE(u.error().message.find("already finished (Failed)"), std::string::npos);
}

TEST(StopJob, StopsOnlyRunsNotAlreadyStopping) {
  JobRecord job = WithActiveRuns();
  job.runs[2].stop_requested = true;
  job.runs[2].stopped_for = model::StopCause::kPreempted;
  auto u = StopJob(job, model::StopCause::kMaxRuntime);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.runs[1].stopped_for, model::StopCause::kMaxRuntime);
  EXPECT_EQ(u->job.runs[2].stopped_for, model::StopCause::kPreempted);
  EXPECT_TRUE(u->events.empty());
  EXPECT_FALSE(StopJob(u->job, model::StopCause::kGang));
}

TEST(FailGpu, TheRunOnTheGpuStopsForItAndItsGangWithIt) {
  JobRecord job = WithActiveRuns();
  job.runs[1].gpu_indices = {0, 1};
  job.runs[2].gpu_indices = {2, 3};
  EXPECT_FALSE(FailGpu(job, "node-a", 5, "Xid 79", kNow));
  EXPECT_FALSE(FailGpu(job, "node-b", 1, "Xid 79", kNow));
  auto u = FailGpu(job, "node-a", 1, "Xid 79", kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.runs[1].stopped_for, model::StopCause::kGpuError);
  EXPECT_EQ(u->job.runs[1].failure_class, "gpu_hardware");
  EXPECT_EQ(u->job.runs[1].stop_detail, "Xid 79");
  EXPECT_EQ(u->job.runs[2].stopped_for, model::StopCause::kGang);
  EXPECT_TRUE(u->job.runs[2].stop_requested);
  ASSERT_EQ(u->events.size(), 1U);
  EXPECT_EQ(u->events[0].message, "replica 0: Xid 79; stopping the job");
}

TEST(DrainJob, TheWholeGangStopsOnlyForRunsStillThere) {
  JobRecord job = WithActiveRuns();
  job.runs[2].node = "node-b";
  auto u = DrainJob(job, "node-a", kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.runs[1].stopped_for, model::StopCause::kDrained);
  EXPECT_EQ(u->job.runs[2].stopped_for, model::StopCause::kDrained);  // on node-b, same gang
  EXPECT_EQ(u->events.at(0).event, "Draining");
  EXPECT_FALSE(DrainJob(u->job, "node-a", kNow));  // already stopping
  EXPECT_FALSE(DrainJob(job, "node-c", kNow));
}

TEST(StartRun, TheFirstReplicaToStartMakesTheJobRunningOnce) {
  JobRecord job = WithActiveRuns();
  job.state = JobState::kScheduled;
  job.started_at_ms.reset();
  job.runs[2].started_at_ms.reset();
  auto u = StartRun(job, "7.1.1", 4242, kNow - 7);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->run.state, RunState::kRunning);
  EXPECT_EQ(u->run.pid, 4242);
  EXPECT_EQ(u->run.started_at_ms, kNow - 7);
  EXPECT_EQ(u->job.job.state, JobState::kRunning);
  EXPECT_EQ(u->job.job.started_at_ms, kNow - 7);
  EXPECT_EQ(u->job.job.reason.code, ReasonCode::kRunning);
  EXPECT_EQ(u->job.events.at(0).message, "replica 1 started on node-a (pid 4242)");
  // Reported again, or for a run already running: nothing changes.
  EXPECT_FALSE(StartRun(job, "7.0.1", 1, kNow));
  EXPECT_FALSE(StartRun(job, "7.5.1", 1, kNow));
}

TEST(ApproveQuota, SetsOnlyTheValuesAskedFor) {
  model::Policy policy;
  model::QueuePolicy q;
  q.path = "vision/training";
  q.tenant = "vision";
  q.quota[model::ResourceKey{}].guaranteed = 4000;
  q.quota[model::ResourceKey{}].weight = 3;
  policy.queues.push_back(q);
  auto p = ApproveQuota(
      policy, 5, {9, "vision/training", "gpus", 8000, std::nullopt, std::nullopt, std::nullopt});
  ASSERT_TRUE(p);
  const auto& quota = p->queues[0].quota.at(model::ResourceKey{});
  EXPECT_EQ(quota.guaranteed, 8000);
  EXPECT_EQ(quota.weight, 3);
  auto gone = ApproveQuota(policy, 5, {9, "vision/nlp", "gpus", 1000, {}, {}, {}});
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, Code::kFailedPrecondition);
  EXPECT_NE(gone.error().message.find("which policy v5 no longer has"), std::string::npos);
  EXPECT_FALSE(ApproveQuota(policy, 5, {9, "vision/training", "bananas", 1, {}, {}, {}}));
}

TEST(StopCause, NamesRoundTrip) {
  for (auto c :
       {model::StopCause::kNone, model::StopCause::kCancelled, model::StopCause::kMaxRuntime,
        model::StopCause::kGang, model::StopCause::kPreempted, model::StopCause::kReclaimed,
        model::StopCause::kMoved, model::StopCause::kDrained, model::StopCause::kLost,
        model::StopCause::kFenced, model::StopCause::kGpuError, model::StopCause::kUnknown}) {
    EXPECT_EQ(model::ParseStopCause(model::StopCauseName(c)), c);
  }
  // The stored and wire names.
  EXPECT_EQ(model::StopCauseName(model::StopCause::kNone), "");
  EXPECT_EQ(model::StopCauseName(model::StopCause::kMaxRuntime), "max_runtime");
  EXPECT_EQ(model::StopCauseName(model::StopCause::kGpuError), "gpu_error");
  EXPECT_EQ(model::StopCauseName(model::StopCause::kUnknown), "unknown");
  EXPECT_FALSE(model::ParseStopCause("vanished"));
  EXPECT_FALSE(model::ParseStopCause("Preempted"));
  EXPECT_TRUE(model::IsEviction(model::StopCause::kMoved));
  EXPECT_FALSE(model::IsEviction(model::StopCause::kDrained));
}

}  // namespace
}  // namespace berth::control

namespace berth::control {
namespace {

// One running replica of a service, as its agent started it.
JobRecord ServiceReplica() {
  RunRecord r;
  r.run_id = "7.0.1";
  r.job_id = 7;
  r.attempt = 1;
  r.node = "node-a";
  r.state = RunState::kRunning;
  r.started_at_ms = kNow - 60'000;
  r.port = 41000;
  return Running({r});
}

TEST(RecordRunHealth, RecordsEachChangeOfVerdictOnceWithAnEvent) {
  JobRecord job = ServiceReplica();
  auto u = RecordRunHealth(job, "7.0.1", true, false, "GET /health: HTTP 200", kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.runs[0].ready, std::optional<bool>(true));
  EXPECT_EQ(u->job.runs[0].probe_detail, "GET /health: HTTP 200");
  EXPECT_EQ(u->job.runs[0].ready_changed_ms, kNow);
  ASSERT_EQ(u->events.size(), 1U);
  EXPECT_EQ(u->events[0].event, "Ready");
  EXPECT_EQ(u->events[0].message, "replica 0 on node-a is ready: GET /health: HTTP 200");
  // The same verdict again changes nothing.
  EXPECT_FALSE(RecordRunHealth(u->job, "7.0.1", true, false, "GET /health: HTTP 200", kNow + 1));
  // Not ready: a change, with its time.
  auto down = RecordRunHealth(u->job, "7.0.1", false, false, "GET /health: HTTP 503", kNow + 5);
  ASSERT_TRUE(down);
  EXPECT_EQ(down->job.runs[0].ready, std::optional<bool>(false));
  EXPECT_EQ(down->job.runs[0].ready_changed_ms, kNow + 5);
  EXPECT_EQ(down->events[0].event, "NotReady");
  // Unknown and exited runs: nothing.
  EXPECT_FALSE(RecordRunHealth(job, "7.9.1", true, false, "x", kNow));
  JobRecord ended = job;
  ended.runs[0].state = RunState::kExited;
  EXPECT_FALSE(RecordRunHealth(ended, "7.0.1", true, false, "x", kNow));
}

TEST(RecordRunHealth, AFailedLivenessIsTheReasonTheReplicaFails) {
  JobRecord job = ServiceReplica();
  const std::string why = "liveness failed 3 times in a row: GET /health: timed out after 1s";
  auto u = RecordRunHealth(job, "7.0.1", false, true, why, kNow);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->job.runs[0].stop_detail, why);
  EXPECT_EQ(u->events[0].event, "LivenessFailed");
  // The agent stops it (SIGTERM) and says why; the job fails for that.
  model::RunExit e;
  e.run_id = "7.0.1";
  e.signal = 15;
  e.started_at_ms = kNow - 60'000;
  e.ended_at_ms = kNow + 100;
  e.stopped_for = model::StopCause::kLiveness;
  auto x = RecordExit(u->job, e, kNow + 100);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->run.stopped_for, model::StopCause::kLiveness);
  EXPECT_EQ(x->job.job.state, JobState::kFailed);
  EXPECT_EQ(x->job.job.reason.code, ReasonCode::kLivenessFailed);
  EXPECT_EQ(x->job.job.reason.detail, why);
  EXPECT_EQ(x->job.job.signal, 15);
}

}  // namespace
}  // namespace berth::control
