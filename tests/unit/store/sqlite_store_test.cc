#include "store/sqlite_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "control/lifecycle.h"
#include "store/meter_store.h"
#include "store/sqlite_db.h"
#include "unit/builders.h"
#include "unit/store/policies.h"

namespace berth::store {
namespace {

using tests::kDefaultOnly;
using tests::kVisionPolicy;

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto s = SqliteStore::Open(dir_, 1000);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
  }
  model::JobSpec Spec(std::string name, std::uint32_t replicas = 1, std::uint32_t gpus = 1) {
    model::JobSpec s;
    s.name = std::move(name);
    s.command = {"true"};
    s.replicas = replicas;
    s.resources.gpus = gpus;
    return s;
  }
  model::NodeInfo NodeWith(std::uint32_t gpus) { return tests::H100Node(gpus); }
  // Places job `id` on n1 with one GPU per replica, replica r on GPU r.
  void Place(std::int64_t id, std::uint32_t replicas, std::int64_t policy_version = 1) {
    sched::Plan plan;
    sched::Placement p{id, {}};
    for (std::uint32_t r = 0; r < replicas; ++r) p.replicas.push_back({r, "n1", {r}});
    plan.placements.push_back(p);
    ASSERT_TRUE(store_->UpsertNode(NodeWith(8), 1000).has_value());
    auto nodes = store_->ListNodes();
    ASSERT_TRUE(control::ApplyPlan(*store_, plan, *nodes, policy_version, 2000).has_value());
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreTest, JobsSurviveReopen) {
  auto id = store_->CreateJob(Spec("a"), 1500);
  ASSERT_TRUE(id.has_value());
  Reopen();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->spec.name, "a");
  EXPECT_EQ(job->state, model::JobState::kPending);
  ASSERT_EQ(job->timeline.size(), 1U);
  EXPECT_EQ(job->timeline[0].event, "Submitted");
}

TEST_F(SqliteStoreTest, LifecycleToSuccessRecordsTimeline) {
  auto id = *store_->CreateJob(Spec("a", 2), 1500);
  Place(id, 2);
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kScheduled);
  ASSERT_EQ(job.runs.size(), 2U);
  EXPECT_EQ(job.runs[1].gpu_uuids, (std::vector<std::string>{"uuid-1"}));
  for (const auto& r : job.runs) {
    ASSERT_TRUE(
        control::MarkRunStarted(*store_, r.run_id, 100 + r.replica, 2100, 2100).has_value());
  }
  EXPECT_EQ(store_->GetJob(id)->state, model::JobState::kRunning);
  for (const auto& r : job.runs) {
    RunExit e;
    e.run_id = r.run_id;
    e.ended_at_ms = 3000;
    ASSERT_TRUE(control::MarkRunExited(*store_, e, 3000).has_value());
  }
  job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kSucceeded);
  EXPECT_EQ(job.exit_code, 0);
  std::vector<std::string> events;
  for (const auto& e : job.timeline) events.push_back(e.event);
  EXPECT_EQ(events, (std::vector<std::string>{"Submitted", "Scheduled", "Started", "Started",
                                              "Exited", "Exited", "Succeeded"}));
}

TEST_F(SqliteStoreTest, ExitIsIdempotent) {
  auto id = *store_->CreateJob(Spec("a"), 1500);
  Place(id, 1);
  auto run = store_->GetJob(id)->runs[0];
  RunExit e{run.run_id, 3, 0, 2100, 3000, model::StopCause::kNone, ""};
  ASSERT_TRUE(control::MarkRunExited(*store_, e, 3000).has_value());
  ASSERT_TRUE(control::MarkRunExited(*store_, e, 4000).has_value());  // re-sent after a reconnect
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kFailed);
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_EQ(job.signal, std::nullopt);  // it exited; nothing killed it
  EXPECT_EQ(job.runs[0].signal, std::nullopt);
  EXPECT_EQ(job.finished_at_ms, 3000);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kFailedExitCode);
}

TEST_F(SqliteStoreTest, KilledReplicaHasASignalAndNoExitCode) {
  auto id = *store_->CreateJob(Spec("a"), 1500);
  Place(id, 1);
  auto run = store_->GetJob(id)->runs[0];
  ASSERT_TRUE(control::MarkRunExited(
                  *store_, {run.run_id, 0, 9, 2100, 3000, model::StopCause::kNone, ""}, 3000)
                  .has_value());
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kFailed);
  EXPECT_EQ(job.runs[0].signal, 9);
  EXPECT_EQ(job.runs[0].exit_code, std::nullopt);
  EXPECT_EQ(job.signal, 9);
  EXPECT_EQ(job.exit_code, std::nullopt);
}

TEST_F(SqliteStoreTest, FailedReplicaStopsTheRestOfTheGang) {
  auto id = *store_->CreateJob(Spec("a", 2), 1500);
  Place(id, 2);
  auto runs = store_->GetJob(id)->runs;
  ASSERT_TRUE(control::MarkRunExited(
                  *store_, {runs[0].run_id, 1, 0, 2100, 3000, model::StopCause::kNone, ""}, 3000)
                  .has_value());
  auto active = *store_->ActiveRuns();
  ASSERT_EQ(active.size(), 1U);
  EXPECT_TRUE(active[0].stop_requested);
  EXPECT_EQ(active[0].stopped_for, model::StopCause::kGang);
  // The stopped peer's SIGTERM exit does not hide the real cause.
  ASSERT_TRUE(control::MarkRunExited(
                  *store_, {runs[1].run_id, 0, 15, 2100, 3100, model::StopCause::kNone, ""}, 3100)
                  .has_value());
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kFailed);
  EXPECT_EQ(job.reason.counts.at("replica"), 0);
  EXPECT_EQ(job.exit_code, 1);
}

