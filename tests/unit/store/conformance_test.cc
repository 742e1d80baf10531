// The jobs-and-runs conformance suite: every backend of store::JobStore
// (SqliteStore, MemoryJobStore; PostgreSQL next) runs the same tests through
// the control layer's lifecycle, so a behaviour only one backend has is a
// failing test. A backend of every concern is added in backends.h; one of
// jobs only, here (JobBackends). Crash-style cases: a batch whose body fails
// midway leaves nothing behind; a kill -9 between a plan's evictions and
// placements is plan_crash_test.cc (SQLite, a forked store) and
// plan_atomicity_test.cc (a real berthd).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/lifecycle.h"
#include "control/transitions.h"
#include "model/policy.h"
#include "store/memory_store.h"
#include "unit/builders.h"
#include "unit/store/backends.h"

namespace berth::store {
namespace {

using model::JobState;
using model::RunState;

// The jobs-only backend: MemoryJobStore, over the default policy.
tests::Backend Memory() {
  auto* store = new MemoryJobStore(model::DefaultPolicy());  // NOLINT
  tests::Backend b;
  b.jobs = store;
  b.use_policy = [store](const std::string& yaml) {
    auto policy = model::ParsePolicy(yaml);
    ASSERT_TRUE(policy.has_value()) << policy.error().message;
    policy->version = 2;  // the version after the default one, as ApplyPolicy makes it
    store->set_policy(std::move(*policy));
  };
  b.close = [store] { delete store; };  // NOLINT(cppcoreguidelines-owning-memory)
  b.audit_records = [store] { return store->audit_records(); };
  return b;
}

std::vector<tests::NamedBackend> JobBackends() {
  auto backends = tests::StoreBackends();
  backends.push_back({"memory", Memory});
  return backends;
}

class JobStoreConformance : public tests::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(b_.jobs, nullptr);
    nodes_.push_back({tests::H100Node(8), model::NodeState::kReady, 0, {}, {}});
  }

  JobStore& store() { return *b_.jobs; }

  static model::JobSpec Spec(std::string name, std::uint32_t replicas = 1) {
    model::JobSpec s;
    s.name = std::move(name);
    s.command = {"true"};
    s.replicas = replicas;
    s.resources.gpus = 1;
    return s;
  }
  std::int64_t Submit(const model::JobSpec& spec, TimeMs at, std::string_view by = "alice") {
    auto id = store().CreateJob(spec, at, by);
    EXPECT_TRUE(id.has_value()) << id.error().message;
    return id.value_or(0);
  }
  // Places job `id` on n1, replica r on GPU `first_gpu + r`.
  void Place(std::int64_t id, std::uint32_t replicas, TimeMs at, std::uint32_t first_gpu = 0) {
    sched::Plan plan;
    sched::Placement p{id, {}};
    for (std::uint32_t r = 0; r < replicas; ++r) p.replicas.push_back({r, "n1", {first_gpu + r}});
    plan.placements.push_back(p);
    auto st = control::ApplyPlan(store(), plan, nodes_, 1, at);
    ASSERT_TRUE(st.has_value()) << st.error().message;
  }
  void StartAll(std::int64_t id, TimeMs at) {
    const model::JobRecord job = Job(id);
    for (const auto& r : job.runs) {
      if (r.state == RunState::kStarting) {
        ASSERT_TRUE(control::MarkRunStarted(store(), r.run_id, 42, at, at).has_value());
      }
    }
  }
  model::JobRecord Job(std::int64_t id) {
    auto job = store().GetJob(id);
    EXPECT_TRUE(job.has_value()) << job.error().message;
    return job.value_or(model::JobRecord{});
  }

  std::vector<NodeRecord> nodes_;
};

TEST_P(JobStoreConformance, ASubmissionIsPendingWithItsTimeline) {
  const std::int64_t id = Submit(Spec("train"), 1500);
  model::JobRecord job = Job(id);
  EXPECT_EQ(job.spec.name, "train");
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kQueued);
  EXPECT_EQ(job.submitted_at_ms, 1500);
  EXPECT_EQ(job.submitted_by, "alice");
  ASSERT_EQ(job.timeline.size(), 1U);
  EXPECT_EQ(job.timeline[0].event, "Submitted");
  EXPECT_EQ(job.timeline[0].message, "submitted to queue default/default");
  EXPECT_EQ(store().JobTenant(id).value(), "default");
  EXPECT_EQ(store().JobTenant(id + 100).error().code, Code::kNotFound);
  EXPECT_EQ(store().GetJob(id + 100).error().code, Code::kNotFound);
}

