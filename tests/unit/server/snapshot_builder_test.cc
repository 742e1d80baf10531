// The snapshot builder carries GPU sharing from the store to the scheduler:
// the operator's sharing mode per GPU, and what each GPU's slices hold, from
// the runs' recorded slices; and run-time predictions from the finished jobs
// the runtime feed learnt from.
#include "control/snapshot_builder.h"

#include <gtest/gtest.h>

#include "control/runtime_feed.h"
#include "model/reason.h"

namespace berth::server {
namespace {

TEST(SnapshotBuilder, SharingModeAndSliceUsageReachTheScheduler) {
  store::NodeRecord node;
  node.info.name = "n1";
  node.info.cpus = 16;
  node.info.memory_bytes = 64ULL << 30;
  for (std::uint32_t i = 0; i < 3; ++i) {
    model::Gpu g;
    g.index = i;
    g.model = "H100-80GB";
    g.memory_bytes = 80ULL << 30;
    g.sharing = i > 0;
    node.info.gpus.push_back(g);
  }
  std::vector<store::NodeRecord> nodes{node};
  std::map<std::string, bool> ready{{"n1", true}};
  std::vector<store::RunRecord> runs(3);
  runs[0].job_id = 1;  // whole GPU 0
  runs[0].node = "n1";
  runs[0].gpu_indices = {0};
  runs[1].job_id = 2;  // a quarter of GPU 1
  runs[1].node = "n1";
  runs[1].gpu_indices = {1};
  runs[1].gpu_share_millis = 250;
  runs[1].gpu_share_bytes = 20ULL << 30;
  runs[2] = runs[1];  // another job's half of GPU 1
  runs[2].job_id = 3;
  runs[2].gpu_share_millis = 500;
  runs[2].gpu_share_bytes = 40ULL << 30;
  store::PendingQueue pending;
  model::Policy policy = model::DefaultPolicy();
  SnapshotInputs in{1000, &nodes, &ready, &runs, &pending, &policy};
  auto spec_of = [](std::int64_t id) -> Result<model::JobSpec> {
    model::JobSpec s;
    s.name = "j" + std::to_string(id);
    if (id == 1) {
      s.resources.gpus = 1;
    } else {
      s.resources.gpu_share_millis = id == 2 ? 250 : 500;
    }
    return s;
  };
  auto snap = BuildSnapshot(in, spec_of);
  ASSERT_TRUE(snap.has_value()) << snap.error().message;
  ASSERT_EQ(snap->nodes.size(), 1U);
  const auto& gpus = snap->nodes[0].gpus;
  ASSERT_EQ(gpus.size(), 3U);
  EXPECT_FALSE(gpus[0].sharing);
  EXPECT_FALSE(gpus[0].free);
  EXPECT_EQ(gpus[0].shared_millis, 0U);
  EXPECT_TRUE(gpus[1].sharing);
  EXPECT_FALSE(gpus[1].free);
  EXPECT_EQ(gpus[1].shared_millis, 750U);
  EXPECT_EQ(gpus[1].shared_bytes, 60ULL << 30);
  EXPECT_TRUE(gpus[2].sharing);
  EXPECT_TRUE(gpus[2].free);
  EXPECT_EQ(snap->running.size(), 3U);
}

// A job's reclaim grace counts from the cycle that first said it needed a
// reclaim: the time its stored pending reason carries reaches the next
// snapshot, and a job whose reason carries none starts from 0.
TEST(SnapshotBuilder, TheReclaimTimeOfAStoredReasonReachesTheScheduler) {
  std::vector<store::NodeRecord> nodes;
  std::map<std::string, bool> ready;
  std::vector<store::RunRecord> runs;
  auto waiting = std::make_shared<store::JobRecord>();
  waiting->id = 7;
  waiting->spec.tenant = "vision";
  waiting->spec.queue = "training";
  waiting->reason = {
      model::ReasonCode::kNoNodeFits, {{std::string(model::kReclaimSinceMs), 6'300'000}}, {}};
  auto fresh = std::make_shared<store::JobRecord>();
  fresh->id = 8;
  fresh->spec.tenant = "vision";
  fresh->spec.queue = "training";
  store::PendingQueue pending{waiting, fresh};
  model::Policy policy = model::DefaultPolicy();
  SnapshotInputs in{7'200'000, &nodes, &ready, &runs, &pending, &policy};
  auto spec_of = [](std::int64_t) -> Result<model::JobSpec> { return model::JobSpec{}; };
  auto snap = BuildSnapshot(in, spec_of);
  ASSERT_TRUE(snap.has_value()) << snap.error().message;
  ASSERT_EQ(snap->pending.size(), 2U);
  for (const auto& p : snap->pending) {
    EXPECT_EQ(p.reclaim_since_ms, p.id == 7 ? 6'300'000 : 0) << "job " << p.id;
  }
}

// A node's container runtime and a job's image reach the scheduler, which
// places a job with an image only where podman is: the node's flag from
// what its agent reported, the image of waiting and running jobs from their
// specs (a running one for consolidation's moves).
TEST(SnapshotBuilder, ContainerRuntimesAndImagesReachTheScheduler) {
  std::vector<store::NodeRecord> nodes(2);
  nodes[0].info.name = "bare";
  nodes[1].info.name = "boxes";
  nodes[1].info.container_runtime = "podman";
  std::map<std::string, bool> ready{{"bare", true}, {"boxes", true}};
  std::vector<store::RunRecord> runs(1);
  runs[0].job_id = 1;
  runs[0].node = "boxes";
  auto waiting = std::make_shared<store::JobRecord>();
  waiting->id = 2;
  waiting->spec.image = "registry.example/train:2";
  auto plain = std::make_shared<store::JobRecord>();
  plain->id = 3;
  store::PendingQueue pending{waiting, plain};
  model::Policy policy = model::DefaultPolicy();
  SnapshotInputs in{1000, &nodes, &ready, &runs, &pending, &policy};
  auto spec_of = [](std::int64_t) -> Result<model::JobSpec> {
    model::JobSpec s;
    s.image = "registry.example/serve:1";
    return s;
  };
  auto snap = BuildSnapshot(in, spec_of);
  ASSERT_TRUE(snap.has_value()) << snap.error().message;
  ASSERT_EQ(snap->nodes.size(), 2U);
  EXPECT_FALSE(snap->nodes[0].container_runtime);
  EXPECT_TRUE(snap->nodes[1].container_runtime);
  ASSERT_EQ(snap->pending.size(), 2U);
  EXPECT_EQ(snap->pending[0].image, "registry.example/train:2");
  EXPECT_EQ(snap->pending[1].image, "");
  ASSERT_EQ(snap->running.size(), 1U);
  EXPECT_EQ(snap->running[0].image, "registry.example/serve:1");
}

// Which job references of a plan name another tenant's job: by the tenants
// of the snapshot's pending and running jobs; an id the snapshot does not
// hold counts as another tenant's (hidden rather than shown).
TEST(MarkOtherTenantJobs, MarksReferencesAcrossTenantsOnly) {
  sched::Snapshot snap;
  for (auto [id, tenant] : {std::pair{10, "red"}, {11, "blue"}}) {
    sched::PendingJob p;
    p.id = id;
    p.tenant = tenant;
    snap.pending.push_back(p);
  }
  for (auto [id, tenant] : {std::pair{20, "blue"}, {21, "red"}}) {
    sched::RunningJob r;
    r.id = id;
    r.tenant = tenant;
    snap.running.push_back(r);
  }
  sched::Plan plan;
  plan.pending = {
      {10, {model::ReasonCode::kNoNodeFits, {{"eta_unknown", 1}, {"eta_blocked_by", 20}}, {}}},
      {11, {model::ReasonCode::kNoNodeFits, {{"eta_unknown", 1}, {"eta_blocked_by", 20}}, {}}},
      {10, {model::ReasonCode::kNoNodeFits, {{"reclaim_first_victim", 99}}, {}}},
      {11, {model::ReasonCode::kNoNodes, {}, {}}},
  };
  sched::Eviction across;
  across.job_id = 20;
  across.reason = {model::ReasonCode::kReclaimed, {{"by_job", 10}}, "red/main"};
  sched::Eviction within;
  within.job_id = 21;
  within.reason = {model::ReasonCode::kPreempted, {{"by_job", 10}}, "red/main"};
  plan.evictions = {across, within};

  MarkOtherTenantJobs(plan, snap);
  EXPECT_TRUE(model::NamesOtherTenantJob(plan.pending[0].reason, model::kEtaBlockedBy));
  EXPECT_FALSE(model::NamesOtherTenantJob(plan.pending[1].reason, model::kEtaBlockedBy));
  EXPECT_TRUE(model::NamesOtherTenantJob(plan.pending[2].reason, model::kReclaimFirstVictim));
  EXPECT_EQ(plan.pending[3].reason.counts.size(), 0u);
  EXPECT_TRUE(model::NamesOtherTenantJob(plan.evictions[0].reason, model::kByJob));
  EXPECT_FALSE(model::NamesOtherTenantJob(plan.evictions[1].reason, model::kByJob));
  // Marked, never dropped: the ids stay for the platform's own readers.
  EXPECT_EQ(plan.evictions[0].reason.counts.at("by_job"), 10);
  EXPECT_EQ(plan.pending[1].reason.counts.size(), 2u);
}

}  // namespace
}  // namespace berth::server

