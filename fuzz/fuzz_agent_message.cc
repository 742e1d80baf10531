// libFuzzer target: an agent's message as berthd receives it. The bytes are
// parsed as a berth.v1.AgentMessage (what the gRPC stream hands berthd) and
// pushed through berthd's own decoding (control/agent_decode.h): a Register's
// node and the runs it reports, a run's exit, telemetry samples, a GPU's
// health change, a container runtime change. What berthd stores must be
// writable as JSON and read back the same; GPUs come sorted; an inventory
// check refuses in valid UTF-8 or accepts a node within its bounds; a
// sample's utilization is at most 100%; a runtime is "podman" or nothing.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "berth/v1/agent.pb.h"
#include "control/agent_decode.h"
#include "fuzz_check.h"
#include "model/json.h"
#include "proto_convert/node.h"

namespace {

using nlohmann::json;

void CheckExit(const berth::v1::RunExited& m) {
  const berth::store::RunExit e = berth::server::ExitFromProto(m);
  FUZZ_REQUIRE(e.run_id == m.run_id());
  FUZZ_REQUIRE(e.clean_stop.has_value() == (e.stopped_for != berth::model::StopCause::kNone));
  // Any name reads as a cause: one berthd does not know is kUnknown.
  FUZZ_REQUIRE((e.stopped_for == berth::model::StopCause::kNone) == m.stopped_for().empty());
  FUZZ_REQUIRE((e.failure_class == "run_identity") == m.identity_refused());
  FUZZ_REQUIRE(!e.last_checkpoint_ms || *e.last_checkpoint_ms > 0);
  // The run's record and its API form carry these as text.
  (void)json{{"run_id", e.run_id},
             {"stopped_for", berth::model::StopCauseName(e.stopped_for)},
             {"start_error", e.start_error}}
      .dump();
}

void CheckRegister(const berth::v1::Register& reg) {
  const berth::model::NodeInfo node = berth::proto_convert::NodeFromProto(reg.node());
  for (std::size_t i = 1; i < node.gpus.size(); ++i) {
    FUZZ_REQUIRE(node.gpus[i - 1].index <= node.gpus[i].index);
  }
  if (auto st = berth::server::CheckNodeInventory(node); !st) {
    berth::fuzz::CheckRefusal(st.error());
  } else {
    FUZZ_REQUIRE(!node.name.empty() && node.cpus <= berth::server::kMaxNodeCpus &&
                 node.memory_bytes <= berth::server::kMaxNodeMemoryBytes &&
                 node.gpus.size() <= berth::server::kMaxNodeGpus);
    std::set<std::uint32_t> indices;
    for (const auto& g : node.gpus) {
      FUZZ_REQUIRE(indices.insert(g.index).second);
      FUZZ_REQUIRE(g.memory_bytes <= berth::server::kMaxGpuMemoryBytes);
    }
    // The store keeps the node as this JSON; it must be writable and read
    // back as the same node.
    const json stored = berth::model::ToJson(node);
    const std::string text = stored.dump();
    FUZZ_REQUIRE(berth::model::ToJson(berth::model::NodeInfoFromJson(json::parse(text))) == stored);
  }
  for (const auto& run : reg.runs()) {
    (void)json{{"run_id", run.run_id()}}.dump();
    CheckExit(run.exit());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // A string field that is not UTF-8 fails the parse (proto3), which is
  // what the target relies on; libprotobuf's log line for each would
  // drown the fuzzer's output.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  berth::v1::AgentMessage msg;
  if (size > static_cast<std::size_t>(INT32_MAX)) return 0;
  if (!msg.ParseFromArray(data, static_cast<int>(size))) return 0;
  switch (msg.msg_case()) {
    case berth::v1::AgentMessage::kRegister:
      CheckRegister(msg.register_());
      break;
    case berth::v1::AgentMessage::kRunExited:
      CheckExit(msg.run_exited());
      break;
    case berth::v1::AgentMessage::kTelemetry:
      for (const auto& p : msg.telemetry().samples()) {
        const auto s = berth::server::SampleFromProto("node", p);
        FUZZ_REQUIRE(s.util_pct <= 100 && s.mem_util_pct <= 100);
        FUZZ_REQUIRE(s.gpu == p.gpu() &&
                     s.run_ids.size() == static_cast<std::size_t>(p.run_ids_size()));
        (void)json{{"uuid", s.uuid}, {"run_ids", s.run_ids}}.dump();
      }
      break;
    case berth::v1::AgentMessage::kGpuHealth: {
      // An unhealthy report becomes a cordon whose audit record quotes it.
      const auto& h = msg.gpu_health();
      (void)json{{"cordon", "cordon"}, {"reason", h.health_detail()}, {"uuid", h.uuid()}}.dump();
      // Any value but "healthy" and "unhealthy" is read as unhealthy, and
      // the GPU's recorded detail (stored as JSON) says which value came.
      const auto read = berth::proto_convert::HealthFromWire(h.health(), h.health_detail());
      FUZZ_REQUIRE(read.known == (h.health() == "healthy" || h.health() == "unhealthy"));
      FUZZ_REQUIRE(read.known || read.health == berth::model::Health::kUnhealthy);
      (void)json{{"health_detail", read.detail}}.dump();
      break;
    }
    case berth::v1::AgentMessage::kContainerRuntime: {
      // Only "podman" or nothing reaches the node's stored inventory.
      const auto runtime = berth::server::ContainerRuntimeFromProto(msg.container_runtime());
      const std::string& word = msg.container_runtime().container_runtime();
      FUZZ_REQUIRE(runtime.has_value() == (word.empty() || word == "podman"));
      if (runtime) {
        FUZZ_REQUIRE(*runtime == word);
      } else {
        berth::fuzz::CheckRefusal(runtime.error());
      }
      break;
    }
    default:
      break;
  }
  return 0;
}