TEST_P(JobStoreConformance, AnUnknownQueueIsRefusedNamingTheFieldAndStoresNothing) {
  auto spec = Spec("x");
  spec.queue = "nlp";
  auto id = store().CreateJob(spec, 1500, "alice");
  ASSERT_FALSE(id.has_value());
  EXPECT_EQ(id.error().field, "queue");
  EXPECT_NE(id.error().message.find("queue default/nlp does not exist"), std::string::npos)
      << id.error().message;
  EXPECT_TRUE(store().ListJobs({})->empty());
}

TEST_P(JobStoreConformance, PendingLimitsCountTheTenantAndTheMember) {
  b_.use_policy(R"(queues:
  - name: default
    children:
      - name: default
tenants:
  default:
    limits: {pending_jobs: 3, pending_jobs_per_member: 2}
)");
  Submit(Spec("a"), 1500, "alice");
  Submit(Spec("b"), 1501, "alice");
  auto third = store().CreateJob(Spec("c"), 1502, "alice");
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.error().code, Code::kResourceExhausted);
  EXPECT_NE(third.error().message.find("pending_jobs_per_member"), std::string::npos);
  Submit(Spec("d"), 1503, "bob");
  auto fourth = store().CreateJob(Spec("e"), 1504, "bob");
  ASSERT_FALSE(fourth.has_value());
  EXPECT_NE(fourth.error().message.find("limit pending_jobs,"), std::string::npos)
      << fourth.error().message;
  auto counts = store().PendingCounts("default", "alice");
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->tenant, 3);
  EXPECT_EQ(counts->member, 2);
  EXPECT_EQ(store().ListJobs({})->size(), 3U);
}

// A change's audit record is committed in the change's own transaction:
// with the jobs it stored, with the cancel, and not at all when the change
// is refused or rolled back.
AuditEntry Record(std::string action, std::string object) {
  AuditEntry e;
  e.time_ms = 1500;
  e.actor = "alice";
  e.action = std::move(action);
  e.object = std::move(object);
  e.outcome = "ok";
  return e;
}

TEST_P(JobStoreConformance, ASubmissionCommitsItsAuditRecordWithItsJobs) {
  auto spec = Spec("sweep");
  spec.array = model::JobArray{};
  spec.array->count = 3;
  std::vector<std::int64_t> seen;
  auto ids = store().CreateJobs(spec, 1500, "alice", [&](const std::vector<std::int64_t>& made) {
    seen = made;
    return std::optional(Record("job.submit", fmt::format("array/{}", made.front())));
  });
  ASSERT_TRUE(ids.has_value()) << ids.error().message;
  EXPECT_EQ(seen, *ids);
  auto records = b_.audit_records();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].seq, 1);
  EXPECT_EQ(records[0].action, "job.submit");
  EXPECT_EQ(records[0].object, fmt::format("array/{}", ids->front()));

  // Refused (no such queue): no jobs, and the record is never made.
  auto lost = Spec("lost");
  lost.queue = "nowhere";
  bool made = false;
  auto refused = store().CreateJobs(lost, 1501, "alice", [&](const std::vector<std::int64_t>&) {
    made = true;
    return std::optional(Record("job.submit", "job/0"));
  });
  ASSERT_FALSE(refused.has_value());
  EXPECT_FALSE(made);
  EXPECT_EQ(b_.audit_records().size(), 1U);

  // A submission whose caller records nothing adds nothing.
  Submit(Spec("plain"), 1502);
  EXPECT_EQ(b_.audit_records().size(), 1U);
}

