#include "agent/sim_cluster.h"

#include <gtest/gtest.h>

#include "agent/shared_gpus.h"
#include "agent/sim_provider.h"
#include "proto_convert/node.h"
#include "test_util.h"

namespace berth::agent {
namespace {

constexpr const char* kCluster = R"(
nodes:
  - name: gpu-a1
    labels: {pool: training, zone: a}
    taints: [{key: dedicated, value: inference, effect: NoSchedule}]
    cpus: 64
    memory: 512Gi
    gpus:
      model: H100-80GB
      memory: 80Gi
      count: 8
      nvlink_islands: [[0,1,2,3],[4,5,6,7]]
      numa_nodes: 2
      unhealthy: {3: "Xid 79"}
  - name: cpu-1
    hostname: cpu-1.example
    cpus: 16
    memory: 64Gi
  - name: pcie-1
    cpus: 32
    memory: 256Gi
    driver_version: "550.54.15"
    gpus: {model: L40S-48GB, memory: 48Gi, count: 3, nvlink_islands: [[0, 1]]}
)";

TEST(SimulatedCluster, ParsesNodesIslandsHealthAndTaints) {
  auto nodes = ParseSimulatedCluster(kCluster);
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 3u);

  const auto& a1 = (*nodes)[0];
  EXPECT_EQ(a1.name, "gpu-a1");
  EXPECT_EQ(a1.hostname, "gpu-a1");
  EXPECT_EQ(a1.labels.at("pool"), "training");
  ASSERT_EQ(a1.taints.size(), 1u);
  EXPECT_EQ(a1.taints[0].key, "dedicated");
  EXPECT_EQ(a1.taints[0].value, "inference");
  EXPECT_EQ(a1.taints[0].effect, "NoSchedule");
  EXPECT_EQ(a1.cpus, 64u);
  EXPECT_EQ(a1.memory_bytes, 512ULL << 30);
  EXPECT_EQ(a1.gpu_provider, "simulated");
  EXPECT_EQ(a1.driver_version, "sim");
  EXPECT_EQ(a1.cuda_version, "12.4");
  ASSERT_EQ(a1.gpus.size(), 8u);
  for (std::uint32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(a1.gpus[i].index, i);
    EXPECT_EQ(a1.gpus[i].uuid, "SIM-gpu-a1-" + std::to_string(i));
    EXPECT_EQ(a1.gpus[i].model, "H100-80GB");
    EXPECT_EQ(a1.gpus[i].memory_bytes, 80ULL << 30);
    EXPECT_EQ(a1.gpus[i].nvlink_island, i < 4 ? 0u : 1u);
    EXPECT_EQ(a1.gpus[i].nvlink_peers.size(), 3u);
    EXPECT_EQ(a1.gpus[i].numa_node, i < 4 ? 0 : 1);
  }
  EXPECT_EQ(a1.gpus[3].health, model::Health::kUnhealthy);
  EXPECT_EQ(a1.gpus[3].health_detail, "Xid 79");
  EXPECT_EQ(a1.gpus[2].health, model::Health::kHealthy);

  const auto& cpu = (*nodes)[1];
  EXPECT_EQ(cpu.hostname, "cpu-1.example");
  EXPECT_TRUE(cpu.gpus.empty());

  const auto& pcie = (*nodes)[2];
  EXPECT_EQ(pcie.driver_version, "550.54.15");
  ASSERT_EQ(pcie.gpus.size(), 3u);
  EXPECT_EQ(pcie.gpus[0].nvlink_island, 0u);
  EXPECT_EQ(pcie.gpus[1].nvlink_island, 0u);
  EXPECT_EQ(pcie.gpus[2].nvlink_island, 1u);  // unlisted: alone
  EXPECT_TRUE(pcie.gpus[2].nvlink_peers.empty());
  EXPECT_EQ(pcie.gpus[0].numa_node, -1);
}

TEST(SimulatedCluster, DefaultIslandIsAllGpusAndUuidsAreStable) {
  const char* yaml =
      "nodes: [{name: n1, cpus: 8, memory: 64Gi, "
      "gpus: {model: A100-40GB, memory: 40Gi, count: 4}}]";
  auto first = ParseSimulatedCluster(yaml);
  auto second = ParseSimulatedCluster(yaml);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*first)[0].gpus[i].nvlink_island, 0u);
    EXPECT_EQ((*first)[0].gpus[i].uuid, (*second)[0].gpus[i].uuid);
  }
}

struct BadCase {
  const char* yaml;
  const char* field;    // expected Error::field
  const char* message;  // expected to appear in Error::message
};

class SimulatedClusterErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(SimulatedClusterErrors, NameTheFieldAndReturnNothing) {
  auto nodes = ParseSimulatedCluster(GetParam().yaml);
  ASSERT_FALSE(nodes.has_value());
  EXPECT_EQ(nodes.error().code, Code::kInvalidArgument);
  EXPECT_EQ(nodes.error().field, GetParam().field) << nodes.error().message;
  EXPECT_NE(nodes.error().message.find(GetParam().message), std::string::npos)
      << nodes.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SimulatedClusterErrors,
    ::testing::Values(
        BadCase{"nodes:\n  - name: a\n    cpus: 1\n    memory: 1Gi\n    colour: red\n",
                "nodes[0].colour", "unknown field 'colour'; allowed: name, hostname"},
        BadCase{"nodes:\n  - name: a\n    cpus: 1\n    memory: 1Gi\n  - name: b\n    cpus: 1\n"
                "    memory: 1Gi\n    gpus: {model: H100-80GB, memory: 80Gi, count: -1}\n",
                "nodes[1].gpus.count", "line 8"},
        BadCase{"nodes:\n  - name: a\n    cpus: 1\n    memory: 1Gi\n"
                "    gpus: {model: H100-80GB, memory: 80Gi, count: 65}\n",
                "nodes[0].gpus.count", "integer 0..64, got '65'"},
        BadCase{
            "nodes:\n  - {name: a, cpus: 1, memory: 1Gi}\n  - {name: a, cpus: 2, memory: 1Gi}\n",
            "nodes[1].name", "duplicate node name 'a'"},
        BadCase{"nodes:\n  - name: a\n    cpus: [1\n", "",
                "line 4, column 1: end of sequence flow not found"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, gpus: {model: X, memory: 1Gi, "
                "count: 4, nvlink_islands: [[0, 1], [1, 2]]}}\n",
                "nodes[0].gpus.nvlink_islands[1][0]", "GPU 1 is in two islands"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, gpus: {model: X, memory: 1Gi, "
                "count: 2, unhealthy: {2: Xid 79}}}\n",
                "nodes[0].gpus.unhealthy.2", "integer 0..1"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, taints: [{key: k, effect: Never}]}\n",
                "nodes[0].taints[0].effect", "NoSchedule or PreferNoSchedule"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 80GB}\n", "nodes[0].memory", "Gi"},
        BadCase{"nodes:\n  - {name: a, memory: 1Gi}\n", "nodes[0]", "cpus is required"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, gpus: {count: 2}}\n", "nodes[0].gpus",
                "model is required"},
        BadCase{"nodes: []\n", "nodes", "non-empty list"},
        BadCase{"clusters: []\n", "clusters", "unknown field 'clusters'; allowed: nodes"},
        BadCase{"nodes:\n  - {name: 'bad name', cpus: 1, memory: 1Gi}\n", "nodes[0].name",
                "letters, digits"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, shared_gpus: [2], gpus: {model: X, "
                "memory: 1Gi, count: 2}}\n",
                "nodes[0].shared_gpus[0]", "integer 0..1"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, shared_gpus: some, gpus: {model: X, "
                "memory: 1Gi, count: 2}}\n",
                "nodes[0].shared_gpus", "all or a list of GPU indices"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, shared_gpus: [0]}\n",
                "nodes[0].shared_gpus[0]", "has none"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, labels: {zone: \"e\xFF\"}}\n",
                "nodes[0].labels.zone", "is not valid UTF-8 (byte 0xFF at offset 1)"},
        BadCase{"nodes:\n  - {name: a, cpus: 1, memory: 1Gi, gpus: {model: \"H\xC3\", memory: "
                "1Gi, count: 1}}\n",
                "nodes[0].gpus.model", "is not valid UTF-8 (byte 0xC3 at offset 1)"}));

TEST(SimulatedCluster, SharedGpusPutsGpusInSharingMode) {
  auto nodes = ParseSimulatedCluster(R"(
nodes:
  - {name: a, cpus: 8, memory: 64Gi, shared_gpus: [1, 3], gpus: {model: L4-24GB, memory: 24Gi, count: 4}}
  - {name: b, shared_gpus: all, cpus: 8, memory: 64Gi, gpus: {model: L4-24GB, memory: 24Gi, count: 2}}
  - {name: c, cpus: 8, memory: 64Gi, gpus: {model: L4-24GB, memory: 24Gi, count: 1}}
)");
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message;
  std::vector<bool> a, b, c;
  for (const auto& g : (*nodes)[0].gpus) a.push_back(g.sharing);
  for (const auto& g : (*nodes)[1].gpus) b.push_back(g.sharing);
  for (const auto& g : (*nodes)[2].gpus) c.push_back(g.sharing);
  EXPECT_EQ(a, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(b, (std::vector<bool>{true, true}));
  EXPECT_EQ(c, (std::vector<bool>{false}));
  // Registration carries it to berthd.
  v1::NodeInfo wire;
  proto_convert::NodeToProto((*nodes)[0], &wire);
  EXPECT_TRUE(wire.gpus(1).sharing());
  EXPECT_FALSE(wire.gpus(0).sharing());
  EXPECT_TRUE(proto_convert::NodeFromProto(wire).gpus[3].sharing);
}

TEST(SharedGpus, ParsesTheAgentFlag) {
  auto all = ParseSharedGpus("all");
  ASSERT_TRUE(all.has_value());
  EXPECT_TRUE(all->all);
  auto some = ParseSharedGpus("0,2");
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(some->indices, (std::set<std::uint32_t>{0, 2}));
  auto none = ParseSharedGpus("");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(ParseSharedGpus("0,,1").has_value());
  EXPECT_NE(ParseSharedGpus("x").error().message.find("write all, or indices"), std::string::npos);
  std::vector<model::Gpu> gpus(2);
  gpus[1].index = 1;
  EXPECT_TRUE(MarkShared(*some, gpus).has_value() == false);  // GPU 2 is not on the node
  auto one = ParseSharedGpus("1");
  ASSERT_TRUE(MarkShared(*one, gpus).has_value());
  EXPECT_FALSE(gpus[0].sharing);
  EXPECT_TRUE(gpus[1].sharing);
}

TEST(SimulatedCluster, LoadNamesTheFileAndSelectPicksANode) {
  testing::TempDir dir;
  auto missing = LoadSimulatedCluster(dir.path() / "nope.yaml");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, Code::kNotFound);

  testing::WriteText(dir.path() / "c.yaml", kCluster);
  auto nodes = LoadSimulatedCluster(dir.path() / "c.yaml");
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message;
  EXPECT_EQ(SelectSimulatedNode(*nodes, "cpu-1")->name, "cpu-1");
  EXPECT_FALSE(SelectSimulatedNode(*nodes, "").has_value());  // three nodes: must choose
  auto unknown = SelectSimulatedNode(*nodes, "nope");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message.find("gpu-a1, cpu-1, pcie-1"), std::string::npos);
  std::vector<model::NodeInfo> one{nodes->front()};
  EXPECT_EQ(SelectSimulatedNode(one, "")->name, "gpu-a1");

  testing::WriteText(dir.path() / "bad.yaml", "nodes: [{name: a}]\n");
  auto bad = LoadSimulatedCluster(dir.path() / "bad.yaml");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("bad.yaml"), std::string::npos);
}