// A run that exited with `cls` (its failure class as berthd read it).
RunExit FailedExit(const RunRecord& run, std::string cls, TimeMs at) {
  RunExit e{run.run_id, 1, 0, at - 100, at, model::StopCause::kNone, ""};
  e.failure_class = std::move(cls);
  return e;
}

TEST_F(SqliteStoreTest, ARetryableFailureRequeuesWithDoublingBackoffUntilAttemptsRunOut) {
  auto spec = Spec("a");
  spec.retry.max_attempts = 3;
  spec.retry.backoff_ms = 5'000;
  spec.retry.on = {"communication"};
  auto id = *store_->CreateJob(spec, 1500);
  Place(id, 1);
  ASSERT_TRUE(control::MarkRunExited(
      *store_, FailedExit(store_->GetJob(id)->runs[0], "communication", 3000), 3000));
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kPending);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kRetrying);
  EXPECT_EQ(job.reason.counts.at("failures"), 1);
  EXPECT_EQ(job.reason.counts.at("backoff_s"), 5);
  EXPECT_EQ(job.retry_after_ms, 8'000);
  EXPECT_EQ(job.failures, 1U);
  EXPECT_EQ(job.reason.detail.rfind("communication: ", 0), 0U) << job.reason.detail;

  Place(id, 1);  // attempt 2: placing clears the backoff
  job = *store_->GetJob(id);
  EXPECT_EQ(job.retry_after_ms, std::nullopt);
  ASSERT_TRUE(control::MarkRunExited(*store_, FailedExit(job.runs.back(), "communication", 20'000),
                                     20'000));
  job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kPending);
  EXPECT_EQ(job.retry_after_ms, 30'000);  // doubled: 10 s

  Place(id, 1);  // attempt 3 is the last the policy allows
  job = *store_->GetJob(id);
  ASSERT_TRUE(control::MarkRunExited(*store_, FailedExit(job.runs.back(), "communication", 40'000),
                                     40'000));
  job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kFailed);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kFailedExitCode);
  EXPECT_EQ(job.reason.counts.at("attempts"), 3);
  EXPECT_EQ(job.reason.counts.at("retries_exhausted"), 1);
  EXPECT_EQ(job.failures, 3U);
  EXPECT_NE(model::RenderReason(job.reason).find("after 3 attempts"), std::string::npos);
}

TEST_F(SqliteStoreTest, AFailureItsPolicyDoesNotNameIsFinal) {
  auto id = *store_->CreateJob(Spec("a"), 1500);  // default: node_lost, gpu_hardware
  Place(id, 1);
  ASSERT_TRUE(control::MarkRunExited(
      *store_, FailedExit(store_->GetJob(id)->runs[0], "gpu_out_of_memory", 3000), 3000));
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kFailed);
  EXPECT_EQ(job.reason.counts.at("retry_class_excluded"), 1);
  EXPECT_EQ(job.failures, 1U);
}

TEST_F(SqliteStoreTest, AFailedGpuStopsItsGangAndRetriesByDefault) {
  auto id = *store_->CreateJob(Spec("a", 2), 1500);
  Place(id, 2);  // replica r on GPU r
  auto other = *store_->CreateJob(Spec("b"), 1500);
  sched::Plan plan;
  sched::Placement p{other, {}};
  p.replicas.push_back({0, "n1", {5}});
  plan.placements.push_back(p);
  ASSERT_TRUE(control::ApplyPlan(*store_, plan, *store_->ListNodes(), 1, 2000));

  auto jobs = control::StopRunsOnGpu(*store_, "n1", 1, "GPU 1 (uuid-1) on node n1: Xid 79", 2500);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  EXPECT_EQ(*jobs, (std::vector<std::int64_t>{id}));
  std::map<std::string, std::string> stopped;
  auto active = *store_->ActiveRuns();
  for (const auto& r : active)
    stopped[r.run_id] = r.stop_requested ? model::StopCauseName(r.stopped_for) : "";
  auto runs = store_->GetJob(id)->runs;
  EXPECT_EQ(stopped[runs[1].run_id], "gpu_error");
  EXPECT_EQ(stopped[runs[0].run_id], "gang");
  auto other_runs = store_->GetJob(other)->runs;
  ASSERT_EQ(other_runs.size(), 1U);
  EXPECT_EQ(stopped[other_runs[0].run_id], "");  // not on that GPU

  ASSERT_TRUE(control::MarkRunExited(
      *store_, {runs[1].run_id, 0, 15, 2100, 2600, model::StopCause::kGpuError, ""}, 2600));
  ASSERT_TRUE(control::MarkRunExited(
      *store_, {runs[0].run_id, 0, 15, 2100, 2700, model::StopCause::kGang, ""}, 2700));
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kPending);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kRetrying);
  EXPECT_EQ(job.reason.detail.rfind("gpu_hardware: ", 0), 0U) << job.reason.detail;
  EXPECT_NE(job.reason.detail.find("Xid 79"), std::string::npos) << job.reason.detail;
}

TEST(CordonKind, NamesRoundTripAndAnUnknownNameIsNone) {
  for (auto k : {model::CordonKind::kCordon, model::CordonKind::kDrain}) {
    EXPECT_EQ(model::ParseCordonKind(model::CordonKindName(k)), k);
  }
  EXPECT_EQ(model::CordonKindName(model::CordonKind::kCordon), "cordon");
  EXPECT_EQ(model::CordonKindName(model::CordonKind::kDrain), "drain");
  EXPECT_FALSE(model::ParseCordonKind("quarantine"));
  EXPECT_FALSE(model::ParseCordonKind(""));
}

// A cordon, a GPU's cordon and an open alert are kept on disk (what they
// mean: node_conformance_test.cc).
TEST_F(SqliteStoreTest, CordonsAndAlertsSurviveReopen) {
  ASSERT_TRUE(store_->UpsertNode(NodeWith(4), 1000));
  ASSERT_TRUE(
      store_->SetCordon("n1", 2, {model::CordonKind::kCordon, "Xid 48", "berth", true, 0}, 2000));
  ASSERT_TRUE(store_->SetCordon("n1", std::nullopt,
                                {model::CordonKind::kDrain, "reboot", "ops", false, 0}, 2100));
  Alert alert;
  alert.kind = model::AlertKind::kGpuHardware;
  alert.node = "n1";
  alert.gpu = 2;
  alert.raised_ms = 2000;
  ASSERT_TRUE(store_->RaiseAlert(alert));
  Reopen();
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 1U);
  const NodeRecord& n = nodes->front();
  ASSERT_TRUE(n.cordon.has_value());
  EXPECT_EQ(n.cordon->kind, model::CordonKind::kDrain);
  EXPECT_EQ(n.cordon->reason, "reboot");
  EXPECT_EQ(n.cordon->at_ms, 2100);
  ASSERT_TRUE(n.gpu_cordons.contains(2));
  EXPECT_EQ(n.gpu_cordons.at(2).by, "berth");
  EXPECT_TRUE(n.gpu_cordons.at(2).automatic);
  auto open = store_->ListAlerts(true);
  ASSERT_TRUE(open.has_value()) << open.error().message;
  ASSERT_EQ(open->size(), 1U);
  EXPECT_EQ(open->front().gpu, 2U);
}

