// berthd's side of a run's end: the log is synced before the exit is
// recorded, and the exit recorded before the agent gets its ack (after which
// it deletes its copy). A log berthd cannot make durable holds back both the
// exit and the ack, so the agent keeps its copy and sends again. Real
// SqliteStore and log files; the session records what berthd sends.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/agent_session.h"
#include "control/controller.h"
#include "control/lifecycle.h"
#include "control/run_log.h"
#include "sched/fifo_scheduler.h"
#include "unit/server/controller_fixture.h"

namespace berth::server {
namespace {

namespace fs = std::filesystem;

class RecordingSession : public AgentSession {
 public:
  bool Send(const berth::v1::ServerMessage& msg) override {
    std::lock_guard lock(mu_);
    sent_.push_back(msg);
    return true;
  }
  const std::string& node() const override { return node_; }
  // The runs whose exits berthd acknowledged, in order.
  std::vector<std::string> Acks() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& m : sent_) {
      if (m.has_ack_exit()) out.push_back(m.ack_exit().run_id());
    }
    return out;
  }

 private:
  std::string node_ = "n1";
  std::mutex mu_;
  std::vector<berth::v1::ServerMessage> sent_;
};

class LogSyncTest : public ControllerFixture<sched::FifoScheduler> {
 protected:
  LogSyncTest() : ControllerFixture(1'000'000) {}

  void Connect() {
    berth::v1::Register reg;
    auto* node = reg.mutable_node();
    node->set_name("n1");
    node->set_cpus(8);
    node->set_memory_bytes(64ULL << 30);
    auto* g = node->add_gpus();
    g->set_index(0);
    g->set_uuid("uuid-0");
    g->set_model("H100-80GB");
    g->set_memory_bytes(80ULL << 30);
    ASSERT_TRUE(controller_->OnRegister(reg, session_).has_value());
  }
  std::string Running() {
    model::JobSpec s;
    s.name = "lines";
    s.command = {"seq", "100"};
    s.resources.gpus = 1;
    auto id = store_->CreateJob(s, clock_.NowMs());
    EXPECT_TRUE(id.has_value()) << id.error().message;
    job_ = *id;
    sched::Plan plan;
    plan.placements.push_back({*id, {{0, "n1", {0}}}});
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, clock_.NowMs()).has_value());
    const std::string run = store_->GetJob(*id)->runs.at(0).run_id;
    EXPECT_TRUE(
        control::MarkRunStarted(*store_, run, 4242, clock_.NowMs(), clock_.NowMs()).has_value());
    return run;
  }
  void Ship(const std::string& run, std::uint64_t offset, const std::string& data) {
    berth::v1::LogChunk c;
    c.set_run_id(run);
    c.set_offset(offset);
    c.set_data(data);
    ASSERT_TRUE(controller_->OnLogChunk("n1", c).has_value());
  }
  berth::v1::RunExited Exit(const std::string& run) {
    berth::v1::RunExited e;
    e.set_run_id(run);
    e.set_started_at_ms(clock_.NowMs());
    e.set_ended_at_ms(clock_.NowMs());
    return e;
  }
  model::RunState State(const std::string& run) { return (*store_->GetRun(run))->state; }

  std::shared_ptr<RecordingSession> session_ = std::make_shared<RecordingSession>();
  std::int64_t job_ = 0;
};

TEST_F(LogSyncTest, TheExitIsRecordedAndAcknowledgedWithTheWholeLogOnDisk) {
  Connect();
  const auto run = Running();
  Ship(run, 0, "line 1\nline 2\n");
  Ship(run, 14, "line 3\n");
  Ship(run, 0, "line 1\n");  // a resent chunk lands on itself
  ASSERT_TRUE(controller_->OnRunExited("n1", Exit(run)).has_value());
  EXPECT_EQ(State(run), model::RunState::kExited);
  EXPECT_EQ(session_->Acks(), std::vector<std::string>{run});
  EXPECT_EQ(ReadWholeRunLog(controller_->LogPath(job_, run), 0), "line 1\nline 2\nline 3\n");
  EXPECT_EQ(SyncRunLog(controller_->LogPath(job_, run)).value(), 21U);
}

TEST_F(LogSyncTest, ASilentRunHasNoLogToSyncAndItsExitIsAcknowledged) {
  Connect();
  const auto run = Running();
  ASSERT_TRUE(controller_->OnRunExited("n1", Exit(run)).has_value());
  EXPECT_EQ(State(run), model::RunState::kExited);
  EXPECT_EQ(session_->Acks(), std::vector<std::string>{run});
}

// The log's directory is taken away after the chunks were written (a disk
// that failed under berthd, say): the log cannot be synced, so the exit is
// neither recorded nor acknowledged, and the agent keeps its copy. Once the
// log can be synced again, the exit the agent sends again settles the run.
TEST_F(LogSyncTest, ALogThatCannotBeSyncedHoldsBackTheExitAndItsAck) {
  Connect();
  const auto run = Running();
  Ship(run, 0, "line 1\nline 2\n");
  const fs::path job_dir = controller_->LogPath(job_, run).parent_path();
  const fs::path aside = job_dir.string() + ".aside";
  fs::rename(job_dir, aside);
  { std::ofstream(job_dir) << "not a directory"; }

  auto st = controller_->OnRunExited("n1", Exit(run));
  ASSERT_FALSE(st.has_value()) << "the exit was accepted with its log not durable";
  EXPECT_NE(st.error().message.find(controller_->LogPath(job_, run).string()), std::string::npos)
      << st.error().message;
  EXPECT_EQ(State(run), model::RunState::kRunning) << "the exit must wait for the log";
  EXPECT_TRUE(session_->Acks().empty()) << "acknowledged: the agent would drop its copy";

  fs::remove(job_dir);
  fs::rename(aside, job_dir);
  ASSERT_TRUE(controller_->OnRunExited("n1", Exit(run)).has_value());
  EXPECT_EQ(State(run), model::RunState::kExited);
  EXPECT_EQ(session_->Acks(), std::vector<std::string>{run});
  EXPECT_EQ(ReadWholeRunLog(controller_->LogPath(job_, run), 0), "line 1\nline 2\n");
}

}  // namespace
}  // namespace berth::server
