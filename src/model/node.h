// Value types for the inventory: a node (GPU host) and its GPUs, as an agent
// reports them and as the scheduler sees them. Plain data; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth::model {

enum class Health { kHealthy, kUnhealthy };

struct NvlinkPeer {
  std::uint32_t index = 0;
  std::uint32_t links = 0;
  bool operator==(const NvlinkPeer&) const = default;
};

struct Gpu {
  std::uint32_t index = 0;  // node-local index, what CUDA_VISIBLE_DEVICES names
  std::string uuid;         // globally unique ("GPU-..." from NVML, "SIM-..." simulated)
  std::string model;        // normalised model name, e.g. "H100-80GB"
  std::uint64_t memory_bytes = 0;
  Health health = Health::kHealthy;
  std::string health_detail;    // e.g. "Xid 79" when unhealthy
  std::int32_t numa_node = -1;  // -1 when unknown
  std::string pci_bus_id;
  std::uint32_t nvlink_island = 0;  // GPUs with the same island id share NVLink
  std::vector<NvlinkPeer> nvlink_peers;
  // Set by the operator (agent --shared-gpus, sim shared_gpus): the GPU takes
  // slices (resources.gpu_share) instead of whole-GPU replicas while any
  // slice holds it.
  bool sharing = false;
  bool operator==(const Gpu&) const = default;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect = "NoSchedule";  // NoSchedule | PreferNoSchedule
  bool operator==(const Taint&) const = default;
};

// How firmly a node confines its runs, as its agent found the host
// (docs/security.md). mode "enforced": runs execute as their tenant's run
// identity, each in a cgroup of its own; "single-user": the agent is not
// root and every run executes as its user, unconfined. `missing` lists, in
// words, what a run does not get on this node.
struct Confinement {
  std::string mode;
  std::string cgroup;  // "v1", "v2", "none"
  std::vector<std::string> controllers;
  std::vector<std::string> missing;
  bool operator==(const Confinement&) const = default;
};

struct NodeInfo {
  std::string name;  // unique within the cluster
  std::string hostname;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  std::uint32_t cpus = 0;
  std::uint64_t memory_bytes = 0;
  std::string driver_version;  // empty without an NVIDIA driver
  std::string cuda_version;
  std::string gpu_provider;  // "nvml" | "simulated"
  std::vector<Gpu> gpus;
  std::string agent_version;
  Confinement confinement{};
  // The IP literal this node's service replicas are reached at: the agent's
  // --advertise-address, or the address berthd sees its stream come from.
  std::string address;
  // "podman" when the agent found podman (jobs with an `image` run in a
  // container there); empty: no container runtime.
  std::string container_runtime;
  bool operator==(const NodeInfo&) const = default;
};

enum class NodeState { kReady, kNotReady };

inline const char* NodeStateName(NodeState s) {
  return s == NodeState::kReady ? "Ready" : "NotReady";
}
inline const char* HealthName(Health h) {
  return h == Health::kHealthy ? "healthy" : "unhealthy";
}

// What an operator (or Berth, for a GPU hardware error) took a node or GPU
// out of placement with (store::Cordon): a cordon keeps new work off; a
// drain (nodes only) also stopped what ran there when it was set. The names
// are the stored and API form.
enum class CordonKind { kCordon, kDrain };
inline std::string_view CordonKindName(CordonKind k) {
  return k == CordonKind::kDrain ? "drain" : "cordon";
}
// nullopt for a name this version does not know; the store reads it as
// kCordon: whatever else it did, every kind keeps new work off.
inline std::optional<CordonKind> ParseCordonKind(std::string_view name) {
  if (name == "cordon") return CordonKind::kCordon;
  if (name == "drain") return CordonKind::kDrain;
  return std::nullopt;
}

// The revocation rule of node certificates (docs/operations.md, "Removing a
// node"): removing a node at `revoked_at_ms` revokes every certificate of
// that node name whose notBefore (its issue time, second precision: berthd
// does not backdate node certificates) is at or before the removal.
// Certificates issued later (the node added back with a fresh `berthd cert
// node`, and that certificate's renewals) are valid.
inline bool NodeCertRevoked(std::int64_t not_before_ms, std::int64_t revoked_at_ms) {
  return not_before_ms <= revoked_at_ms;
}

}  // namespace berth::model
