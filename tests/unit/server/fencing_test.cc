// berthd's side of fencing on a manual clock: a run on a node that stopped
// heartbeating is presumed lost only once the node's agent has certainly
// stopped it (model::PresumeGoneAfterMs: the lease, the agents' fence grace,
// two of the run's stop graces and a margin), however short
// --node-lost-grace is; and a run the agent fenced itself is a node_lost
// failure that its retry policy retries.
#include "model/fencing.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "control/agent_session.h"
#include "control/controller.h"
#include "control/lifecycle.h"
#include "sched/fifo_scheduler.h"
#include "unit/server/controller_fixture.h"

namespace berth::server {
namespace {

class NullSession : public AgentSession {
 public:
  bool Send(const berth::v1::ServerMessage&) override { return true; }
  const std::string& node() const override { return node_; }

 private:
  std::string node_ = "n1";
};

class FencingTest : public ControllerFixture<sched::FifoScheduler> {
 protected:
  FencingTest() : ControllerFixture(1'000'000) {}

  void Connect() {
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
    ASSERT_TRUE(controller_->OnRegister(reg, std::make_shared<NullSession>()).has_value());
  }
  // A running one-GPU job on GPU `gpu` of n1; its run id.
  std::string Running(std::uint32_t gpu, std::int64_t checkpoint_grace_ms = 0) {
    model::JobSpec s;
    s.name = "fenced";
    s.command = {"sleep", "600"};
    s.resources.gpus = 1;
    s.retry.backoff_ms = 1'000;
    if (checkpoint_grace_ms > 0) {
      s.checkpoint.enabled = true;
      s.checkpoint.grace_ms = checkpoint_grace_ms;
    }
    auto id = store_->CreateJob(s, clock_.NowMs());
    EXPECT_TRUE(id.has_value()) << id.error().message;
    sched::Plan plan;
    plan.placements.push_back({*id, {{0, "n1", {gpu}}}});
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, clock_.NowMs()).has_value());
    const std::string run = store_->GetJob(*id)->runs.at(0).run_id;
    EXPECT_TRUE(
        control::MarkRunStarted(*store_, run, 4242, clock_.NowMs(), clock_.NowMs()).has_value());
    return run;
  }
  store::RunRecord Run(const std::string& run_id) { return **store_->GetRun(run_id); }
};

TEST(FenceTimingTest, TheDefaultsPresumeASilentNodesRunsLostAfterSeventySeconds) {
  // berthd's defaults: --lease 10s, --heartbeat 1s, --agent-fence-grace 30s,
  // --node-lost-grace 60s, --stop-grace 10s.
  const model::FenceTiming defaults{10'000, 1'000, model::kDefaultFenceGraceMs, 60'000};
  EXPECT_EQ(model::FenceMarginMs(defaults), 8'000);
  // 30 s + 2 x 10 s + 8 s = 58 s: the node-lost grace (60 s) is the longer.
  EXPECT_EQ(model::PresumeGoneAfterMs(defaults, 10'000), 70'000);
  // A job with a 2-minute checkpoint grace waits for its agent to finish
  // stopping it: 30 s + 2 x 120 s + 8 s after the lease.
  EXPECT_EQ(model::PresumeGoneAfterMs(defaults, 120'000), 10'000 + 278'000);
  // However short the node-lost grace, never before the agent has fenced.
  const model::FenceTiming hasty{10'000, 1'000, model::kDefaultFenceGraceMs, 0};
  EXPECT_EQ(model::PresumeGoneAfterMs(hasty, 10'000), 10'000 + 58'000);
}

TEST_F(FencingTest, ARunOnASilentNodeIsLostOnlyOnceItsAgentHasFencedIt) {
  Connect();
  const TimeMs last_heartbeat = clock_.NowMs();
  const auto plain = Running(0);
  const auto patient = Running(1, /*checkpoint_grace_ms=*/120'000);
  ControllerOptions o;  // the fixture's controller runs on the defaults
  const model::FenceTiming timing{o.lease_ms, o.heartbeat_interval_ms, o.agent_fence_grace_ms,
                                  o.node_lost_grace_ms};
  const TimeMs plain_after = model::PresumeGoneAfterMs(timing, o.stop_grace_ms);
  const TimeMs patient_after = model::PresumeGoneAfterMs(timing, 120'000);

  clock_.Set(last_heartbeat + plain_after);
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Run(plain).state, model::RunState::kRunning);

  clock_.Set(last_heartbeat + plain_after + 1);
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Run(plain).state, model::RunState::kExited);
  EXPECT_EQ(Run(plain).stopped_for, model::StopCause::kLost);
  EXPECT_EQ(Run(patient).state, model::RunState::kRunning)
      << "its agent may still be waiting out its checkpoint grace";

  clock_.Set(last_heartbeat + patient_after);
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Run(patient).state, model::RunState::kRunning);
  clock_.Set(last_heartbeat + patient_after + 1);
  ASSERT_TRUE(controller_->RunPass().has_value());
  EXPECT_EQ(Run(patient).stopped_for, model::StopCause::kLost);
}

TEST_F(FencingTest, AFencedExitIsANodeLostFailureThatIsRetried) {
  Connect();
  const auto run = Running(0);
  berth::v1::RunExited exit;
  exit.set_run_id(run);
  exit.set_signal(15);
  exit.set_stopped_for("fenced");
  exit.set_clean_stop(true);
  exit.set_started_at_ms(clock_.NowMs());
  exit.set_ended_at_ms(clock_.NowMs());
  ASSERT_TRUE(controller_->OnRunExited("n1", exit).has_value());

  EXPECT_EQ(Run(run).stopped_for, model::StopCause::kFenced);
  EXPECT_EQ(Run(run).failure_class, "node_lost");
  auto job = *store_->GetJob(Run(run).job_id);
  EXPECT_EQ(job.state, model::JobState::kPending) << "retried: node_lost is retried by default";
  EXPECT_EQ(job.failures, 1U);
  bool explained = false;
  for (const auto& e : job.timeline) {
    explained |= e.event == "Retrying" && e.message.find("fenced") != std::string::npos;
  }
  EXPECT_TRUE(explained) << "the retry must say its agent fenced the run";
}

}  // namespace
}  // namespace berth::server