TEST(SimulatedProvider, ReportsItsNodesGpus) {
  auto nodes = ParseSimulatedCluster(kCluster);
  ASSERT_TRUE(nodes.has_value());
  SimulatedProvider provider((*nodes)[2]);
  EXPECT_EQ(provider.Name(), "simulated");
  auto found = provider.Discover();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->gpus.size(), 3u);
  EXPECT_EQ(found->driver_version, "550.54.15");
  EXPECT_EQ(found->cuda_version, "12.4");
}

TEST(SimulatedProvider, InjectedFaultsMakeThoseGpusUnhealthyUntilRemoved) {
  auto nodes = ParseSimulatedCluster(kCluster);
  ASSERT_TRUE(nodes.has_value());
  testing::TempDir dir;
  const auto faults = dir.path() / "faults";
  SimulatedProvider provider((*nodes)[2], faults);
  auto before = provider.Discover();
  ASSERT_TRUE(before.has_value());  // no file: no faults
  for (const auto& g : before->gpus) EXPECT_EQ(g.health, model::Health::kHealthy);

  testing::WriteText(faults, "# injected\n1 Xid 79: GPU has fallen off the bus\n\n2\n");
  auto found = provider.Discover();
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(found->gpus[0].health, model::Health::kHealthy);
  EXPECT_EQ(found->gpus[1].health, model::Health::kUnhealthy);
  EXPECT_EQ(found->gpus[1].health_detail, "Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(found->gpus[2].health_detail, "injected fault");

  testing::WriteText(faults, "0 Xid 48\nx Xid 79\n");
  auto bad = provider.Discover();
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;

  std::filesystem::remove(faults);
  auto after = provider.Discover();
  ASSERT_TRUE(after.has_value());
  for (const auto& g : after->gpus) EXPECT_EQ(g.health, model::Health::kHealthy);
}

TEST(SimulatedProvider, DefaultNodeIsThisHostWithEightH100s) {
  model::NodeInfo node = DefaultSimulatedNode();
  EXPECT_FALSE(node.name.empty());
  EXPECT_EQ(node.labels.at("berth.dev/simulated"), "true");
  EXPECT_GT(node.cpus, 0u);
  EXPECT_GT(node.memory_bytes, 0u);
  EXPECT_EQ(node.driver_version, "sim");
  EXPECT_EQ(node.cuda_version, "12.4");
  ASSERT_EQ(node.gpus.size(), 8u);
  for (const auto& gpu : node.gpus) {
    EXPECT_EQ(gpu.model, "H100-80GB");
    EXPECT_EQ(gpu.memory_bytes, 80ULL << 30);
    EXPECT_EQ(gpu.nvlink_island, 0u);
    EXPECT_EQ(gpu.nvlink_peers.size(), 7u);
  }
}

}  // namespace
}  // namespace berth::agent
