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

// The tenant name for index `i` of `n` ("t00" .. ; "default" when n <= 1).
std::string TenantName(std::uint32_t i, std::uint32_t n);

}  // namespace berth::sim