TEST_P(JobStoreConformance, ATransactionCommitsItsAuditRecordsOrNone) {
  const auto id = Submit(Spec("a"), 1500);
  auto failed = store().UpdateJobs([&](JobTransaction& tx) -> Status {
    tx.Record(Record("job.test", fmt::format("job/{}", id)));
    return Fail(Code::kFailedPrecondition, "changed its mind");
  });
  ASSERT_FALSE(failed.has_value());
  EXPECT_TRUE(b_.audit_records().empty()) << "a rolled-back transaction left its record";

  auto cancelled = control::CancelJob(
      store(), id, "bob", 1600, [](const model::JobRecord& was, const model::JobRecord& now) {
        auto e = Record("job.cancel", fmt::format("job/{}", was.id));
        e.before = model::JobStateName(was.state);
        e.after = model::JobStateName(now.state);
        return std::optional(e);
      });
  ASSERT_TRUE(cancelled.has_value()) << cancelled.error().message;
  auto records = b_.audit_records();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].object, fmt::format("job/{}", id));
  EXPECT_EQ(records[0].before, "Pending");
  EXPECT_EQ(records[0].after, "Cancelled");

  // Cancelling it again is refused (it is finished): no second record.
  auto again = control::CancelJob(store(), id, "bob", 1700,
                                  [](const model::JobRecord&, const model::JobRecord&) {
                                    return std::optional(Record("job.cancel", "again"));
                                  });
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(b_.audit_records().size(), 1U);
}

TEST_P(JobStoreConformance, TheLifecycleAnnouncesWhatItCommittedAndNothingElse) {
  ChangeFeed feed("t", 64);
  store().set_change_feed(&feed);
  const auto id = Submit(Spec("a", 2), 1500);
  Place(id, 2, 1600);
  // One placement writes the job once: one change, in its final state,
  // and its node's GPUs were taken.
  auto placed = feed.Since(0, 64);
  ASSERT_EQ(placed.changes.size(), 2U);
  EXPECT_EQ(placed.changes[0].topic, Topic::kJob);
  EXPECT_EQ(placed.changes[0].id, std::to_string(id));
  EXPECT_EQ(placed.changes[0].tenant, "default");
  EXPECT_EQ(placed.changes[0].state, "Scheduled");
  EXPECT_EQ(placed.changes[1].topic, Topic::kNode);
  EXPECT_EQ(placed.changes[1].id, "n1");
  EXPECT_EQ(placed.changes[1].state, "allocation");

  // Cancelling a pending job frees no GPUs; a refused cancel announces
  // nothing.
  const auto other = Submit(Spec("b"), 1700);
  ASSERT_TRUE(control::CancelJob(store(), other, "bob", 1800).has_value());
  EXPECT_EQ(feed.last(), 3U);
  EXPECT_EQ(feed.Since(2, 64).changes.at(0).state, "Cancelled");
  EXPECT_FALSE(control::CancelJob(store(), other, "bob", 1900).has_value());
  EXPECT_EQ(feed.last(), 3U);

  // The placed job's runs exiting free the node's GPUs again.
  auto job = store().GetJob(id);
  ASSERT_TRUE(job.has_value());
  for (const auto& r : job->runs) {
    ASSERT_TRUE(control::MarkRunStarted(store(), r.run_id, 100, 2000, 2000).has_value());
  }
  const auto before_exit = feed.last();
  for (const auto& r : job->runs) {
    model::RunExit e;
    e.run_id = r.run_id;
    e.exit_code = 0;
    e.ended_at_ms = 2100;
    ASSERT_TRUE(control::MarkRunExited(store(), e, 2100).has_value());
  }
  auto exits = feed.Since(before_exit, 64).changes;
  ASSERT_FALSE(exits.empty());
  EXPECT_EQ(exits.back().state, "allocation");
  EXPECT_EQ(exits.back().id, "n1");
  store().set_change_feed(nullptr);
}

