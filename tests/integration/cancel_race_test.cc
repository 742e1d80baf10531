// A cancel that lands after a job's run is placed but before its StartRun
// reached the agent. The window is forced, not timed: the node's agent is
// killed after registering, so berthd places the job on the still-Ready node
// but has no stream to send the start order on. The job must end Cancelled
// with the run settled as never started, also when berthd restarts in the
// window, and the agent that comes back must not start it.
#include <fmt/format.h>
#include <signal.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

class CancelRaceTest : public IntegrationTest {
 protected:
  // berthd alone with a lease long enough that a killed agent's node stays
  // Ready (and placeable) for the whole test, and lost-node handling far away.
  Berthd& StartBerthd() {
    Berthd& berthd = NewBerthd(ControlPlaneOnly({"--lease", "120s", "--node-lost-grace", "600s"}));
    EXPECT_TRUE(berthd.Start()) << berthd.log();
    return berthd;
  }
  bool Connected(const Berthd& berthd, bool want) {
    return WaitFor(
        [&] {
          auto nodes = berthd.Nodes();
          for (const auto& n : nodes) {
            if (n.value("name", "") == "race-node") return n.value("connected", !want) == want;
          }
          return false;
        },
        20s);
  }
  // An agent registers race-node (2 GPUs, `cluster_`) and is killed; `spec`
  // is then placed there with no stream to send its start order on. The
  // job's id, or 0 (with a test failure) when the window was not reached.
  std::int64_t PlacedWithNoAgent(Berthd& berthd, const json& spec) {
    cluster_ = WriteCluster("race-node", 2);
    Process* agent = &NewAgent(berthd, dir_ / "agent", cluster_, "agent.log");
    if (!berthd.WaitForNode("Ready", 20s, "race-node")) {
      ADD_FAILURE() << berthd.Nodes().dump(2);
      return 0;
    }
    agent->Kill(SIGKILL);  // without a word: berthd keeps the node Ready
    if (!agent->Wait(10s).has_value() || !Connected(berthd, false)) {
      ADD_FAILURE() << berthd.Nodes().dump(2);
      return 0;
    }
    auto id = berthd.Submit(spec);
    if (id <= 0 || !berthd.WaitForState(id, "Scheduled", 20s)) {
      ADD_FAILURE() << berthd.Job(id).dump(2);
      return 0;
    }
    return id;
  }
  // The agent of race-node again, on the same data dir.
  void RestartAgent(const Berthd& berthd) {
    NewAgent(berthd, dir_ / "agent", cluster_, "agent.log");
  }
  std::string RunId(const Berthd& berthd, std::int64_t id) {
    auto job = berthd.Job(id);
    if (job["runs"].empty()) return "";
    return job["runs"][0].value("run_id", "");
  }

 private:
  std::filesystem::path cluster_;
};

std::string Timeline(const json& job) {
  std::string out;
  for (const auto& e : job["timeline"]) out += e.value("message", "") + "\n";
  return out;
}

TEST_F(CancelRaceTest, ACancelBeforeTheStartOrderEndsTheJobCancelled) {
  Berthd& berthd = StartBerthd();
  auto id = PlacedWithNoAgent(berthd, JobSpecJson("race", Sh("echo STARTED-MARKER; sleep 600"), 1));
  ASSERT_GT(id, 0);
  const std::string run = RunId(berthd, id);
  ASSERT_FALSE(run.empty()) << berthd.Job(id).dump(2);

  auto r = Cli(berthd, {"cancel", std::to_string(id)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Far sooner than any lease or lost-node grace could end it.
  ASSERT_TRUE(berthd.WaitForState(id, "Cancelled", 10s)) << berthd.Job(id).dump(2);
  auto job = berthd.Job(id);
  ASSERT_EQ(job["runs"].size(), 1U) << job.dump(2);
  EXPECT_EQ(job["runs"][0]["state"], "Exited") << job.dump(2);
  EXPECT_EQ(job["runs"][0]["stopped_for"], "cancelled") << job.dump(2);
  EXPECT_TRUE(job["runs"][0]["started_at_ms"].is_null()) << job.dump(2);
  EXPECT_NE(Timeline(job).find("never started"), std::string::npos) << job.dump(2);
  // `berth job ID` explains it.
  auto shown = Cli(berthd, {"job", std::to_string(id)});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("never started"), std::string::npos) << shown.out;

  // The agent comes back: the run was never started there and is not now.
  RestartAgent(berthd);
  ASSERT_TRUE(Connected(berthd, true)) << berthd.Nodes().dump(2);
  auto after = berthd.Submit(JobSpecJson("after", Sh("true"), 1));
  ASSERT_TRUE(berthd.WaitForTerminal(after, 30s)) << berthd.Job(after).dump(2);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "agent" / "runs" / run));
  const std::string agent_log = ReadFile(dir_ / "agent.log");
  EXPECT_EQ(agent_log.find("STARTED-MARKER"), std::string::npos);
  EXPECT_EQ(agent_log.find("cannot stop run"), std::string::npos) << agent_log;
  EXPECT_EQ(berthd.JobState(id), "Cancelled");
  EXPECT_EQ(CountEvents(berthd.Job(id), "Exited"), 1) << berthd.Job(id).dump(2);
}

TEST_F(CancelRaceTest, BerthdRestartedInTheWindowSettlesOnceTheAgentReports) {
  Berthd& berthd = StartBerthd();
  auto id = PlacedWithNoAgent(berthd, JobSpecJson("race", Sh("sleep 600"), 1));
  ASSERT_GT(id, 0);

  // berthd restarts: it cannot know whether its predecessor sent the start,
  // so it must hear from the agent first.
  berthd.Kill();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  auto r = Cli(berthd, {"cancel", std::to_string(id)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(berthd.WaitForTerminal(id, 1s)) << berthd.Job(id).dump(2);

  RestartAgent(berthd);
  ASSERT_TRUE(berthd.WaitForState(id, "Cancelled", 20s)) << berthd.Job(id).dump(2);
  auto job = berthd.Job(id);
  EXPECT_TRUE(job["runs"][0]["started_at_ms"].is_null()) << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Exited"), 1) << job.dump(2);
}

}  // namespace
}  // namespace berth::it