namespace berth::server {
namespace {

// Run-time predictions reach the scheduler: a waiting job's from its
// submitter and name, a running job's from its tenant and shape, and none
// for a job that declares a max runtime (it wins).
TEST(SnapshotBuilder, PredictionsReachTheSchedulerAndDeclaredRuntimesWin) {
  sched::RuntimeHistory history({.keep_per_key = 8, .min_samples = 2});
  for (int i = 0; i < 2; ++i) {
    history.Add({"vision", "ana", "train", {8, 1, false}, 7'200'000, sched::RunEnd::kSucceeded});
    history.Add({"vision", "bo", "eval", {4, 1, false}, 600'000, sched::RunEnd::kSucceeded});
  }
  std::vector<store::NodeRecord> nodes;
  std::map<std::string, bool> ready;
  std::vector<store::RunRecord> runs(1);
  runs[0].job_id = 3;
  runs[0].node = "gone";  // not in the inventory: the job still runs
  auto make = [](std::int64_t id, std::int64_t max_runtime_ms) {
    auto job = std::make_shared<store::JobRecord>();
    job->id = id;
    job->spec.tenant = "vision";
    job->spec.queue = "training";
    job->spec.name = "train";
    job->spec.resources.gpus = 8;
    job->spec.max_runtime_ms = max_runtime_ms;
    job->submitted_by = "ana";
    return job;
  };
  store::PendingQueue pending{make(1, 0), make(2, 3'600'000)};
  model::Policy policy = model::DefaultPolicy();
  SnapshotInputs in{1000, &nodes, &ready, &runs, &pending, &policy, nullptr, &history};
  auto spec_of = [](std::int64_t) -> Result<model::JobSpec> {
    model::JobSpec s;
    s.tenant = "vision";
    s.queue = "training";
    s.resources.gpus = 4;
    return s;
  };
  auto snap = BuildSnapshot(in, spec_of);
  ASSERT_TRUE(snap.has_value()) << snap.error().message;
  ASSERT_EQ(snap->pending.size(), 2U);
  EXPECT_EQ(snap->pending[0].predicted.basis, sched::RuntimeBasis::kUserName);
  EXPECT_EQ(snap->pending[0].predicted.runtime_ms, 7'200'000);
  EXPECT_FALSE(snap->pending[1].predicted.known());  // declares 1h
  ASSERT_EQ(snap->running.size(), 1U);
  EXPECT_EQ(snap->running[0].predicted.basis, sched::RuntimeBasis::kTenantShape);
  EXPECT_EQ(snap->running[0].predicted.runtime_ms, 600'000);
  // Without a history, nothing is predicted.
  in.history = nullptr;
  snap = BuildSnapshot(in, spec_of);
  ASSERT_TRUE(snap.has_value());
  EXPECT_FALSE(snap->pending[0].predicted.known());
}

// What a finished job teaches the predictor: its last attempt's length,
// from the earliest replica start to the last replica end.
TEST(RuntimeFeed, AFinishedJobTeachesItsLastAttempt) {
  store::JobRecord job;
  job.id = 5;
  job.spec.tenant = "vision";
  job.spec.name = "train";
  job.spec.replicas = 2;
  job.spec.resources.gpus = 8;
  job.submitted_by = "ana";
  job.state = model::JobState::kSucceeded;
  job.attempts = 2;
  auto run = [](std::uint32_t attempt, TimeMs from, TimeMs to) {
    store::RunRecord r;
    r.attempt = attempt;
    r.started_at_ms = from;
    r.finished_at_ms = to;
    return r;
  };
  job.runs = {run(1, 0, 50'000), run(2, 100'000, 160'000), run(2, 90'000, 150'000)};
  auto record = RuntimeRecordOf(job);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->runtime_ms, 70'000);  // 90s to 160s
  EXPECT_EQ(record->user, "ana");
  EXPECT_EQ(record->name, "train");
  EXPECT_EQ(record->shape.gpus, 8U);
  EXPECT_EQ(record->shape.replicas, 2U);
  EXPECT_EQ(record->end, sched::RunEnd::kSucceeded);
  job.state = model::JobState::kFailed;
  EXPECT_EQ(RuntimeRecordOf(job)->end, sched::RunEnd::kFailed);
  job.state = model::JobState::kCancelled;
  EXPECT_FALSE(RuntimeRecordOf(job).has_value());
  job.state = model::JobState::kRunning;
  EXPECT_FALSE(RuntimeRecordOf(job).has_value());
}

}  // namespace
}  // namespace berth::server