TEST_P(JobStoreConformance, ACheckpointReportCommitsItsRecordWithTheRuns) {
  const auto id = Submit(Spec("ckpt", 2), 1500);
  auto record = [](const model::JobRecord& was, const int& runs) {
    auto e = Record("job.checkpoint", fmt::format("job/{}", was.id));
    e.after = std::to_string(runs);
    return std::optional(e);
  };
  // Pending: no run to record it, and no record.
  auto early = control::RecordJobCheckpoint(store(), id, 1600, record);
  ASSERT_FALSE(early.has_value());
  EXPECT_EQ(early.error().code, Code::kFailedPrecondition);
  EXPECT_NE(early.error().message.find("Pending"), std::string::npos) << early.error().message;
  EXPECT_TRUE(b_.audit_records().empty());

  Place(id, 2, 2000);
  auto done = control::RecordJobCheckpoint(store(), id, 2500, record);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ(*done, 2);
  // A later report wins, an earlier one changes nothing.
  ASSERT_TRUE(control::RecordJobCheckpoint(store(), id, 2400).has_value());
  for (const auto& r : Job(id).runs) EXPECT_EQ(r.last_checkpoint_ms, std::optional<TimeMs>(2500));
  auto records = b_.audit_records();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].object, fmt::format("job/{}", id));
  EXPECT_EQ(records[0].after, "2");
  EXPECT_EQ(control::RecordJobCheckpoint(store(), id + 100, 2500).error().code, Code::kNotFound);
}

TEST_P(JobStoreConformance, AnArrayIsContiguousAndCancelsAsOne) {
  auto spec = Spec("sweep");
  spec.array = model::JobArray{};
  spec.array->first = 0;
  spec.array->count = 3;
  auto ids = store().CreateJobs(spec, 1500, "alice");
  ASSERT_TRUE(ids.has_value()) << ids.error().message;
  ASSERT_EQ(ids->size(), 3U);
  EXPECT_EQ((*ids)[1], (*ids)[0] + 1);
  EXPECT_EQ((*ids)[2], (*ids)[0] + 2);
  model::JobRecord second = Job((*ids)[1]);
  ASSERT_TRUE(second.spec.array_element.has_value());
  EXPECT_EQ(second.spec.array_element->id, (*ids)[0]);
  EXPECT_EQ(second.spec.array_element->index, 1U);
  EXPECT_EQ(second.spec.array_element->size, 3U);
  JobFilter elements;
  elements.array_id = (*ids)[0];
  EXPECT_EQ(store().ListJobs(elements)->size(), 3U);

  Place((*ids)[2], 1, 2000);
  auto done = control::CancelArray(store(), (*ids)[0], "bob", 3000);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ(done->tenant, "default");
  EXPECT_EQ(done->cancelled, 2U);
  EXPECT_EQ(done->stopping, 1U);
  EXPECT_EQ(Job((*ids)[0]).state, JobState::kCancelled);
  EXPECT_TRUE(Job((*ids)[2]).cancel_requested);
  EXPECT_EQ(control::CancelArray(store(), (*ids)[0] + 100, "bob", 3000).error().code,
            Code::kNotFound);
}

TEST_P(JobStoreConformance, PendingJobsComeOldestFirstWithoutRuns) {
  const std::int64_t late = Submit(Spec("late"), 1700);
  const std::int64_t early = Submit(Spec("early"), 1600);
  const std::int64_t placed = Submit(Spec("placed"), 1500);
  Place(placed, 1, 2000);
  auto pending = store().PendingJobs();
  ASSERT_TRUE(pending.has_value());
  ASSERT_EQ(pending->size(), 2U);
  EXPECT_EQ((*pending)[0].id, early);
  EXPECT_EQ((*pending)[1].id, late);
  EXPECT_TRUE((*pending)[0].runs.empty());
}