TEST_F(SqliteStoreTest, CancelPendingIsImmediateAndRunningWaitsForExit) {
  auto pending = *store_->CreateJob(Spec("p"), 1500);
  auto c = control::CancelJob(*store_, pending, "alice", 1600);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->state, model::JobState::kCancelled);
  EXPECT_EQ(control::CancelJob(*store_, pending, "alice", 1700).error().code,
            Code::kFailedPrecondition);

  auto running = *store_->CreateJob(Spec("r"), 1500);
  Place(running, 1);
  auto after = *control::CancelJob(*store_, running, "bob", 2500);
  EXPECT_EQ(after.state, model::JobState::kScheduled);
  EXPECT_TRUE(after.cancel_requested);
  EXPECT_TRUE(store_->ActiveRuns()->at(0).stop_requested);
  auto run = after.runs[0];
  ASSERT_TRUE(control::MarkRunExited(
      *store_, {run.run_id, 0, 15, 2100, 2600, model::StopCause::kCancelled, ""}, 2600));
  auto job = *store_->GetJob(running);
  EXPECT_EQ(job.state, model::JobState::kCancelled);
  EXPECT_EQ(job.reason.detail, "bob");
}

TEST_F(SqliteStoreTest, PlacementOfACancelledJobIsDropped) {
  auto id = *store_->CreateJob(Spec("a"), 1500);
  ASSERT_TRUE(control::CancelJob(*store_, id, "x", 1600).has_value());
  Place(id, 1);
  EXPECT_TRUE(store_->ActiveRuns()->empty());
  EXPECT_EQ(store_->GetJob(id)->state, model::JobState::kCancelled);
}

TEST_F(SqliteStoreTest, PendingReasonIsStored) {
  auto id = *store_->CreateJob(Spec("a"), 1500);
  sched::Plan plan;
  plan.pending.push_back({id, {model::ReasonCode::kNoNodeFits, {{"nodes", 3}}, {}}});
  ASSERT_TRUE(control::ApplyPlan(*store_, plan, {}, 1, 2000).has_value());
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kNoNodeFits);
  EXPECT_EQ(job.reason.counts.at("nodes"), 3);
}

TEST_F(SqliteStoreTest, NodesKeepStateAcrossReopen) {
  ASSERT_TRUE(store_->UpsertNode(NodeWith(2), 1000).has_value());
  ASSERT_TRUE(store_->SetNodeState("n1", model::NodeState::kNotReady, 2000).has_value());
  Reopen();
  auto nodes = *store_->ListNodes();
  ASSERT_EQ(nodes.size(), 1U);
  EXPECT_EQ(nodes[0].state, model::NodeState::kNotReady);
  EXPECT_EQ(nodes[0].info.gpus.size(), 2U);
  EXPECT_EQ(nodes[0].state_changed_ms, 2000);
}

// --- policy ---

// Opening a store again does not add the default policy again (what a fresh
// store's version 1 is: policy_conformance_test.cc).
TEST_F(SqliteStoreTest, OpeningAgainAddsNoPolicyVersion) {
  Reopen();
  EXPECT_EQ(store_->ListPolicyVersions()->size(), 1U);
}

TEST_F(SqliteStoreTest, PolicySurvivesReopen) {
  ASSERT_TRUE(store_->ApplyPolicy(kVisionPolicy, "alice", "vision team", 2000).has_value());
  Reopen();
  auto active = store_->ActivePolicy();
  ASSERT_TRUE(active.has_value());
  EXPECT_EQ(active->version, 2);
  EXPECT_EQ(active->yaml, kVisionPolicy);
  EXPECT_EQ(active->applied_ms, 2000);
  EXPECT_EQ(active->comment, "vision team");
  EXPECT_TRUE(store_->QueueExists("vision", "training/nlp").value());
  EXPECT_EQ(store_->ListPolicyVersions()->size(), 2U);
}

