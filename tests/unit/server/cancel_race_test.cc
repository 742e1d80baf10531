// A stop (cancel, preemption, drain) that lands after a run is placed but
// before its StartRun went out: the controller, with a real SqliteStore and an
// agent session that records the orders it is sent, settles the run as never
// started instead of sending a StopRun the agent cannot act on.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/agent_session.h"
#include "control/controller.h"
#include "control/lifecycle.h"
#include "sched/fifo_scheduler.h"
#include "store/sqlite_store.h"
#include "unit/server/controller_fixture.h"

namespace berth::server {
namespace {

// The agent's end of the stream: keeps what berthd sent; `open` false acts
// as a closed stream.
class RecordingSession : public AgentSession {
 public:
  explicit RecordingSession(std::string node) : node_(std::move(node)) {}
  bool Send(const berth::v1::ServerMessage& msg) override {
    std::lock_guard lock(mu_);
    sent_.push_back(msg);
    return open;
  }
  const std::string& node() const override { return node_; }
  std::vector<berth::v1::ServerMessage> sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }
  int Starts(const std::string& run_id) {
    int n = 0;
    for (const auto& m : sent()) n += m.has_start_run() && m.start_run().run_id() == run_id;
    return n;
  }
  int Stops(const std::string& run_id) {
    int n = 0;
    for (const auto& m : sent()) n += m.has_stop_run() && m.stop_run().run_id() == run_id;
    return n;
  }
  bool open = true;

 private:
  std::string node_;
  std::mutex mu_;
  std::vector<berth::v1::ServerMessage> sent_;
};

class CancelRaceTest : public ControllerFixture<sched::FifoScheduler> {
 protected:
  CancelRaceTest() : ControllerFixture(1'000'000) {}

  // The agent of n1 registers, reporting `runs` as running (pid 0: accepted).
  std::shared_ptr<RecordingSession> Connect(const std::vector<std::string>& runs = {}) {
    berth::v1::Register reg;
    auto* node = reg.mutable_node();
    node->set_name("n1");
    node->set_cpus(8);
    node->set_memory_bytes(64ULL << 30);
    for (std::uint32_t i = 0; i < 2; ++i) {
      auto* g = node->add_gpus();
      g->set_index(i);
      g->set_uuid("uuid-" + std::to_string(i));
      g->set_model("H100-80GB");
      g->set_memory_bytes(80ULL << 30);
    }
    for (const auto& r : runs) {
      auto* st = reg.add_runs();
      st->set_run_id(r);
      st->set_phase(berth::v1::RunStatus::RUNNING);
    }
    auto session = std::make_shared<RecordingSession>("n1");
    EXPECT_TRUE(controller_->OnRegister(reg, session).has_value());
    return session;
  }
  std::int64_t Submit() {
    model::JobSpec s;
    s.name = "race";
    s.command = {"sleep", "600"};
    s.resources.gpus = 1;
    auto id = store_->CreateJob(s, clock_.NowMs());
    EXPECT_TRUE(id.has_value()) << id.error().message;
    return *id;
  }
  // Places job `id` on n1 as a pass would, without dispatching: the window.
  std::string Place(std::int64_t id) {
    sched::Plan plan;
    plan.placements.push_back({id, {{0, "n1", {0}}}});
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, clock_.NowMs()).has_value());
    return store_->GetJob(id)->runs.at(0).run_id;
  }
  store::JobRecord Job(std::int64_t id) { return *store_->GetJob(id); }
};

TEST_F(CancelRaceTest, ACancelBeforeTheStartOrderSettlesTheRunAsNeverStarted) {
  auto agent = Connect();
  auto id = Submit();
  auto run = Place(id);
  ASSERT_TRUE(controller_->Cancel(id, "alice").has_value());
  ASSERT_EQ(Job(id).state, model::JobState::kScheduled);  // cancelling: a run is placed
  ASSERT_TRUE(controller_->RunPass().has_value());

  auto job = Job(id);
  EXPECT_EQ(job.state, model::JobState::kCancelled);
  ASSERT_EQ(job.runs.size(), 1U);
  EXPECT_EQ(job.runs[0].state, model::RunState::kExited);
  EXPECT_EQ(job.runs[0].stopped_for, model::StopCause::kCancelled);
  EXPECT_FALSE(job.runs[0].started_at_ms.has_value());  // no runtime, nothing metered
  EXPECT_EQ(agent->Starts(run), 0);
  EXPECT_EQ(agent->Stops(run), 0);  // nothing the agent could act on
  bool explained = false;
  for (const auto& e : job.timeline) {
    explained |= e.message.find("never started") != std::string::npos;
  }
  EXPECT_TRUE(explained) << "the job's events must say the run never started";
  // Later passes change nothing: settled once.
  const auto events = job.timeline.size();
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Job(id).timeline.size(), events);
}

