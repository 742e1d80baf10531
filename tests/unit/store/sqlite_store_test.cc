#include "store/sqlite_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace berth::store {
namespace {

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
  model::NodeInfo NodeWith(std::uint32_t gpus) {
    model::NodeInfo n;
    n.name = "n1";
    n.cpus = 8;
    for (std::uint32_t i = 0; i < gpus; ++i) {
      model::Gpu g;
      g.index = i;
      g.uuid = "uuid-" + std::to_string(i);
      g.model = "H100-80GB";
      g.memory_bytes = 80ULL << 30;
      n.gpus.push_back(g);
    }
    return n;
  }
  // Places job `id` on n1 with one GPU per replica, replica r on GPU r.
  void Place(std::int64_t id, std::uint32_t replicas) {
    sched::Plan plan;
    sched::Placement p{id, {}};
    for (std::uint32_t r = 0; r < replicas; ++r) p.replicas.push_back({r, "n1", {r}});
    plan.placements.push_back(p);
    ASSERT_TRUE(store_->UpsertNode(NodeWith(8), 1000).has_value());
    auto nodes = store_->ListNodes();
    ASSERT_TRUE(store_->ApplyPlan(plan, *nodes, 2000).has_value());
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreTest, FreshInstallHasDefaultQueue) {
  EXPECT_TRUE(store_->QueueExists("default", "default").value());
  EXPECT_FALSE(store_->QueueExists("vision", "default").value());
}

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
    ASSERT_TRUE(store_->MarkRunStarted(r.run_id, 100 + r.replica, 2100, 2100).has_value());
  }
  EXPECT_EQ(store_->GetJob(id)->state, model::JobState::kRunning);
  for (const auto& r : job.runs) {
    RunExit e;
    e.run_id = r.run_id;
    e.ended_at_ms = 3000;
    ASSERT_TRUE(store_->MarkRunExited(e, 3000).has_value());
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
  RunExit e{run.run_id, 3, 0, 2100, 3000, "", ""};
  ASSERT_TRUE(store_->MarkRunExited(e, 3000).has_value());
  ASSERT_TRUE(store_->MarkRunExited(e, 4000).has_value());  // re-sent after a reconnect
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kFailed);
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_EQ(job.finished_at_ms, 3000);
  EXPECT_EQ(job.reason.code, model::ReasonCode::kFailedExitCode);
}

TEST_F(SqliteStoreTest, FailedReplicaStopsTheRestOfTheGang) {
  auto id = *store_->CreateJob(Spec("a", 2), 1500);
  Place(id, 2);
  auto runs = store_->GetJob(id)->runs;
  ASSERT_TRUE(store_->MarkRunExited({runs[0].run_id, 1, 0, 2100, 3000, "", ""}, 3000).has_value());
  auto active = *store_->ActiveRuns();
  ASSERT_EQ(active.size(), 1U);
  EXPECT_TRUE(active[0].stop_requested);
  EXPECT_EQ(active[0].stopped_for, "gang");
  // The stopped peer's SIGTERM exit does not hide the real cause.
  ASSERT_TRUE(store_->MarkRunExited({runs[1].run_id, 0, 15, 2100, 3100, "", ""}, 3100).has_value());
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, model::JobState::kFailed);
  EXPECT_EQ(job.reason.counts.at("replica"), 0);
  EXPECT_EQ(job.exit_code, 1);
}

TEST_F(SqliteStoreTest, CancelPendingIsImmediateAndRunningWaitsForExit) {
  auto pending = *store_->CreateJob(Spec("p"), 1500);
  auto c = store_->CancelJob(pending, "alice", 1600);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->state, model::JobState::kCancelled);
  EXPECT_EQ(store_->CancelJob(pending, "alice", 1700).error().code, Code::kFailedPrecondition);

  auto running = *store_->CreateJob(Spec("r"), 1500);
  Place(running, 1);
  auto after = *store_->CancelJob(running, "bob", 2500);
  EXPECT_EQ(after.state, model::JobState::kScheduled);
  EXPECT_TRUE(after.cancel_requested);
  EXPECT_TRUE(store_->ActiveRuns()->at(0).stop_requested);
  auto run = after.runs[0];
  ASSERT_TRUE(store_->MarkRunExited({run.run_id, 0, 15, 2100, 2600, "cancelled", ""}, 2600));
  auto job = *store_->GetJob(running);
  EXPECT_EQ(job.state, model::JobState::kCancelled);
  EXPECT_EQ(job.reason.detail, "bob");
}

TEST_F(SqliteStoreTest, PlacementOfACancelledJobIsDropped) {
  auto id = *store_->CreateJob(Spec("a"), 1500);
  ASSERT_TRUE(store_->CancelJob(id, "x", 1600).has_value());
  Place(id, 1);
  EXPECT_TRUE(store_->ActiveRuns()->empty());
  EXPECT_EQ(store_->GetJob(id)->state, model::JobState::kCancelled);
}

TEST_F(SqliteStoreTest, PendingReasonIsStored) {
  auto id = *store_->CreateJob(Spec("a"), 1500);
  sched::Plan plan;
  plan.pending.push_back({id, {model::ReasonCode::kNoNodeFits, {{"nodes", 3}}, {}}});
  ASSERT_TRUE(store_->ApplyPlan(plan, {}, 2000).has_value());
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

}  // namespace
}  // namespace berth::store