TEST_F(SqliteStoreTest, SchedulingRecordsThePolicyVersion) {
  ASSERT_TRUE(store_->ApplyPolicy(kVisionPolicy, "alice", "", 1200).has_value());
  auto id = *store_->CreateJob(Spec("a"), 1500);
  EXPECT_FALSE(store_->GetJob(id)->policy_version.has_value());
  Place(id, 1, 2);
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.policy_version, 2);
  ASSERT_EQ(job.timeline.size(), 2U);
  EXPECT_EQ(job.timeline[1].event, "Scheduled");
  EXPECT_EQ(job.timeline[1].policy_version, 2);
  EXPECT_NE(job.timeline[1].message.find("policy v2"), std::string::npos);
  EXPECT_FALSE(job.timeline[0].policy_version.has_value());
  Reopen();
  EXPECT_EQ(store_->ListJobs({})->at(0).policy_version, 2);
}

// A schema-1 database (tenants and queues tables, no policy) is migrated: its
// queues become policy version 1 and its jobs are kept.
TEST_F(SqliteStoreTest, MigratesASchemaOneDatabase) {
  store_.reset();
  std::filesystem::remove_all(dir_ / "berth.db");
  std::filesystem::remove_all(dir_ / "berth.db-wal");
  std::filesystem::remove_all(dir_ / "berth.db-shm");
  {
    auto db = Database::Open((dir_ / "berth.db").string());
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(db->Exec(R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES('schema_version', '1');
CREATE TABLE tenants(name TEXT PRIMARY KEY, created_ms INTEGER NOT NULL);
CREATE TABLE queues(tenant TEXT NOT NULL REFERENCES tenants(name), name TEXT NOT NULL,
  created_ms INTEGER NOT NULL, PRIMARY KEY(tenant, name));
INSERT INTO tenants VALUES('default', 1), ('vision', 1);
INSERT INTO queues VALUES('default', 'default', 1), ('vision', 'training', 1);
CREATE TABLE jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL, tenant TEXT NOT NULL, queue TEXT NOT NULL,
  spec TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '{}',
  submitted_ms INTEGER NOT NULL, started_ms INTEGER, finished_ms INTEGER,
  exit_code INTEGER, signal INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0, cancelled_by TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0);
CREATE TABLE job_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL REFERENCES jobs(id),
  time_ms INTEGER NOT NULL, state TEXT NOT NULL, event TEXT NOT NULL, message TEXT NOT NULL);
INSERT INTO jobs(name, tenant, queue, spec, state, submitted_ms) VALUES('old', 'vision',
  'training', '{"name":"old","tenant":"vision","queue":"training","command":["true"]}',
  'Pending', 500);
INSERT INTO job_events(job_id, time_ms, state, event, message) VALUES(1, 500, 'Pending',
  'Submitted', 'submitted to queue vision/training');
)sql")
                    .has_value());
  }
  Reopen();
  auto active = store_->ActivePolicy();
  ASSERT_TRUE(active.has_value()) << active.error().message;
  EXPECT_EQ(active->version, 1);
  EXPECT_NE(active->policy.FindQueue("default/default"), nullptr);
  EXPECT_NE(active->policy.FindQueue("vision/training"), nullptr);
  auto job = store_->GetJob(1);
  ASSERT_TRUE(job.has_value()) << job.error().message;
  EXPECT_EQ(job->spec.queue, "training");
  EXPECT_FALSE(job->policy_version.has_value());
  // The migrated queue is guarded like any other.
  EXPECT_EQ(store_->ApplyPolicy(kDefaultOnly, "x", "", 2000).error().field, "queues");
  Reopen();
  EXPECT_EQ(store_->ListPolicyVersions()->size(), 1U);
}

// A slice job's runs record their slice of the card (model::SliceOf), and
// keep it across a reopen.
TEST_F(SqliteStoreTest, SliceRunsRecordTheirShare) {
  model::JobSpec spec = Spec("shared", 2, 0);
  spec.resources.gpu_share_bytes = 20ULL << 30;
  auto id = store_->CreateJob(spec, 1500);
  ASSERT_TRUE(id.has_value());
  sched::Plan plan;
  plan.placements.push_back({*id, {{0, "n1", {3}}, {1, "n1", {3}}}});
  ASSERT_TRUE(store_->UpsertNode(NodeWith(8), 1000).has_value());
  ASSERT_TRUE(control::ApplyPlan(*store_, plan, *store_->ListNodes(), 1, 2000).has_value());
  Reopen();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.has_value());
  ASSERT_EQ(job->runs.size(), 2U);
  for (const auto& r : job->runs) {
    EXPECT_EQ(r.gpu_indices, std::vector<std::uint32_t>{3});
    EXPECT_EQ(r.gpu_uuids, std::vector<std::string>{"uuid-3"});
    EXPECT_EQ(r.gpu_share_millis, 250U);
    EXPECT_EQ(r.gpu_share_bytes, 20ULL << 30);
  }
  EXPECT_NE(job->timeline.back().message.find("250 mGPU, 20Gi"), std::string::npos)
      << job->timeline.back().message;
  auto active = store_->ActiveRuns();
  ASSERT_TRUE(active.has_value());
  ASSERT_EQ(active->size(), 2U);
  EXPECT_EQ(active->front().gpu_share_millis, 250U);
}