// The pending set a pass reads follows every kind of change between two
// reads: a submission, an array, a placement, a cancel, a new reason, and a
// job that returns to the queue.
TEST_P(JobStoreConformance, PendingJobsFollowEveryChangeBetweenReads) {
  const std::int64_t a = Submit(Spec("a"), 1500);
  const std::int64_t b = Submit(Spec("b"), 1600);
  const std::int64_t c = Submit(Spec("c"), 1700);
  auto ids_of = [&] {
    std::vector<std::int64_t> ids;
    auto pending = store().PendingJobs();
    EXPECT_TRUE(pending.has_value());
    if (pending) {
      for (const auto& j : *pending) ids.push_back(j.id);
    }
    return ids;
  };
  EXPECT_EQ(ids_of(), (std::vector<std::int64_t>{a, b, c}));

  Place(a, 1, 2000);
  ASSERT_TRUE(control::CancelJob(store(), b, "alice", 2100).has_value());
  model::JobSpec sweep = Spec("sweep");
  sweep.array = model::JobArray{};
  sweep.array->count = 2;
  auto arr = store().CreateJobs(sweep, 1650, "alice");
  ASSERT_TRUE(arr.has_value()) << arr.error().message;
  sched::Plan why;
  why.pending.push_back({c, {model::ReasonCode::kNoNodeFits, {{"too_few_gpus", 1}}, ""}});
  ASSERT_TRUE(control::ApplyPlan(store(), why, nodes_, 1, 2200).has_value());
  EXPECT_EQ(ids_of(), (std::vector<std::int64_t>{(*arr)[0], (*arr)[1], c}));
  auto pending = store().PendingJobs();
  ASSERT_TRUE(pending.has_value());
  EXPECT_EQ(pending->back().reason.code, model::ReasonCode::kNoNodeFits);

  // The placed job is evicted and comes back to the queue after its run ends.
  StartAll(a, 2300);
  sched::Eviction e;
  e.job_id = a;
  e.by_job = c;
  e.by_queue = "default/default";
  e.cause = sched::EvictionCause::kPreempt;
  e.reason = {model::ReasonCode::kPreempted, {{"by_job", c}}, "default/default"};
  ASSERT_TRUE(control::EvictJobs(store(), {e}, 2400).has_value());
  ASSERT_TRUE(
      control::MarkRunExited(
          store(), {Job(a).runs[0].run_id, 0, 15, 2300, 2500, model::StopCause::kNone, ""}, 2500)
          .has_value());
  EXPECT_EQ(ids_of(), (std::vector<std::int64_t>{a, (*arr)[0], (*arr)[1], c}));
  pending = store().PendingJobs();
  ASSERT_TRUE(pending.has_value());
  EXPECT_EQ(pending->front().reason.code, model::ReasonCode::kPreempted);
}

TEST_P(JobStoreConformance, APlacedJobStartsRunsAndSucceedsOnce) {
  const std::int64_t id = Submit(Spec("gang", 2), 1500);
  Place(id, 2, 2000);
  model::JobRecord job = Job(id);
  EXPECT_EQ(job.state, JobState::kScheduled);
  EXPECT_EQ(job.policy_version, 1);
  EXPECT_EQ(job.attempts, 1U);
  ASSERT_EQ(job.runs.size(), 2U);
  EXPECT_EQ(job.runs[0].state, RunState::kStarting);
  EXPECT_EQ(job.runs[1].gpu_uuids, std::vector<std::string>{"uuid-1"});
  EXPECT_EQ(store().ActiveRuns()->size(), 2U);

  ASSERT_TRUE(control::MarkRunStarted(store(), job.runs[0].run_id, 7, 2100, 2100).has_value());
  ASSERT_TRUE(control::MarkRunStarted(store(), job.runs[0].run_id, 8, 2200, 2200).has_value());
  auto run = store().GetRun(job.runs[0].run_id);
  ASSERT_TRUE(run.has_value() && run->has_value());
  EXPECT_EQ((*run)->pid, 7);  // a repeated report changes nothing
  EXPECT_EQ((*run)->state, RunState::kRunning);
  EXPECT_EQ(Job(id).state, JobState::kRunning);
  ASSERT_TRUE(control::MarkRunStarted(store(), job.runs[1].run_id, 9, 2150, 2150).has_value());

  for (const auto& r : job.runs) {
    auto after = control::MarkRunExited(
        store(), {r.run_id, 0, 0, 2100, 5000, model::StopCause::kNone, ""}, 5000);
    ASSERT_TRUE(after.has_value()) << after.error().message;
  }
  job = Job(id);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.finished_at_ms, 5000);
  EXPECT_TRUE(store().ActiveRuns()->empty());
  const std::size_t events = job.timeline.size();
  // An exit re-sent after a reconnect is recorded once.
  auto again = control::MarkRunExited(
      store(), {job.runs[0].run_id, 0, 0, 2100, 6000, model::StopCause::kNone, ""}, 6000);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->state, JobState::kSucceeded);
  EXPECT_EQ(Job(id).timeline.size(), events);

  auto usage = store().FinishedRunsSince(4000);
  ASSERT_TRUE(usage.has_value());
  ASSERT_EQ(usage->size(), 2U);
  EXPECT_EQ((*usage)[0].mgpu, 1000);
  EXPECT_EQ((*usage)[0].tenant, "default");
  EXPECT_EQ((*usage)[0].finished_ms, 5000);
  EXPECT_TRUE(store().FinishedRunsSince(5001)->empty());
}

