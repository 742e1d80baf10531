// What berthd makes of an agent's messages before it stores or acts on them:
// the checks on a Register's node inventory (read by
// proto_convert::NodeFromProto), a run's exit, a telemetry sample. Apart
// from the controller, with nothing but the generated messages and the
// model, so the fuzz target (fuzz/fuzz_agent_message.cc) runs exactly this
// on arbitrary bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "berth/v1/agent.pb.h"
#include "common/status.h"
#include "model/node.h"
#include "model/telemetry.h"
#include "store/store.h"

namespace berth::server {

// Bounds on what a node may declare; a registration past them is refused
// (docs/inventory.md). They keep the scheduler's per-node arithmetic (free
// CPU and memory, a slice's share of a GPU's memory) far inside 64 bits.
inline constexpr std::uint32_t kMaxNodeCpus = 1U << 20;
inline constexpr std::uint64_t kMaxNodeMemoryBytes = std::uint64_t{1} << 50;  // 1 PiB
inline constexpr std::size_t kMaxNodeGpus = 1024;
inline constexpr std::uint64_t kMaxGpuMemoryBytes = std::uint64_t{1} << 50;  // 1 PiB

// An IPv4 or IPv6 literal (inet_pton), as node addresses must be: the
// gateway routes to it and resolves no names.
bool IsNodeAddress(std::string_view address);
// The IP address in a gRPC peer string ("ipv4:10.0.0.5:41234",
// "ipv6:[fd00::5]:41234"); "127.0.0.1" for a unix socket or an in-process
// agent (berthd's own host); "" when there is none usable.
std::string AddressOfPeer(std::string_view peer);

// Refuses an inventory berthd cannot schedule on: no name, amounts past the
// bounds above, two GPUs with one index. kInvalidArgument naming the field
// ("node.gpus[3].index").
Status CheckNodeInventory(const model::NodeInfo& node);

// The one word a node may report as its container runtime: "podman", or
// empty for none (the scheduler places jobs with an `image` only where it
// is "podman"). kInvalidArgument naming `field` for anything else.
Status CheckContainerRuntime(std::string_view runtime, std::string_view field);

// A ContainerRuntimeChanged as the store records it: "podman" or "", or
// kInvalidArgument ("container_runtime.container_runtime") for another word.
Result<std::string> ContainerRuntimeFromProto(const berth::v1::ContainerRuntimeChanged& m);

// A RunExited (also the exit inside a Register's RunStatus) as the store
// records it.
store::RunExit ExitFromProto(const berth::v1::RunExited& m);

// One telemetry sample of `node`, utilization clamped to 100%.
model::GpuSample SampleFromProto(const std::string& node, const berth::v1::GpuSample& p);

}  // namespace berth::server