// The names are what is stored; one a newer Berth wrote (a downgrade) reads
// as kUnknown, shown as "unknown" (a cordon's as a plain cordon), and a read
// never fails on it.
TEST_F(SqliteStoreTest, NamesANewerBerthWroteReadAsUnknown) {
  auto id = store_->CreateJob(Spec("a"), 1500);
  ASSERT_TRUE(id.has_value());
  Place(*id, 1);
  const std::string run_id = store_->GetJob(*id)->runs.at(0).run_id;
  ASSERT_TRUE(control::MarkRunStarted(*store_, run_id, 1, 2100, 2100).has_value());
  ASSERT_TRUE(control::RequestStop(*store_, *id, model::StopCause::kDrained, 2200).has_value());
  ASSERT_TRUE(store_->SetCordon("n1", std::nullopt,
                                {model::CordonKind::kDrain, "", "ops", false, 0}, 2200));
  Alert alert;
  alert.kind = model::AlertKind::kQueueWait;
  alert.severity = model::AlertSeverity::kInfo;
  alert.raised_ms = 2200;
  ASSERT_TRUE(store_->RaiseAlert(alert).has_value());
  store_.reset();
  {
    auto db = Database::Open((dir_ / "berth.db").string());
    ASSERT_TRUE(db.has_value());
    // As written: the names, not numbers.
    auto st = db->Prepare(
        "SELECT r.stopped_for, a.kind, a.severity, c.kind FROM runs r, alerts a, cordons c");
    ASSERT_TRUE(st.has_value());
    ASSERT_TRUE(st->Step().value());
    EXPECT_EQ(st->Text(0), "drained");
    EXPECT_EQ(st->Text(1), "queue_wait");
    EXPECT_EQ(st->Text(2), "info");
    EXPECT_EQ(st->Text(3), "drain");
  }
  {
    auto db = Database::Open((dir_ / "berth.db").string());
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(db->Exec("UPDATE runs SET stopped_for='evacuated';"
                         "UPDATE alerts SET kind='thermal', severity='page';"
                         "UPDATE cordons SET kind='quarantine';")
                    .has_value());
  }
  Reopen();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.has_value()) << job.error().message;
  EXPECT_EQ(job->runs.at(0).stopped_for, model::StopCause::kUnknown);
  EXPECT_TRUE(job->runs.at(0).stop_requested);
  auto active = store_->ActiveRuns();
  ASSERT_TRUE(active.has_value());
  ASSERT_EQ(active->size(), 1U);
  EXPECT_EQ(active->at(0).stopped_for, model::StopCause::kUnknown);
  auto alerts = store_->ListAlerts(true);
  ASSERT_TRUE(alerts.has_value()) << alerts.error().message;
  ASSERT_EQ(alerts->size(), 1U);
  EXPECT_EQ(alerts->at(0).kind, model::AlertKind::kUnknown);
  EXPECT_EQ(alerts->at(0).severity, model::AlertSeverity::kUnknown);
  // A cordon of a kind this version does not know still keeps new work off.
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message;
  ASSERT_TRUE(nodes->at(0).cordon.has_value());
  EXPECT_EQ(nodes->at(0).cordon->kind, model::CordonKind::kCordon);
  auto meter = MeterStore::Open(dir_);
  ASSERT_TRUE(meter.has_value()) << meter.error().message;
  auto usage = (*meter)->UsageRuns(0, 10'000, "", model::TenantScope::All());
  ASSERT_TRUE(usage.has_value()) << usage.error().message;
  ASSERT_EQ(usage->size(), 1U);
  EXPECT_EQ(usage->at(0).stopped_for, model::StopCause::kUnknown);

  // The run exits: its cause stays what it was read as, and is stored by name.
  ASSERT_TRUE(control::MarkRunExited(
      *store_, {run_id, 0, 15, 2100, 2600, model::StopCause::kUnknown, ""}, 2600));
  EXPECT_EQ(store_->GetJob(*id)->runs.at(0).stopped_for, model::StopCause::kUnknown);
}

// A schema-2 database's runs table gains the slice columns; its runs held
// whole GPUs.
TEST_F(SqliteStoreTest, MigratesASchemaTwoRunsTable) {
  auto id = store_->CreateJob(Spec("a"), 1500);
  ASSERT_TRUE(id.has_value());
  Place(*id, 1);
  store_.reset();
  {
    auto db = Database::Open((dir_ / "berth.db").string());
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(db->Exec("ALTER TABLE runs DROP COLUMN gpu_share_millis;"
                         "ALTER TABLE runs DROP COLUMN gpu_share_bytes;"
                         "UPDATE meta SET value='2' WHERE key='schema_version';")
                    .has_value());
  }
  Reopen();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.has_value()) << job.error().message;
  ASSERT_EQ(job->runs.size(), 1U);
  EXPECT_EQ(job->runs[0].gpu_share_millis, 0U);
  EXPECT_EQ(job->runs[0].gpu_indices, std::vector<std::uint32_t>{0});
}

