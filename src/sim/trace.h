// Workloads for berth-sim: jobs with a submit time and how long they run
// when given their GPUs, read from public cluster traces (docs/evaluation.md
// says where each comes from and what Berth assumes where a trace is silent).
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/job.h"
#include "sched/snapshot.h"

namespace berth::sim {

struct SimJob {
  std::int64_t id = 0;  // 1-based, in submit order
  std::string name;     // the trace's own id
  std::string tenant = "default";
  std::string queue = "default";
  TimeMs submit_ms = 0;
  TimeMs duration_ms = 0;  // run time with no interruption
  std::uint32_t replicas = 1;
  model::Resources resources;  // per replica
  model::Priority priority = model::Priority::kNormal;
  std::optional<bool> preemptible{};
  TimeMs max_runtime_ms = 0;  // declared limit; 0: none
};

// Microsoft ITP (ElasticFlow) training jobs: job_id, submission_time (s),
// duration (s), num_gpu. The trace names no tenant, so jobs are spread over
// `tenants` tenants ("t00", "t01", ...) by a hash of their id, each with a
// queue "training". A job of more GPUs than a node has becomes a gang of
// whole nodes (num_gpu / gpus_per_node replicas).
struct ItpOptions {
  std::uint32_t tenants = 1;
  std::uint32_t gpus_per_node = 8;
  std::size_t limit = 0;  // read at most this many jobs; 0: all
};
Result<std::vector<SimJob>> ReadItp(std::istream& in, const ItpOptions& options);
Result<std::vector<SimJob>> ReadItpFile(const std::filesystem::path& path,
                                        const ItpOptions& options);

// Alibaba OpenB (FGD, ATC'23): a node inventory of mixed GPU models and pods
// that may ask for a share of one GPU. Pods become jobs of one replica:
// num_gpu whole GPUs, or a slice (gpu_milli < 1000 of one GPU), or none
// (CPU-only); cpu_milli and memory_mib as asked. A pod runs for
// deletion_time - creation_time. gpu_spec with one model constrains the
// model; a list of models ("V100M16|V100M32") leaves it free, since a job
// names one model or any. QoS becomes priority: LS and Guaranteed high,
// Burstable normal, BE low. The trace names no tenant: tenants by hash, as
// for ITP. Every node's GPUs are in sharing mode (the cluster shares GPUs);
// GPU memory by model: T4, P100, V100M16 16 GiB, V100M32 and the undisclosed
// G1-G3 32 GiB, A10 24 GiB.
struct OpenbOptions {
  std::uint32_t tenants = 1;
  std::size_t limit = 0;
};
Result<std::vector<SimJob>> ReadOpenbPods(std::istream& in, const OpenbOptions& options);
Result<std::vector<SimJob>> ReadOpenbPodsFile(const std::filesystem::path& path,
                                              const OpenbOptions& options);
Result<std::vector<sched::NodeView>> ReadOpenbNodes(std::istream& in);
Result<std::vector<sched::NodeView>> ReadOpenbNodesFile(const std::filesystem::path& path);

// Alibaba GPU-disaggregated DLRM serving (Prism, NSDI'25): long-running
// inference instances. An instance becomes a job of one replica: CN
// instances CPU-only, HN instances with gpu_request whole GPUs (0 or 1),
// cpu_request CPUs and memory_request GiB; rdma, disk and the per-app
// max_instance_per_node cap are not modelled (Berth has no RDMA or disk
// resource and no anti-affinity between jobs). It is submitted at
// creation_time (an instance that pre-exists the window, NaN or empty, at
// 0) and runs until deletion_time; one that outlives the window (NaN or
// empty) runs to the window's end, the largest time in the file.
// Tenants: each app's instances stay together, the app name hashed over
// `tenants` tenants (the trace's 156 apps are too many for equal shares),
// each with a queue "serving".
struct DlrmOptions {
  std::uint32_t tenants = 1;
  std::size_t limit = 0;
};
Result<std::vector<SimJob>> ReadDlrm(std::istream& in, const DlrmOptions& options);
Result<std::vector<SimJob>> ReadDlrmFile(const std::filesystem::path& path,
                                         const DlrmOptions& options);
// The cluster the DLRM trace is replayed on (the trace has no inventory):
// `gpu_nodes` nodes "hn-NNNN" of 8 GPUs ("DLRM-GPU", 32 GiB), 128 CPUs and
// 1 TiB, and `cpu_nodes` nodes "cn-NNNN" of 192 CPUs and 1 TiB.
std::vector<sched::NodeView> DlrmNodes(std::size_t gpu_nodes, std::size_t cpu_nodes);

// A node goes down at `at_ms` (trace time) for `down_ms`. Read for
// berth-sim --node-failures from CSV time_s,node,down_s (integer seconds,
// down_s > 0).
struct NodeFailure {
  TimeMs at_ms = 0;
  std::string node;
  TimeMs down_ms = 0;
};
Result<std::vector<NodeFailure>> ReadNodeFailures(std::istream& in);
Result<std::vector<NodeFailure>> ReadNodeFailuresFile(const std::filesystem::path& path);

// The tenant name for index `i` of `n` ("t00" .. ; "default" when n <= 1).
std::string TenantName(std::uint32_t i, std::uint32_t n);

}  // namespace berth::sim
