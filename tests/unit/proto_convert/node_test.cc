// The one conversion between a node and its wire form (proto_convert/node.h):
// what the agent writes, berthd reads back field for field, and a GPU health
// berthd does not know is unhealthy, with a detail that says why.
#include "proto_convert/node.h"

#include <gtest/gtest.h>

namespace berth::proto_convert {
namespace {

// Every field of a node and its GPUs set away from its default, so a field
// the conversion drops or mixes up shows as a difference.
model::NodeInfo EveryField() {
  model::NodeInfo n;
  n.name = "gpu-07";
  n.hostname = "gpu-07.rack3";
  n.labels = {{"zone", "b"}, {"pool", "training"}};
  n.taints = {{"dedicated", "infer", "PreferNoSchedule"}, {"maint", "", "NoSchedule"}};
  n.cpus = 96;
  n.memory_bytes = 1ULL << 40;
  n.driver_version = "550.54.15";
  n.cuda_version = "12.4";
  n.gpu_provider = "nvml";
  n.agent_version = "0.1.0";
  n.confinement = {"enforced", "v2", {"cpu", "memory", "pids"}, {"no io controller"}};
  for (std::uint32_t i = 0; i < 2; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.model = "H100-80GB";
    g.memory_bytes = 80ULL << 30;
    g.health = i == 1 ? model::Health::kUnhealthy : model::Health::kHealthy;
    g.health_detail = i == 1 ? "Xid 79" : "";
    g.numa_node = static_cast<std::int32_t>(i);
    g.pci_bus_id = "0000:1" + std::to_string(i) + ":00.0";
    g.nvlink_island = 3;
    g.nvlink_peers = {{1 - i, 18}};
    g.sharing = i == 0;
    n.gpus.push_back(std::move(g));
  }
  return n;
}

TEST(NodeConvert, ModelToProtoToModelIsIdentity) {
  const model::NodeInfo n = EveryField();
  v1::NodeInfo wire;
  NodeToProto(n, &wire);
  v1::NodeInfo received;
  ASSERT_TRUE(received.ParseFromString(wire.SerializeAsString()));
  EXPECT_EQ(NodeFromProto(received), n);
  EXPECT_EQ(received.gpus(1).health(), "unhealthy");
  EXPECT_EQ(received.gpus(0).health(), "healthy");
  // The default node too: empty strings and zeros stay what they were.
  v1::NodeInfo empty;
  NodeToProto(model::NodeInfo{}, &empty);
  EXPECT_EQ(NodeFromProto(empty), model::NodeInfo{});
}

TEST(NodeConvert, GpusComeBackSortedByIndex) {
  model::NodeInfo n = EveryField();
  std::swap(n.gpus[0], n.gpus[1]);
  v1::NodeInfo wire;
  NodeToProto(n, &wire);
  EXPECT_EQ(NodeFromProto(wire), EveryField());
}

TEST(NodeConvert, AHealthChangeCarriesTheModelsHealthName) {
  const model::NodeInfo n = EveryField();
  v1::GpuHealthChanged m;
  HealthChangeToProto(n.gpus[1], &m);
  EXPECT_EQ(m.index(), 1U);
  EXPECT_EQ(m.uuid(), "GPU-1");
  EXPECT_EQ(m.health(), "unhealthy");
  EXPECT_EQ(m.health_detail(), "Xid 79");
  const WireHealth read = HealthFromWire(m.health(), m.health_detail());
  EXPECT_TRUE(read.known);
  EXPECT_EQ(read.health, model::Health::kUnhealthy);
  EXPECT_EQ(read.detail, "Xid 79");
}

// Until this rule, the agent's reader took anything but "healthy" as
// unhealthy and berthd's took anything but "unhealthy" as healthy.
TEST(NodeConvert, AnUnknownOrEmptyHealthIsUnhealthyAndSaysWhy) {
  const WireHealth healthy = HealthFromWire("healthy", "");
  EXPECT_TRUE(healthy.known);
  EXPECT_EQ(healthy.health, model::Health::kHealthy);

  const WireHealth degraded = HealthFromWire("degraded", "ECC pages retired");
  EXPECT_FALSE(degraded.known);
  EXPECT_EQ(degraded.health, model::Health::kUnhealthy);
  EXPECT_NE(degraded.detail.find("health 'degraded'"), std::string::npos) << degraded.detail;
  EXPECT_NE(degraded.detail.find("ECC pages retired"), std::string::npos) << degraded.detail;

  const WireHealth empty = HealthFromWire("", "");
  EXPECT_FALSE(empty.known);
  EXPECT_EQ(empty.health, model::Health::kUnhealthy);
  EXPECT_NE(empty.detail.find("no health"), std::string::npos) << empty.detail;

  // Case matters: "Healthy" is not a value any agent sends.
  EXPECT_EQ(HealthFromWire("Healthy", "").health, model::Health::kUnhealthy);
  // A long value is quoted in part.
  const WireHealth long_value = HealthFromWire(std::string(1000, 'x'), "");
  EXPECT_LT(long_value.detail.size(), 400U);

  // In a Register, the same rule: the GPU is unhealthy with that detail.
  v1::NodeInfo wire;
  wire.set_name("a");
  wire.add_gpus()->set_health("degraded");
  wire.add_gpus()->set_index(1);  // no health at all
  const model::NodeInfo n = NodeFromProto(wire);
  ASSERT_EQ(n.gpus.size(), 2U);
  EXPECT_EQ(n.gpus[0].health, model::Health::kUnhealthy);
  EXPECT_NE(n.gpus[0].health_detail.find("'degraded'"), std::string::npos);
  EXPECT_EQ(n.gpus[1].health, model::Health::kUnhealthy);
}

}  // namespace
}  // namespace berth::proto_convert