// A schema-6 database (before services) gains the services tables; its
// jobs stay, and the schema version reads the current one (8).
TEST_F(SqliteStoreTest, MigratesASchemaSixDatabaseToHoldServices) {
  auto id = store_->CreateJob(Spec("a"), 1500);
  ASSERT_TRUE(id.has_value());
  store_.reset();
  {
    auto db = Database::Open((dir_ / "berth.db").string());
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(
        db->Exec("DROP TABLE service_rollouts; DROP TABLE service_revisions; DROP TABLE services;"
                 "UPDATE meta SET value='6' WHERE key='schema_version';")
            .has_value());
  }
  Reopen();
  EXPECT_TRUE(store_->GetJob(*id).has_value());
  auto spec = model::ParseServiceSpec("name: coder\ncommand: [serve]\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  auto applied = store_->ApplyService(*spec, "alice", 2000, 100);
  ASSERT_TRUE(applied.has_value()) << applied.error().message;
  EXPECT_EQ(applied->service.revision, 1);
  // And a canary rollout's progress (schema 10's table).
  auto progress =
      store_->SetRolloutProgress(spec->tenant, spec->name, std::nullopt, {1, 0, 2000, "berth"});
  ASSERT_TRUE(progress.has_value()) << progress.error().message;
  store_.reset();
  auto db = Database::Open((dir_ / "berth.db").string());
  ASSERT_TRUE(db.has_value());
  auto st = db->Prepare("SELECT value FROM meta WHERE key='schema_version'");
  ASSERT_TRUE(st.has_value());
  auto row = st->Step();
  ASSERT_TRUE(row.has_value() && *row);
  EXPECT_EQ(st->Text(0), "10");
}

// A schema-7 database (before replicas) gains jobs.service and runs.port:
// its jobs and runs read back, owned by no service and on no port, and a
// replica stored after the migration keeps its owner and port.
TEST_F(SqliteStoreTest, MigratesASchemaSevenDatabaseToHoldReplicas) {
  auto id = store_->CreateJob(Spec("a"), 1500);
  ASSERT_TRUE(id.has_value());
  Place(*id, 1);
  store_.reset();
  {
    auto db = Database::Open((dir_ / "berth.db").string());
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(db->Exec("DROP INDEX jobs_by_service; ALTER TABLE jobs DROP COLUMN service;"
                         "ALTER TABLE runs DROP COLUMN port;"
                         "UPDATE meta SET value='7' WHERE key='schema_version';")
                    .has_value());
  }
  Reopen();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.has_value()) << job.error().message;
  EXPECT_FALSE(job->spec.service.has_value());
  ASSERT_EQ(job->runs.size(), 1U);
  EXPECT_EQ(job->runs[0].port, 0U);

  model::JobSpec replica = Spec("coder");
  replica.service = model::ServiceOwner{"coder", 3, 8000};
  auto rid = store_->CreateJob(replica, 1600);
  ASSERT_TRUE(rid.has_value()) << rid.error().message;
  Place(*rid, 1);
  const std::string run = store_->GetJob(*rid)->runs.at(0).run_id;
  ASSERT_TRUE(control::MarkRunStarted(*store_, run, 42, 1700, 1700, 40123).has_value());
  store::JobFilter owned;
  owned.tenant = replica.tenant;
  owned.service = "coder";
  auto listed = store_->ListJobs(owned);
  ASSERT_TRUE(listed.has_value());
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_EQ(listed->at(0).id, *rid);
  EXPECT_EQ(listed->at(0).spec.service, replica.service);
  EXPECT_EQ(listed->at(0).runs.at(0).port, 40123U);
  store::JobFilter replicas;
  replicas.replicas_only = true;
  auto all = store_->ListJobs(replicas);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->size(), 1U);
}

TEST_F(SqliteStoreTest, JobsSubmittedBetweenReturnsTheWindowOldestFirstWithEveryAttempt) {
  auto before = *store_->CreateJob(Spec("before"), 900);
  auto a = *store_->CreateJob(Spec("a", 2), 1500);
  auto b = *store_->CreateJob(Spec("b"), 1200);  // submitted earlier, created later
  auto after = *store_->CreateJob(Spec("after"), 5000);
  // a runs, is evicted, and runs again to the end: two attempts of two replicas.
  Place(a, 2);
  const auto first = store_->GetJob(a)->runs;
  for (const auto& r : first) {
    ASSERT_TRUE(control::MarkRunStarted(*store_, r.run_id, 1, 2100, 2100).has_value());
  }
  sched::Eviction ev;
  ev.job_id = a;
  ev.cause = sched::EvictionCause::kPreempt;
  ev.reason.code = model::ReasonCode::kPreempted;
  ASSERT_TRUE(control::EvictJobs(*store_, {ev}, 2500).has_value());
  for (const auto& r : first) {
    ASSERT_TRUE(control::MarkRunExited(
        *store_, {r.run_id, 0, 15, 2100, 2600, model::StopCause::kPreempted, ""}, 2600));
  }
  Place(a, 2);
  const auto all = store_->GetJob(a)->runs;
  for (const auto& r : all) {
    if (r.attempt == 1) continue;  // attempts count from 1
    ASSERT_TRUE(control::MarkRunStarted(*store_, r.run_id, 2, 3000, 3000).has_value());
    ASSERT_TRUE(control::MarkRunExited(
        *store_, {r.run_id, 0, 0, 3000, 4000, model::StopCause::kNone, ""}, 4000));
  }

  auto jobs = store_->JobsSubmittedBetween(1000, 5000);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 2U);
  EXPECT_EQ((*jobs)[0].id, b);
  EXPECT_EQ((*jobs)[0].submitted_at_ms, 1200);
  EXPECT_TRUE((*jobs)[0].runs.empty());
  const JobRecord& ja = (*jobs)[1];
  EXPECT_EQ(ja.id, a);
  EXPECT_EQ(ja.state, model::JobState::kSucceeded);
  EXPECT_TRUE(ja.timeline.empty());
  ASSERT_EQ(ja.runs.size(), 4U);
  EXPECT_EQ(ja.runs[0].attempt, 1U);
  EXPECT_EQ(ja.runs[0].stopped_for, model::StopCause::kPreempted);
  EXPECT_EQ(ja.runs[0].started_at_ms, 2100);
  EXPECT_EQ(ja.runs[0].finished_at_ms, 2600);
  EXPECT_EQ(ja.runs[3].attempt, 2U);
  EXPECT_EQ(ja.runs[3].replica, 1U);
  EXPECT_EQ(ja.runs[3].stopped_for, model::StopCause::kNone);
  EXPECT_EQ(ja.runs[3].finished_at_ms, 4000);
  EXPECT_EQ(ja.runs[3].gpu_indices, (std::vector<std::uint32_t>{1}));

  // The bounds: since is inclusive, until exclusive.
  auto edge = store_->JobsSubmittedBetween(900, 1200);
  ASSERT_TRUE(edge.has_value());
  ASSERT_EQ(edge->size(), 1U);
  EXPECT_EQ((*edge)[0].id, before);
  EXPECT_EQ(store_->JobsSubmittedBetween(5001, 9000)->size(), 0U);
  EXPECT_EQ(store_->JobsSubmittedBetween(5000, 5001)->at(0).id, after);
}