TEST_P(JobStoreConformance, AnUnknownRunIsNotFound) {
  EXPECT_EQ(control::MarkRunStarted(store(), "9.0.1", 1, 2000, 2000).error().code, Code::kNotFound);
  EXPECT_EQ(control::MarkRunExited(store(),
                                   {"9.0.1", 0, 0, 2000, 3000, model::StopCause::kNone, ""}, 3000)
                .error()
                .code,
            Code::kNotFound);
  EXPECT_EQ(store().RecordCheckpoint("9.0.1", 2500).error().code, Code::kNotFound);
  auto run = store().GetRun("9.0.1");
  ASSERT_TRUE(run.has_value());
  EXPECT_FALSE(run->has_value());
}

TEST_P(JobStoreConformance, AnEvictedJobReturnsToPendingAndRestartsAsANewAttempt) {
  const std::int64_t victim = Submit(Spec("victim"), 1500);
  const std::int64_t by = Submit(Spec("by"), 1600);
  Place(victim, 1, 2000);
  StartAll(victim, 2100);
  ASSERT_TRUE(store().RecordCheckpoint(Job(victim).runs[0].run_id, 2300).has_value());
  sched::Eviction e;
  e.job_id = victim;
  e.by_job = by;
  e.by_queue = "default/default";
  e.cause = sched::EvictionCause::kPreempt;
  e.reason = {model::ReasonCode::kPreempted, {{"by_job", by}}, "default/default"};
  ASSERT_TRUE(control::EvictJobs(store(), {e}, 2500).has_value());
  model::JobRecord job = Job(victim);
  EXPECT_EQ(job.state, JobState::kRunning);  // until its run has exited
  EXPECT_TRUE(job.runs[0].stop_requested);
  EXPECT_EQ(job.runs[0].stopped_for, model::StopCause::kPreempted);

  ASSERT_TRUE(
      control::MarkRunExited(
          store(), {job.runs[0].run_id, 0, 15, 2100, 2600, model::StopCause::kNone, ""}, 2600)
          .has_value());
  job = Job(victim);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kPreempted);
  EXPECT_EQ(job.runs[0].stopped_for, model::StopCause::kPreempted);
  EXPECT_EQ(job.runs[0].last_checkpoint_ms, 2300);
  EXPECT_EQ(job.failures, 0U);

  Place(victim, 1, 3000, 3);
  job = Job(victim);
  EXPECT_EQ(job.attempts, 2U);
  ASSERT_EQ(job.runs.size(), 2U);
  EXPECT_EQ(job.runs[1].attempt, 2U);
  EXPECT_EQ(job.runs[1].gpu_indices, std::vector<std::uint32_t>{3});
}

TEST_P(JobStoreConformance, CancelStopsAtOnceWhenPendingAndThroughItsRunsWhenRunning) {
  const std::int64_t pending = Submit(Spec("p"), 1500);
  const std::int64_t running = Submit(Spec("r"), 1500);
  Place(running, 1, 2000);
  StartAll(running, 2100);

  auto c = control::CancelJob(store(), pending, "alice", 2200);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->state, JobState::kCancelled);
  EXPECT_EQ(control::CancelJob(store(), pending, "alice", 2300).error().code,
            Code::kFailedPrecondition);
  EXPECT_EQ(control::CancelJob(store(), running + 100, "alice", 2300).error().code,
            Code::kNotFound);

  auto r = control::CancelJob(store(), running, "bob", 2400);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->state, JobState::kRunning);
  EXPECT_TRUE(r->cancel_requested);
  EXPECT_EQ(r->cancelled_by, "bob");
  EXPECT_EQ(r->runs[0].stopped_for, model::StopCause::kCancelled);
  ASSERT_TRUE(
      control::MarkRunExited(
          store(), {r->runs[0].run_id, 0, 15, 2100, 2600, model::StopCause::kNone, ""}, 2600)
          .has_value());
  EXPECT_EQ(Job(running).state, JobState::kCancelled);
}

