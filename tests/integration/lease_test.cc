// Node leases with a separate berth-agent: a frozen agent's node goes
// NotReady within the lease and comes back when it heartbeats again; an agent
// killed and started again on its data dir registers the node again.
#include <signal.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

TEST_F(IntegrationTest, LeaseLapsesAndRecovers) {
  Berthd& berthd = NewBerthd(ControlPlaneOnly({"--lease", "1s", "--heartbeat", "200ms"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  auto cluster = WriteCluster("lease-node");
  Process* agent = &NewAgent(berthd, dir_ / "agent", cluster, "agent.log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "lease-node")) << berthd.Nodes().dump(2);

  agent->Kill(SIGSTOP);
  EXPECT_TRUE(berthd.WaitForNode("NotReady", 15s, "lease-node")) << berthd.Nodes().dump(2);
  agent->Kill(SIGCONT);
  EXPECT_TRUE(berthd.WaitForNode("Ready", 15s, "lease-node")) << berthd.Nodes().dump(2);

  agent->Kill(SIGKILL);
  ASSERT_TRUE(agent->Wait(10s).has_value());
  EXPECT_TRUE(berthd.WaitForNode("NotReady", 15s, "lease-node")) << berthd.Nodes().dump(2);
  agent = &NewAgent(berthd, dir_ / "agent", cluster, "agent.log");
  EXPECT_TRUE(berthd.WaitForNode("Ready", 20s, "lease-node")) << berthd.Nodes().dump(2);
  auto nodes = berthd.Nodes();
  ASSERT_EQ(nodes.size(), 1U) << nodes.dump(2);
  EXPECT_EQ(nodes[0].value("connected", false), true) << nodes.dump(2);
  EXPECT_EQ(nodes[0].value("gpus_total", 0), 8) << nodes.dump(2);
}

}  // namespace
}  // namespace berth::it