TEST_F(SqliteStoreTest, AnArrayIsStoredWholeWithContiguousIdsAndEachElementKnowsItsPlace) {
  auto before = *store_->CreateJob(Spec("single"), 1500);
  model::JobSpec spec = Spec("sweep");
  spec.env["EPOCHS"] = "3";
  spec.array = model::JobArray{0, 3, {{{"LR", "0.1"}}, {{"LR", "0.01"}, {"EPOCHS", "5"}}, {}}};
  auto ids = store_->CreateJobs(spec, 1600, "alice");
  ASSERT_TRUE(ids.has_value()) << ids.error().message;
  ASSERT_EQ(ids->size(), 3U);
  EXPECT_EQ((*ids)[0], before + 1);
  EXPECT_EQ((*ids)[2], (*ids)[0] + 2);
  Reopen();
  for (std::uint32_t i = 0; i < 3; ++i) {
    auto job = store_->GetJob((*ids)[i]);
    ASSERT_TRUE(job.has_value());
    ASSERT_TRUE(job->spec.array_element.has_value());
    EXPECT_EQ(*job->spec.array_element, (model::ArrayElement{(*ids)[0], i, 3}));
    EXPECT_FALSE(job->spec.array.has_value());
    EXPECT_EQ(job->submitted_by, "alice");
  }
  // Each element's parameter set is in its env; the element's value wins.
  EXPECT_EQ(store_->GetJob((*ids)[0])->spec.env,
            (std::map<std::string, std::string>{{"EPOCHS", "3"}, {"LR", "0.1"}}));
  EXPECT_EQ(store_->GetJob((*ids)[1])->spec.env.at("EPOCHS"), "5");
  EXPECT_EQ(store_->GetJob((*ids)[2])->spec.env.size(), 1U);
  JobFilter filter;
  filter.array_id = (*ids)[0];
  auto listed = store_->ListJobs(filter);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->size(), 3U);
  EXPECT_EQ(store_->PendingJobs()->size(), 4U);
  // The next submission's id follows the array's.
  EXPECT_EQ(*store_->CreateJob(Spec("after"), 1700), (*ids)[2] + 1);
}

TEST_F(SqliteStoreTest, CancellingAnArrayCancelsWhatWaitsAndStopsWhatRuns) {
  model::JobSpec spec = Spec("sweep");
  spec.array = model::JobArray{10, 4, {}};
  auto ids = *store_->CreateJobs(spec, 1500, "alice");
  EXPECT_EQ(store_->GetJob(ids[3])->spec.array_element->index, 13U);
  Place(ids[0], 1);
  ASSERT_TRUE(control::CancelJob(*store_, ids[1], "alice", 2500).has_value());
  auto done = control::CancelArray(*store_, ids[0], "bob", 3000);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ(done->tenant, "default");
  EXPECT_EQ(done->cancelled, 2U);  // ids[2], ids[3]; ids[1] was already cancelled
  EXPECT_EQ(done->stopping, 1U);   // ids[0] is placed: its run is asked to stop
  EXPECT_EQ(store_->GetJob(ids[3])->state, model::JobState::kCancelled);
  EXPECT_TRUE(store_->GetJob(ids[0])->cancel_requested);
  EXPECT_TRUE(store_->GetJob(ids[0])->runs.at(0).stop_requested);
  auto again = control::CancelArray(*store_, ids[0], "bob", 3100);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->cancelled + again->stopping, 1U);  // the stopping one, asked again
  auto single = *store_->CreateJob(Spec("single"), 3200);
  auto not_array = control::CancelArray(*store_, single, "bob", 3300);
  ASSERT_FALSE(not_array.has_value());
  EXPECT_EQ(not_array.error().code, Code::kNotFound);
  EXPECT_EQ(store_->GetJob(single)->state, model::JobState::kPending);
}

TEST_F(SqliteStoreTest, ConcurrentSubmissionsAreEachStoredOnceAndARefusalLeavesTheOthers) {
  constexpr int kThreads = 8;
  constexpr int kEach = 25;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<std::int64_t> ids;
  std::atomic<int> refused{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        model::JobSpec spec = Spec(fmt::format("t{}-{}", t, i));
        // Every fifth of thread 0's goes to a queue the policy lacks.
        if (t == 0 && i % 5 == 0) spec.queue = "missing";
        if (t == 1 && i % 5 == 0) spec.array = model::JobArray{0, 10, {}};
        auto got = store_->CreateJobs(spec, 2000 + i, "alice");
        if (!got) {
          EXPECT_EQ(got.error().field, "queue");
          refused.fetch_add(1);
          continue;
        }
        std::lock_guard lock(mu);
        for (auto id : *got) EXPECT_TRUE(ids.insert(id).second) << "id " << id << " twice";
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(refused.load(), kEach / 5);
  const std::size_t jobs = kThreads * kEach - kEach / 5 + (kEach / 5) * 9;
  EXPECT_EQ(ids.size(), jobs);
  const auto stats = store_->commit_stats();
  EXPECT_EQ(stats.submissions, static_cast<std::uint64_t>(kThreads * kEach));
  EXPECT_LE(stats.commits, stats.submissions);
  Reopen();
  JobFilter all;
  all.limit = 10'000;
  auto listed = store_->ListJobs(all);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->size(), jobs);
  for (const auto& j : *listed) EXPECT_TRUE(ids.contains(j.id)) << j.id;
}

