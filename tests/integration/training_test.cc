// Training jobs across agents: a gang spread over two berth-agent processes
// gets one consistent torchrun environment; when one agent dies, its node's
// runs are declared lost after the grace period, the whole gang stops and
// follows its retry policy (retried with a backoff when the policy names
// node_lost, failed at once when it does not).
#include <signal.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

// One berthd and two agents, a and b, each a simulated node of `gpus` GPUs.
class TwoAgentsTest : public IntegrationTest {
 protected:
  Berthd& Start(int gpus, std::vector<std::string> extra = {},
                const std::vector<std::string>& agent_extra = {}) {
    Berthd& berthd = NewBerthd(ControlPlaneOnly(std::move(extra)));
    EXPECT_TRUE(berthd.Start()) << berthd.log();
    for (const std::string node : {"a", "b"}) {
      auto file = dir_ / ("cluster-" + node + ".yaml");
      std::filesystem::copy_file(WriteCluster(node, gpus), file,
                                 std::filesystem::copy_options::overwrite_existing);
      clusters_[node] = file;
      agent_[node] = &NewAgent(berthd, dir_ / ("agent-" + node), file, "agent-" + node + ".log", {},
                               agent_extra);
    }
    EXPECT_TRUE(berthd.WaitForNode("Ready", 20s, "a")) << berthd.Nodes().dump(2);
    EXPECT_TRUE(berthd.WaitForNode("Ready", 20s, "b")) << berthd.Nodes().dump(2);
    return berthd;
  }

  // KEY=VALUE lines as a map.
  static std::map<std::string, std::string> ReadEnv(const std::filesystem::path& file) {
    std::map<std::string, std::string> env;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return env;
  }

  std::map<std::string, std::filesystem::path> clusters_;
  std::map<std::string, Process*> agent_;
};