TEST_P(JobStoreConformance, AGpuErrorStopsItsHolderAndADrainRequeuesWithoutAFailure) {
  const std::int64_t on0 = Submit(Spec("on0"), 1500);
  const std::int64_t on1 = Submit(Spec("on1"), 1500);
  Place(on0, 1, 2000, 0);
  Place(on1, 1, 2000, 1);
  StartAll(on0, 2100);
  StartAll(on1, 2100);

  auto hit = control::StopRunsOnGpu(store(), "n1", 1, "Xid 79", 2500);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, std::vector<std::int64_t>{on1});
  model::JobRecord job = Job(on1);
  EXPECT_EQ(job.runs[0].stopped_for, model::StopCause::kGpuError);
  EXPECT_EQ(job.runs[0].failure_class, "gpu_hardware");
  EXPECT_EQ(job.runs[0].stop_detail, "Xid 79");
  EXPECT_FALSE(Job(on0).runs[0].stop_requested);

  auto drained = control::StopRunsOnNode(store(), "n1", 2600);
  ASSERT_TRUE(drained.has_value());
  EXPECT_EQ(*drained, std::vector<std::int64_t>{on0});  // on1 is stopping already
  ASSERT_TRUE(
      control::MarkRunExited(
          store(), {Job(on0).runs[0].run_id, 0, 15, 2100, 2700, model::StopCause::kNone, ""}, 2700)
          .has_value());
  job = Job(on0);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.failures, 0U);
  EXPECT_TRUE(control::StopRunsOnNode(store(), "n2", 2800)->empty());
}

TEST_P(JobStoreConformance, ARetryableFailureRequeuesWithBackoff) {
  auto spec = Spec("flaky");
  spec.retry.max_attempts = 2;
  spec.retry.backoff_ms = 5'000;
  spec.retry.on = {"communication"};
  const std::int64_t id = Submit(spec, 1500);
  Place(id, 1, 2000);
  model::RunExit exit{Job(id).runs[0].run_id, 1, 0, 2100, 3000, model::StopCause::kNone, ""};
  exit.failure_class = "communication";
  ASSERT_TRUE(control::MarkRunExited(store(), exit, 3000).has_value());
  model::JobRecord job = Job(id);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kRetrying);
  EXPECT_EQ(job.retry_after_ms, 8'000);
  EXPECT_EQ(job.failures, 1U);
}

TEST_P(JobStoreConformance, ACheckpointReportKeepsTheNewest) {
  const std::int64_t id = Submit(Spec("ck"), 1500);
  Place(id, 1, 2000);
  const std::string run = Job(id).runs[0].run_id;
  ASSERT_TRUE(store().RecordCheckpoint(run, 3000).has_value());
  ASSERT_TRUE(store().RecordCheckpoint(run, 2500).has_value());
  EXPECT_EQ(store().GetRun(run).value()->last_checkpoint_ms, 3000);
}

TEST_P(JobStoreConformance, TheJobListIsNewestFirstPagedAndScoped) {
  b_.use_policy(R"(queues:
  - name: default
    children:
      - name: default
  - name: vision
    children:
      - name: training
)");
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Submit(Spec(fmt::format("d{}", i)), 1500 + i));
  auto vision = Spec("v");
  vision.tenant = "vision";
  vision.queue = "training";
  const std::int64_t v = Submit(vision, 1600);

  JobFilter page;
  page.limit = 2;
  auto first = store().ListJobs(page);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->size(), 2U);
  EXPECT_EQ((*first)[0].id, v);
  EXPECT_EQ((*first)[1].id, ids[4]);
  page.after_id = (*first)[1].id;
  auto second = store().ListJobs(page);
  ASSERT_EQ(second->size(), 2U);
  EXPECT_EQ((*second)[0].id, ids[3]);

  JobFilter scoped;
  scoped.tenants = model::TenantScope::Of({"vision"});
  auto only = store().ListJobs(scoped);
  ASSERT_EQ(only->size(), 1U);
  EXPECT_EQ((*only)[0].id, v);
  scoped.tenants = model::TenantScope::Of({});
  EXPECT_TRUE(store().ListJobs(scoped)->empty());

  Place(ids[0], 1, 2000);
  JobFilter states;
  states.states = {JobState::kScheduled};
  auto scheduled = store().ListJobs(states);
  ASSERT_EQ(scheduled->size(), 1U);
  EXPECT_EQ((*scheduled)[0].runs.size(), 1U);
  states.with_runs = false;
  EXPECT_TRUE(store().ListJobs(states)->front().runs.empty());
}