TEST_F(CancelRaceTest, ARunWhoseStartOrderWentOutIsStoppedNotSettled) {
  auto agent = Connect();
  auto id = Submit();
  auto run = Place(id);
  ASSERT_TRUE(controller_->RunPass().has_value());  // StartRun sent
  ASSERT_EQ(agent->Starts(run), 1);
  ASSERT_TRUE(controller_->Cancel(id, "alice").has_value());
  ASSERT_TRUE(controller_->RunPass().has_value());
  // The agent may have started it: only the agent's exit settles it.
  EXPECT_EQ(agent->Stops(run), 1);
  EXPECT_EQ(Job(id).runs.at(0).state, model::RunState::kStarting);
  EXPECT_NE(Job(id).state, model::JobState::kCancelled);
}

TEST_F(CancelRaceTest, AStartSentOnABrokenStreamKeepsTheRunUntilTheAgentReports) {
  auto agent = Connect();
  agent->open = false;  // the order may or may not have reached the agent
  auto id = Submit();
  auto run = Place(id);
  ASSERT_TRUE(controller_->RunPass().has_value());
  ASSERT_EQ(agent->Starts(run), 1);
  controller_->OnDisconnect(agent);
  ASSERT_TRUE(controller_->Cancel(id, "alice").has_value());
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Job(id).runs.at(0).state, model::RunState::kStarting);

  // The agent comes back holding the run: it is stopped there, not settled.
  auto again = Connect({run});
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(again->Stops(run), 1);
  EXPECT_EQ(Job(id).runs.at(0).state, model::RunState::kStarting);
}

TEST_F(CancelRaceTest, AnAgentThatComesBackWithoutTheRunLetsItSettle) {
  auto agent = Connect();
  agent->open = false;
  auto id = Submit();
  auto run = Place(id);
  ASSERT_TRUE(controller_->RunPass().has_value());
  controller_->OnDisconnect(agent);
  ASSERT_TRUE(controller_->Cancel(id, "alice").has_value());
  ASSERT_TRUE(controller_->RunPass().has_value());
  ASSERT_EQ(Job(id).runs.at(0).state, model::RunState::kStarting);
  // The order was lost with the stream: the agent registers without the run.
  Connect();
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Job(id).state, model::JobState::kCancelled);
  EXPECT_FALSE(Job(id).runs.at(0).started_at_ms.has_value());
}

TEST_F(CancelRaceTest, AfterARestartBerthdWaitsForTheAgentsAccount) {
  Connect();
  auto id = Submit();
  auto run = Place(id);
  Reopen();  // berthd restarts: it no longer knows what it sent
  ASSERT_TRUE(controller_->Cancel(id, "alice").has_value());
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Job(id).runs.at(0).state, model::RunState::kStarting)
      << "before the agent registers, berthd cannot know whether it holds the run";

  // Case 1: the agent holds it (the old berthd sent the start): stop it there.
  {
    auto agent = Connect({run});
    ASSERT_TRUE(controller_->RunPass().has_value());
    EXPECT_EQ(agent->Stops(run), 1);
    EXPECT_EQ(Job(id).runs.at(0).state, model::RunState::kStarting);
  }
  // Case 2: it re-registers (restarted, its run directory never written)
  // without it: settled as never started.
  auto agent = Connect();
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Job(id).state, model::JobState::kCancelled);
  EXPECT_EQ(agent->Starts(run), 0);
}

TEST_F(CancelRaceTest, APreemptedRunThatNeverStartedIsRequeued) {
  Connect();
  auto id = Submit();
  auto run = Place(id);
  ASSERT_TRUE(
      control::RequestStop(*store_, id, model::StopCause::kPreempted, clock_.NowMs()).has_value());
  ASSERT_TRUE(controller_->RunPass().has_value());
  auto job = Job(id);
  ASSERT_FALSE(job.runs.empty());
  EXPECT_EQ(job.runs.front().state, model::RunState::kExited);
  EXPECT_EQ(job.runs.front().stopped_for, model::StopCause::kPreempted);
  // Back in the queue for a new attempt (the pass may already have placed it).
  EXPECT_NE(job.state, model::JobState::kFailed);
  EXPECT_FALSE(model::IsTerminal(job.state));
}

}  // namespace
}  // namespace berth::server