TEST_F(TwoAgentsTest, AGangOnTwoNodesGetsOneConsistentTorchrunEnvironment) {
  Berthd& berthd = Start(2);
  ASSERT_FALSE(HasFailure());
  const auto out = dir_ / "env";
  OwnedByTenant(out);
  // Four one-GPU replicas on two nodes of two GPUs: two ranks per node.
  const std::string dump =
      "env | grep -E '^(WORLD_SIZE|RANK|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|NODE_RANK|"
      "MASTER_ADDR|MASTER_PORT|BERTH_NNODES|BERTH_NODE_RANK|BERTH_REPLICA|CUDA_VISIBLE_DEVICES)=' "
      "> " +
      out.string() + "/replica-$BERTH_REPLICA.env";
  std::string error;
  auto id = berthd.Submit(JobSpecJson("ddp", Sh(dump), 1, {{"replicas", 4}}), &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.Job(id).dump(2);
  json job = berthd.Job(id);
  ASSERT_EQ(job["state"], "Succeeded") << job.dump(2);

  std::map<int, std::string> node_of;  // replica -> node
  for (const auto& r : job["placement"]) node_of[r["replica"].get<int>()] = r["node"];
  ASSERT_EQ(node_of.size(), 4U) << job.dump(2);

  std::set<std::string> ranks;
  std::set<std::string> masters;
  std::map<std::string, std::set<std::string>> local_ranks;  // node -> LOCAL_RANKs
  std::map<std::string, std::set<std::string>> node_ranks;   // node -> NODE_RANKs
  std::map<std::string, std::set<int>> rank_by_node;
  for (const auto& [replica, node] : node_of) {
    auto env = ReadEnv(out / ("replica-" + std::to_string(replica) + ".env"));
    ASSERT_EQ(env["BERTH_REPLICA"], std::to_string(replica));
    EXPECT_EQ(env["WORLD_SIZE"], "4") << replica;
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2") << replica;
    EXPECT_EQ(env["BERTH_NNODES"], "2") << replica;
    EXPECT_EQ(env["GROUP_RANK"], env["NODE_RANK"]) << replica;
    EXPECT_EQ(env["BERTH_NODE_RANK"], env["NODE_RANK"]) << replica;
    EXPECT_FALSE(env["CUDA_VISIBLE_DEVICES"].empty()) << replica;
    ranks.insert(env["RANK"]);
    masters.insert(env["MASTER_ADDR"] + ":" + env["MASTER_PORT"]);
    local_ranks[node].insert(env["LOCAL_RANK"]);
    node_ranks[node].insert(env["NODE_RANK"]);
    rank_by_node[node].insert(std::stoi(env["RANK"]));
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  ASSERT_EQ(masters.size(), 1U) << "every rank must meet at one master";
  ASSERT_EQ(local_ranks.size(), 2U) << job.dump(2);
  std::set<std::string> seen_node_ranks;
  for (const auto& [node, locals] : local_ranks) {
    EXPECT_EQ(locals, (std::set<std::string>{"0", "1"})) << node;
    ASSERT_EQ(node_ranks[node].size(), 1U) << node;
    seen_node_ranks.insert(*node_ranks[node].begin());
    // Ranks are contiguous per node: RANK = NODE_RANK * 2 + LOCAL_RANK.
    const int nr = std::stoi(*node_ranks[node].begin());
    EXPECT_EQ(rank_by_node[node], (std::set<int>{nr * 2, nr * 2 + 1})) << node;
  }
  EXPECT_EQ(seen_node_ranks, (std::set<std::string>{"0", "1"}));
}

TEST_F(TwoAgentsTest, KillingOneAgentStopsTheWholeGangAndItsRetryPolicyDecides) {
  // Short fencing times too: berthd presumes the dead node's runs lost only
  // after its agent would have fenced them (docs/operations.md, "Fencing").
  Berthd& berthd = Start(4,
                         {"--lease", "1s", "--heartbeat", "200ms", "--node-lost-grace", "1s",
                          "--agent-fence-grace", "1s", "--stop-grace", "1s"},
                         {"--fence-grace", "1s"});
  ASSERT_FALSE(HasFailure());
  const auto done = dir_ / "done";
  const auto log = dir_ / "starts.log";
  // Runs until `done` exists; records each start with its restart count.
  const std::string script = "echo \"$BERTH_REPLICA $BERTH_RESTART_COUNT $(hostname)\" >> " +
                             log.string() + "; trap 'exit 0' TERM; while [ ! -e " + done.string() +
                             " ]; do sleep 0.1; done";
  // Three GPUs per replica on nodes of four: one replica per node.
  std::string error;
  auto gang = berthd.Submit(
      JobSpecJson("gang", Sh(script), 3,
                  {{"replicas", 2}, {"retry", {{"max_attempts", 3}, {"backoff", "1s"}}}}),
      &error);
  ASSERT_NE(gang, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(gang, "Running", 30s)) << berthd.Job(gang).dump(2);
  // One GPU left on each node: a job whose policy does not retry node_lost.
  auto single = berthd.Submit(
      JobSpecJson("single", Sh(script), 1,
                  {{"retry", {{"max_attempts", 3}, {"on", json::array({"user_code"})}}}}),
      &error);
  ASSERT_NE(single, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(single, "Running", 30s)) << berthd.Job(single).dump(2);
  const std::string victim = berthd.Job(single)["placement"][0]["node"];

  agent_[victim]->Kill(SIGKILL);
  ASSERT_TRUE(agent_[victim]->Wait(10s).has_value());

  // The lease lapses (1 s), then the time its agent would take to fence
  // them (about 10 s): the runs on the dead node are lost, the gang's other
  // replica is stopped, and the gang backs off before its next attempt.
  json g;
  ASSERT_TRUE(WaitFor(
      [&] {
        g = berthd.Job(gang);
        return g["reason"]["code"] == "Retrying" || CountEvents(g, "Retrying") > 0;
      },
      30s))
      << g.dump(2);
  ASSERT_TRUE(berthd.WaitForTerminal(single, 20s)) << berthd.Job(single).dump(2);
  json s = berthd.Job(single);
  EXPECT_EQ(s["state"], "Failed") << s.dump(2);
  EXPECT_EQ(s["reason"]["code"], "RunLost") << s.dump(2);
  ASSERT_TRUE(s["failure"].is_object()) << s.dump(2);
  EXPECT_EQ(s["failure"]["class"], "node_lost") << s.dump(2);

  g = berthd.Job(gang);
  EXPECT_EQ(CountEvents(g, "Retrying"), 1) << g.dump(2);
  EXPECT_EQ(g["failures"], 1) << g.dump(2);
  // Both replicas of attempt 1 ended: one lost, the other stopped with it.
  // With one node left the gang cannot be placed again yet: the placement
  // shown is still attempt 1's.
  std::set<std::string> stopped_for;
  for (const auto& r : g["placement"]) {
    ASSERT_EQ(r["attempt"], 1) << g.dump(2);
    stopped_for.insert(r["stopped_for"].get<std::string>());
  }
  EXPECT_EQ(stopped_for, (std::set<std::string>{"lost", "gang"})) << g.dump(2);

  // With one node the gang cannot be placed; the dead agent comes back on
  // its data dir, is told to stop its stale run, and the gang starts again.
  agent_[victim] =
      &NewAgent(berthd, dir_ / ("agent-" + victim), clusters_[victim], "agent-" + victim + ".log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, victim));
  ASSERT_TRUE(WaitFor(
      [&] {
        g = berthd.Job(gang);
        if (g["state"] != "Running" || g["placement"].size() != 2) return false;
        for (const auto& r : g["placement"]) {
          if (r["attempt"] != 2 || r["state"] != "Running") return false;
        }
        return true;
      },
      30s))
      << g.dump(2);
  WriteFile(done, "");
  ASSERT_TRUE(berthd.WaitForTerminal(gang, 30s)) << berthd.Job(gang).dump(2);
  g = berthd.Job(gang);
  EXPECT_EQ(g["state"], "Succeeded") << g.dump(2);

  // Each replica started twice: restart count 0, then 1.
  std::ifstream in(log);
  std::multiset<std::string> starts;
  std::string replica;
  std::string restarts;
  std::string host;
  while (in >> replica >> restarts >> host) starts.insert(replica + "/" + restarts);
  EXPECT_EQ(starts.count("0/1"), 1U);
  EXPECT_EQ(starts.count("1/1"), 1U);
}

// A GPU hardware error on one simulated GPU (an injected Xid): Berth
// cordons that GPU only, stops the job on it, raises an alert, and the job's
// retry policy places it on another GPU. An admin uncordons after the fault
// clears; drain and uncordon move a job off a node and back, without
// counting a failure.
TEST_F(IntegrationTest, AnXidCordonsThatGpuAndItsJobRestartsOnAnother) {
  Berthd& berthd = NewBerthd(ControlPlaneOnly());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const auto faults = dir_ / "faults";
  agents_.push_back(std::make_unique<Process>(
      BinDir() / "berth-agent",
      std::vector<std::string>{"--server", berthd.agent_address(), "--data-dir",
                               (dir_ / "agent").string(), "--simulate",
                               WriteCluster("x", 2).string(), "--sim-faults", faults.string(),
                               "--health-interval", "200ms", "--insecure"},
      dir_ / "agent.log"));
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "x"));

  const auto done = dir_ / "done";
  const auto starts = dir_ / "starts";
  std::string error;
  auto id = berthd.Submit(JobSpecJson("train",
                                      Sh("echo \"$CUDA_VISIBLE_DEVICES $BERTH_RESTART_COUNT\" >> " +
                                         starts.string() + "; trap 'exit 0' TERM; while [ ! -e " +
                                         done.string() + " ]; do sleep 0.1; done"),
                                      1, {{"retry", {{"backoff", "1s"}}}}),
                          &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.Job(id).dump(2);
  const int bad = berthd.Job(id)["placement"][0]["gpus"][0];
  const int good = 1 - bad;

  WriteFile(faults, std::to_string(bad) + " Xid 79: GPU has fallen off the bus\n");
  json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = berthd.Job(id);
        return job["state"] == "Running" && job["placement"][0]["attempt"] == 2 &&
               job["placement"][0]["state"] == "Running";
      },
      30s))
      << job.dump(2);
  EXPECT_EQ(job["placement"][0]["gpus"][0], good) << job.dump(2);
  EXPECT_EQ(CountEvents(job, "GpuFailed"), 1) << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Retrying"), 1) << job.dump(2);
  EXPECT_EQ(job["failures"], 1) << job.dump(2);

  // Only that GPU is cordoned, by Berth, with the error as its reason.
  auto gpus = Cli(berthd, {"gpus", "-o", "json"});
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  const json gpu_list = json::parse(gpus.out)["gpus"];
  for (const auto& g : gpu_list) {
    if (g["index"] == bad) {
      EXPECT_EQ(g["health"], "unhealthy") << g.dump(2);
      ASSERT_TRUE(g["cordon"].is_object()) << g.dump(2);
      EXPECT_EQ(g["cordon"]["by"], "berth") << g.dump(2);
      EXPECT_EQ(g["cordon"]["automatic"], true) << g.dump(2);
      EXPECT_NE(g["cordon"]["reason"].get<std::string>().find("Xid 79"), std::string::npos);
    } else {
      EXPECT_TRUE(g["cordon"].is_null()) << g.dump(2);
    }
  }
  auto alerts = Cli(berthd, {"alerts", "-o", "json"});
  ASSERT_EQ(alerts.exit_code, 0) << alerts.err;
  json open = json::parse(alerts.out)["alerts"];
  ASSERT_EQ(open.size(), 1U) << open.dump(2);
  EXPECT_EQ(open[0]["kind"], "gpu_hardware");
  EXPECT_EQ(open[0]["gpu"], bad);

  // The fault clears; the GPU stays cordoned until an admin says otherwise.
  std::filesystem::remove(faults);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto n = Cli(berthd, {"node", "x", "-o", "json"});
        return n.exit_code == 0 && n.out.find("GpuHealthy") != std::string::npos;
      },
      10s));
  auto still = Cli(berthd, {"gpus", "-o", "json"});
  EXPECT_TRUE(json::parse(still.out)["gpus"][bad]["cordon"].is_object()) << still.out;
  auto un = Cli(berthd, {"uncordon", "x/" + std::to_string(bad)});
  ASSERT_EQ(un.exit_code, 0) << un.err;
  EXPECT_NE(un.out.find("uncordoned"), std::string::npos) << un.out;
  alerts = Cli(berthd, {"alerts", "-o", "json"});
  EXPECT_TRUE(json::parse(alerts.out)["alerts"].empty()) << alerts.out;
  auto node = Cli(berthd, {"node", "x"});
  ASSERT_EQ(node.exit_code, 0) << node.err;
  EXPECT_NE(node.out.find("GpuCordoned"), std::string::npos) << node.out;
  EXPECT_NE(node.out.find("GpuUncordoned"), std::string::npos) << node.out;

  // Drain: the job stops and waits (the node takes nothing new), with no
  // failure counted; uncordon lets it run again.
  auto drain = Cli(berthd, {"drain", "x", "--reason", "kernel upgrade"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = berthd.Job(id);
        return job["state"] == "Pending" && job["reason"]["code"] == "NoNodeFits";
      },
      20s))
      << job.dump(2);
  EXPECT_EQ(job["reason"]["counts"].value("node_cordoned", 0), 1) << job.dump(2);
  EXPECT_EQ(job["failures"], 1) << job.dump(2);
  auto nodes = Cli(berthd, {"nodes"});
  EXPECT_NE(nodes.out.find("Ready,Draining"), std::string::npos) << nodes.out;
  ASSERT_EQ(Cli(berthd, {"uncordon", "x"}).exit_code, 0);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 20s)) << berthd.Job(id).dump(2);
  WriteFile(done, "");
  ASSERT_TRUE(berthd.WaitForTerminal(id, 20s));
  job = berthd.Job(id);
  EXPECT_EQ(job["state"], "Succeeded") << job.dump(2);
  EXPECT_EQ(job["placement"][0]["attempt"], 3) << job.dump(2);
  // Each attempt saw its GPU and its restart count: the failed GPU, the other
  // one after the Xid, and again after the drain.
  std::ifstream in(starts);
  std::vector<std::string> seen;
  for (std::string line; std::getline(in, line);) seen.push_back(line);
  ASSERT_EQ(seen.size(), 3U);
  EXPECT_EQ(seen[0], std::to_string(bad) + " 0");
  EXPECT_EQ(seen[1], std::to_string(good) + " 1");
  EXPECT_EQ(seen[2].substr(seen[2].find(' ')), " 2");

  // Bad targets are refused with the fix.
  auto typo = Cli(berthd, {"cordon", "x/nine"});
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_NE(typo.err.find("NODE/GPU-INDEX"), std::string::npos) << typo.err;
  auto missing = Cli(berthd, {"cordon", "x/7"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no GPU 7"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace berth::it