TEST_P(JobStoreConformance, HistoryAndReportWindowsSelectBySubmitAndFinish) {
  const std::int64_t a = Submit(Spec("a"), 1000);
  const std::int64_t b = Submit(Spec("b"), 2000);
  const std::int64_t c = Submit(Spec("c"), 3000);
  ASSERT_TRUE(control::CancelJob(store(), a, "alice", 1500).has_value());  // finished at 1500

  auto between = store().JobsSubmittedBetween(1000, 3000);
  ASSERT_TRUE(between.has_value());
  ASSERT_EQ(between->size(), 2U);
  EXPECT_EQ((*between)[0].id, a);
  EXPECT_EQ((*between)[1].id, b);

  auto window = store().JobsForWindow(1600, 4000, model::TenantScope::All(), 10);
  ASSERT_TRUE(window.has_value());
  ASSERT_EQ(window->size(), 2U);  // a finished before the window
  EXPECT_EQ((*window)[0].id, b);
  EXPECT_EQ((*window)[1].id, c);
  EXPECT_EQ(store().JobsForWindow(0, 4000, model::TenantScope::All(), 2)->size(), 2U);
  EXPECT_TRUE(store().JobsForWindow(0, 4000, model::TenantScope::Of({"vision"}), 10)->empty());
}

TEST_P(JobStoreConformance, ABatchThatFailsMidwayLeavesNothing) {
  const std::int64_t victim = Submit(Spec("victim"), 1500);
  const std::int64_t waiting = Submit(Spec("waiting"), 1600);
  Place(victim, 1, 2000);
  StartAll(victim, 2100);
  sched::Eviction e;
  e.job_id = victim;
  e.by_job = waiting;
  e.cause = sched::EvictionCause::kReclaim;
  e.reason = {model::ReasonCode::kReclaimed, {{"by_job", waiting}}, "default/default"};
  // The evictions of a plan are written, then the batch fails before its
  // placements: none of it may remain.
  auto st = store().UpdateJobs([&](JobTransaction& tx) -> Status {
    auto job = tx.Load(victim);
    if (!job || !*job) return Fail(Code::kInternal, "victim not loaded");
    auto update = control::EvictJob(**job, e, nullptr, 2500);
    if (!update) return Fail(Code::kInternal, "nothing to evict");
    BERTH_RETURN_IF_ERROR(tx.Write(update->victim));
    BERTH_RETURN_IF_ERROR(tx.SetPendingReason(waiting, {model::ReasonCode::kNoNodeFits, {}, {}}));
    auto seen = tx.Load(victim);  // the transaction sees its own write
    if (!seen || !*seen || !(*seen)->runs[0].stop_requested) {
      return Fail(Code::kInternal, "the write is not visible in its transaction");
    }
    return Fail(Code::kUnavailable, "the batch fails before its placements");
  });
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, Code::kUnavailable);
  model::JobRecord job = Job(victim);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_FALSE(job.runs[0].stop_requested);
  EXPECT_EQ(job.runs[0].stopped_for, model::StopCause::kNone);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kRunning);
  EXPECT_EQ(Job(waiting).reason.code, model::ReasonCode::kQueued);

  // The same plan applied whole lands whole: the eviction, and the reason.
  sched::Plan plan;
  plan.evictions.push_back(e);
  plan.pending.push_back({waiting, {model::ReasonCode::kNoNodeFits, {}, {}}});
  ASSERT_TRUE(control::ApplyPlan(store(), plan, nodes_, 1, 2600).has_value());
  EXPECT_TRUE(Job(victim).runs[0].stop_requested);
  EXPECT_EQ(Job(waiting).reason.code, model::ReasonCode::kNoNodeFits);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreConformance, ::testing::ValuesIn(JobBackends()),
                         tests::BackendName);

}  // namespace
}  // namespace berth::store
