// A standalone berth-agent killed with -9 while its job runs: the job keeps
// running under its shim, the next agent on the same data dir reattaches to
// it, and the job succeeds having started exactly once.
#include <fmt/format.h>
#include <signal.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST_F(IntegrationTest, AgentRestart) {
  Berthd& berthd = NewBerthd(ControlPlaneOnly());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  auto cluster = WriteCluster("restart-node");
  Process* agent = &NewAgent(berthd, dir_ / "agent", cluster, "agent.log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "restart-node")) << berthd.Nodes().dump(2);

  auto id = berthd.Submit(JobSpecJson("survivor", Sh("echo started-MARKER; sleep 4"), 1));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.JobState(id);
  auto pid = berthd.Job(id).at("placement").at(0).at("pid").get<pid_t>();

  agent->Kill(SIGKILL);
  ASSERT_TRUE(agent->Wait(10s).has_value());
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died with its agent";
  agent = &NewAgent(berthd, dir_ / "agent", cluster, "agent.log");

  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.JobState(id);
  auto job = berthd.Job(id);
  EXPECT_EQ(job.at("state"), "Succeeded") << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Started"), 1) << job.dump(2);
  auto logs = berthd.http().Get(fmt::format("/v1/jobs/{}/logs", id));
  ASSERT_EQ(logs.status, 200);
  EXPECT_EQ(Count(logs.text, "started-MARKER"), 1U) << "log: '" << logs.text << "'";
}

}  // namespace
}  // namespace berth::it