// Limits: alice may queue 3 jobs, the tenant 5.
constexpr const char* kLimitedPolicy = R"(queues:
  - name: default
    children:
      - name: default
tenants:
  default:
    limits: {pending_jobs: 5, pending_jobs_per_member: 3}
)";

TEST_F(SqliteStoreTest, PendingJobLimitsCountQueuedJobsAndNameTheNumbers) {
  ASSERT_TRUE(store_->ApplyPolicy(kLimitedPolicy, "root", "", 1500).has_value());
  std::vector<std::int64_t> alice;
  for (int i = 0; i < 3; ++i) {
    auto id = store_->CreateJobs(Spec(fmt::format("a{}", i)), 2000, "alice");
    ASSERT_TRUE(id.has_value()) << id.error().message;
    alice.push_back(id->front());
  }
  auto over = store_->CreateJobs(Spec("a3"), 2000, "alice");
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, Code::kResourceExhausted);
  EXPECT_NE(over.error().message.find("alice has 3 pending jobs in tenant default and this "
                                      "submission adds 1; the limit is 3 per member"),
            std::string::npos)
      << over.error().message;
  EXPECT_NE(over.error().message.find("tenants.default.limits.pending_jobs_per_member"),
            std::string::npos);
  // An array counts as all its elements, all or none.
  model::JobSpec two = Spec("pair");
  two.array = model::JobArray{0, 2, {}};
  ASSERT_TRUE(store_->CreateJobs(two, 2000, "bob").has_value());
  auto three = Spec("triple");
  three.array = model::JobArray{0, 3, {}};
  auto tenant_over = store_->CreateJobs(three, 2000, "carol");
  ASSERT_FALSE(tenant_over.has_value());
  EXPECT_NE(tenant_over.error().message.find("tenant default has 5 pending jobs and this "
                                             "submission adds 3; the limit is 5"),
            std::string::npos)
      << tenant_over.error().message;
  auto counts = store_->PendingCounts("default", "alice");
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->tenant, 5);
  EXPECT_EQ(counts->member, 3);

  // A job that leaves the queue frees its place; one queued again takes it.
  Place(alice[0], 1, 2);
  ASSERT_TRUE(control::CancelJob(*store_, alice[1], "alice", 2100).has_value());
  EXPECT_EQ(store_->PendingCounts("default", "alice")->member, 1);
  EXPECT_TRUE(store_->CreateJobs(Spec("a4"), 2200, "alice").has_value());
  EXPECT_EQ(store_->PendingCounts("default", "alice")->member, 2);
  // Recounted from the jobs at every open.
  Reopen();
  counts = store_->PendingCounts("default", "alice");
  EXPECT_EQ(counts->tenant, 4);
  EXPECT_EQ(counts->member, 2);
}

TEST_F(SqliteStoreTest, ConcurrentSubmissionsCannotPassAPendingJobLimitTogether) {
  ASSERT_TRUE(store_->ApplyPolicy(kLimitedPolicy, "root", "", 1500).has_value());
  constexpr int kThreads = 8;
  std::atomic<int> stored{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto got = store_->CreateJobs(Spec(fmt::format("t{}", t)), 2000, "alice");
      if (got) {
        stored.fetch_add(1);
      } else {
        EXPECT_EQ(got.error().code, Code::kResourceExhausted) << got.error().message;
        refused.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stored.load(), 3);
  EXPECT_EQ(refused.load(), kThreads - 3);
  EXPECT_EQ(store_->PendingCounts("default", "alice")->member, 3);
}

TEST_F(SqliteStoreTest, SpecSizeAndReplicaLimitsAreCheckedAtSubmit) {
  ASSERT_TRUE(store_
                  ->ApplyPolicy("queues:\n  - name: default\n    children:\n      - name: default\n"
                                "limits: {spec_bytes: 1Ki, replicas_per_job: 4}\n",
                                "root", "", 1500)
                  .has_value());
  auto wide = store_->CreateJobs(Spec("wide", 5), 2000, "alice");
  ASSERT_FALSE(wide.has_value());
  EXPECT_EQ(wide.error().field, "replicas");
  EXPECT_NE(wide.error().message.find("asks for 5 replicas; tenant default allows at most 4"),
            std::string::npos)
      << wide.error().message;
  EXPECT_NE(wide.error().message.find("limits.replicas_per_job"), std::string::npos);
  model::JobSpec big = Spec("big");
  big.env["PAYLOAD"] = std::string(2000, 'x');
  auto too_big = store_->CreateJobs(big, 2000, "alice");
  ASSERT_FALSE(too_big.has_value());
  EXPECT_NE(too_big.error().message.find("tenant default allows at most 1024"), std::string::npos)
      << too_big.error().message;
  EXPECT_TRUE(store_->CreateJobs(Spec("fits", 4), 2000, "alice").has_value());
  EXPECT_EQ(store_->PendingCounts("default", "alice")->member, 1);
}

}  // namespace
}  // namespace berth::store
