// berthd's decoding of an agent's Register (control/agent_decode.h): GPUs come
// sorted, and an inventory past the bounds, or with one GPU index twice, is
// refused naming the field.
#include "control/agent_decode.h"

#include <gtest/gtest.h>

#include "model/json.h"
#include "proto_convert/node.h"

namespace berth::server {
namespace {

berth::v1::NodeInfo Wire() {
  berth::v1::NodeInfo p;
  p.set_name("a");
  p.set_cpus(64);
  p.set_memory_bytes(512ULL << 30);
  for (std::uint32_t i : {1U, 0U}) {
    auto* g = p.add_gpus();
    g->set_index(i);
    g->set_model("H100-80GB");
    g->set_memory_bytes(80ULL << 30);
    g->set_health(i == 1 ? "unhealthy" : "healthy");
  }
  return p;
}

TEST(AgentDecode, ARegisteredNodeIsKeptSortedAndChecked) {
  const model::NodeInfo n = proto_convert::NodeFromProto(Wire());
  ASSERT_EQ(n.gpus.size(), 2U);
  EXPECT_EQ(n.gpus[0].index, 0U);
  EXPECT_EQ(n.gpus[1].health, model::Health::kUnhealthy);
  EXPECT_TRUE(CheckNodeInventory(n).has_value());
}

TEST(AgentDecode, AnInventoryPastItsBoundsIsRefusedNamingTheField) {
  struct Case {
    void (*change)(berth::v1::NodeInfo&);
    const char* field;
  };
  const Case cases[] = {
      {[](berth::v1::NodeInfo& p) { p.set_name(""); }, "node.name"},
      {[](berth::v1::NodeInfo& p) { p.set_cpus(kMaxNodeCpus + 1); }, "node.cpus"},
      {[](berth::v1::NodeInfo& p) { p.set_memory_bytes(~std::uint64_t{0}); }, "node.memory_bytes"},
      {[](berth::v1::NodeInfo& p) { p.mutable_gpus(0)->set_index(0); }, "node.gpus[1].index"},
      {[](berth::v1::NodeInfo& p) { p.mutable_gpus(1)->set_memory_bytes(~std::uint64_t{0}); },
       "node.gpus[0].memory_bytes"},
      {[](berth::v1::NodeInfo& p) {
         for (std::uint32_t i = 2; i <= kMaxNodeGpus; ++i) p.add_gpus()->set_index(i);
       },
       "node.gpus"},
      {[](berth::v1::NodeInfo& p) { p.set_address("gpu-7.example.com"); }, "node.address"},
      {[](berth::v1::NodeInfo& p) { p.set_address("10.0.0.5:8000"); }, "node.address"},
      {[](berth::v1::NodeInfo& p) { p.set_container_runtime("docker; rm -rf /"); },
       "node.container_runtime"},
  };
  for (const auto& c : cases) {
    berth::v1::NodeInfo p = Wire();
    c.change(p);
    auto st = CheckNodeInventory(proto_convert::NodeFromProto(p));
    ASSERT_FALSE(st.has_value()) << c.field;
    EXPECT_EQ(st.error().code, Code::kInvalidArgument);
    EXPECT_EQ(st.error().field, c.field) << st.error().message;
  }
}

// A node's address is where the gateway reaches its replicas: an IP literal
// the agent advertises, or the one its stream comes from.
TEST(AgentDecode, ANodeAddressIsAnIpLiteralOrTheStreamsPeer) {
  EXPECT_TRUE(IsNodeAddress("10.0.0.5"));
  EXPECT_TRUE(IsNodeAddress("fd00::5"));
  EXPECT_FALSE(IsNodeAddress(""));
  EXPECT_FALSE(IsNodeAddress("10.0.0.256"));
  EXPECT_FALSE(IsNodeAddress("[fd00::5]"));
  EXPECT_FALSE(IsNodeAddress("node-1"));

  EXPECT_EQ(AddressOfPeer("ipv4:10.0.0.5:41234"), "10.0.0.5");
  EXPECT_EQ(AddressOfPeer("ipv6:[fd00::5]:41234"), "fd00::5");
  EXPECT_EQ(AddressOfPeer("ipv6:[::ffff:10.1.2.3]:41234"), "10.1.2.3");
  EXPECT_EQ(AddressOfPeer("ipv6:[fe80::1%eth0]:41234"), "");
  EXPECT_EQ(AddressOfPeer("ipv6:fd00::5"), "");
  EXPECT_EQ(AddressOfPeer("unix:/run/berth/agent.sock"), "127.0.0.1");
  EXPECT_EQ(AddressOfPeer(""), "127.0.0.1");  // berthd's own in-process agent

  berth::v1::NodeInfo p = Wire();
  p.set_address("fd00::5");
  EXPECT_TRUE(CheckNodeInventory(proto_convert::NodeFromProto(p)).has_value());
  EXPECT_EQ(proto_convert::NodeFromProto(p).address, "fd00::5");
}

// A node says whether jobs with an image can run there: "podman", or
// nothing; it survives the wire and berthd's stored form.
TEST(AgentDecode, ANodeNamesItsContainerRuntimeOrNone) {
  berth::v1::NodeInfo p = Wire();
  EXPECT_EQ(proto_convert::NodeFromProto(p).container_runtime, "");
  p.set_container_runtime("podman");
  const model::NodeInfo node = proto_convert::NodeFromProto(p);
  EXPECT_TRUE(CheckNodeInventory(node).has_value());
  EXPECT_EQ(node.container_runtime, "podman");
  EXPECT_EQ(model::NodeInfoFromJson(model::ToJson(node)), node);
  berth::v1::NodeInfo back;
  proto_convert::NodeToProto(node, &back);
  EXPECT_EQ(back.container_runtime(), "podman");
}

// A running agent's report that podman appeared or went away holds the same
// one word a registration may: "podman" or nothing, and the message names
// no node (berthd applies it to the stream's own). Any other word is refused
// before it reaches the store, as a registration's is.
TEST(AgentDecode, ARuntimeChangeIsPodmanOrNoneAsARegistrationIs) {
  berth::v1::AgentMessage msg;
  msg.mutable_container_runtime()->set_container_runtime("podman");
  msg.mutable_container_runtime()->set_at_ms(1234);
  // Through the wire's bytes, as berthd reads it off the stream.
  berth::v1::AgentMessage read;
  ASSERT_TRUE(read.ParseFromString(msg.SerializeAsString()));
  ASSERT_EQ(read.msg_case(), berth::v1::AgentMessage::kContainerRuntime);
  EXPECT_EQ(read.container_runtime().at_ms(), 1234);
  auto runtime = ContainerRuntimeFromProto(read.container_runtime());
  ASSERT_TRUE(runtime.has_value()) << runtime.error().message;
  EXPECT_EQ(*runtime, "podman");

  berth::v1::ContainerRuntimeChanged gone;
  runtime = ContainerRuntimeFromProto(gone);
  ASSERT_TRUE(runtime.has_value()) << runtime.error().message;
  EXPECT_EQ(*runtime, "");

  for (const char* word : {"docker", "Podman", "podman ", "podman\n", "/usr/bin/podman"}) {
    berth::v1::ContainerRuntimeChanged bad;
    bad.set_container_runtime(word);
    auto refused = ContainerRuntimeFromProto(bad);
    ASSERT_FALSE(refused.has_value()) << word;
    EXPECT_EQ(refused.error().code, Code::kInvalidArgument);
    EXPECT_EQ(refused.error().field, "container_runtime.container_runtime");
  }
  // The same rule as a registration's, naming the registration's field.
  EXPECT_EQ(CheckContainerRuntime("docker", "node.container_runtime").error().field,
            "node.container_runtime");
  EXPECT_TRUE(CheckContainerRuntime("", "node.container_runtime").has_value());
}

// The agent echoes the cause berthd stopped a run for, or names its own; a
// name this berthd does not know is still a stop, for an unknown cause.
TEST(AgentDecode, AStopCauseIsReadOnceAtTheEdge) {
  berth::v1::RunExited m;
  m.set_run_id("r-1-0-1");
  m.set_stopped_for("fenced");
  m.set_clean_stop(true);
  auto e = ExitFromProto(m);
  EXPECT_EQ(e.stopped_for, model::StopCause::kFenced);
  EXPECT_EQ(e.clean_stop, true);
  m.set_stopped_for("evacuated");
  m.set_clean_stop(false);
  e = ExitFromProto(m);
  EXPECT_EQ(e.stopped_for, model::StopCause::kUnknown);
  EXPECT_EQ(e.clean_stop, false);
}

TEST(AgentDecode, ExitsAndSamplesAreReadAsTheStoreKeepsThem) {
  berth::v1::RunExited m;
  m.set_run_id("r-1-0-1");
  m.set_clean_stop(true);  // without stopped_for: not a stop at all
  m.set_identity_refused(true);
  auto e = ExitFromProto(m);
  EXPECT_FALSE(e.clean_stop.has_value());
  EXPECT_EQ(e.failure_class, "run_identity");
  EXPECT_FALSE(e.started_at_ms.has_value());
  EXPECT_EQ(e.stopped_for, model::StopCause::kNone);
  berth::v1::GpuSample p;
  p.set_util_pct(250);
  p.set_mem_util_pct(101);
  auto s = SampleFromProto("a", p);
  EXPECT_EQ(s.util_pct, 100U);
  EXPECT_EQ(s.mem_util_pct, 100U);
  EXPECT_EQ(s.node, "a");
}

}  // namespace
}  // namespace berth::server
