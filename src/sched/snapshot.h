// What one scheduling cycle sees: an immutable copy of the cluster (nodes,
// their GPUs and what is free), the jobs running and waiting, the policy and
// each queue's decayed usage. Built by the control loop from the store; the
// scheduler never reads anything else.
//
// Invariant: a running job's GPUs are marked `free = false` and its CPU and
// memory are already subtracted from its nodes' `*_free`; the scheduler
// gives them back only when it plans an eviction.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/job.h"
#include "model/node.h"
#include "model/policy.h"
#include "sched/plan.h"
#include "sched/runtime_estimate.h"

namespace berth::sched {

class RunningMemo;

struct GpuView {
  std::uint32_t index = 0;
  std::string uuid;
  std::string model;
  std::uint64_t memory_bytes = 0;
  bool healthy = true;
  bool free = true;                 // no run holds it, whole or as a slice
  std::uint32_t nvlink_island = 0;  // GPUs with the same id share NVLink
  // Sharing mode (set by the operator): the GPU takes slices of jobs with
  // resources.gpu_share. What its slices hold: shared_millis <= 1000 and
  // shared_bytes <= memory_bytes; shared_millis > 0 means free is false and
  // no whole-GPU run holds it (every slice holds at least 1 milli-GPU).
  bool sharing = false;
  std::uint32_t shared_millis = 0;
  std::uint64_t shared_bytes = 0;
};

struct NodeView {
  std::string name;
  bool ready = false;
  // An admin cordoned or drained it: nothing new is placed here. (A cordoned
  // GPU shows as unhealthy instead.)
  bool cordoned = false;
  std::map<std::string, std::string> labels;
  std::vector<model::Taint> taints;
  std::vector<GpuView> gpus;  // sorted by index
  std::uint64_t cpu_millis_free = 0;
  std::uint64_t memory_bytes_free = 0;
  // Its agent found podman (NodeInfo::container_runtime): it can run a job
  // with an image. No other node can.
  bool container_runtime = false;
};

struct PendingJob {
  std::int64_t id = 0;
  std::string tenant;
  std::string queue;
  model::Priority priority = model::Priority::kNormal;
  TimeMs submitted_at_ms = 0;
  std::uint32_t replicas = 1;
  model::Resources resources;  // per replica
  // nullopt: from the priority class, else the queue's default.
  std::optional<bool> preemptible{};
  std::map<std::string, std::string> node_selector{};
  std::vector<model::Toleration> tolerations{};
  std::string pool{};  // empty: any of the queue's pools
  model::Topology topology{};
  // 0: unlimited. berthd stops a job at its max runtime, so only jobs with
  // one may use GPUs reserved for another (backfill), and only if they end
  // before the reserved start.
  std::int64_t max_runtime_ms = 0;
  // When it first needed to reclaim lent GPUs, as the last cycle's reason
  // said (model::kReclaimSinceMs): its reclaim grace counts from here. 0:
  // not before this cycle.
  TimeMs reclaim_since_ms = 0;
  // Its run time as predicted from finished jobs like it (runtime_estimate.h;
  // none when unknown). Orders jobs of equal priority within a queue,
  // shortest predicted GPU time first; a declared max_runtime_ms wins over
  // it everywhere. Never enforced: berthd does not stop a job at it.
  RuntimePrediction predicted{};
  // A replica of this inference service ("tenant/name"); empty: not a
  // replica. A replica in a queue of kind inference may use and reclaim a
  // pool's inference headroom (docs/scheduling.md, "Inference headroom").
  std::string service{};
  // The OCI image it runs in (JobSpec::image); empty: a plain process. A job
  // with one is placed only on nodes with a container runtime.
  std::string image{};
};

// A job holding GPUs now: what reclaim and preemption may choose from.
struct RunningJob {
  std::int64_t id = 0;
  std::string tenant;
  std::string queue;
  model::Priority priority = model::Priority::kNormal;
  std::optional<bool> preemptible{};  // as in PendingJob
  TimeMs started_at_ms = 0;
  TimeMs last_checkpoint_ms = 0;  // 0: never checkpointed; work lost counts from the start
  model::Resources resources{};   // per replica
  std::vector<ReplicaPlacement> replicas{};
  // 0: unlimited; else started_at_ms + max_runtime_ms is a hard upper bound
  // on when its GPUs are free again (berthd stops it then).
  std::int64_t max_runtime_ms = 0;
  // It checkpoints (its spec has a checkpoint block): consolidation may move
  // it, and then places it again by these constraints of its spec.
  bool checkpoints = false;
  TimeMs submitted_at_ms = 0;
  // Names this run's placement: a caller that keeps a RunningMemo gives each
  // run a key no other run of the job shares, and never changes a run's
  // replicas or resources under its key. 0: none (resolved every cycle).
  std::uint64_t run_key = 0;
  std::map<std::string, std::string> node_selector{};
  std::vector<model::Toleration> tolerations{};
  std::string pool{};
  model::Topology topology{};
  // As in PendingJob: with no max runtime, its GPUs are expected back at
  // started_at_ms + the prediction (ExpectedEndOf), for estimated starts
  // only, never for a reservation or backfill.
  RuntimePrediction predicted{};
  std::string service{};  // as in PendingJob
  std::string image{};    // as in PendingJob
};

// A shape of work asked for, and how often: what placement keeps room for
// (FGD's workload, without an oracle: the shapes of the jobs waiting and
// running now, or in the simulator's fill the pods arrived so far). Whole
// GPUs per replica, or one slice of a sharing GPU (`share_millis` or
// `share_bytes` set, `gpus` 1: a slice by its share, so that a 0.25-GPU
// slice and a whole GPU are different shapes); `gpu_model` is the model the
// shape names, "" for any; `weight` the replicas asking for it; the CPU and
// memory each replica asks for (a node short of them cannot use its GPUs
// for the shape).
struct DemandShape {
  std::uint32_t gpus = 0;
  std::string gpu_model{};
  std::int64_t weight = 0;
  std::uint32_t share_millis = 0;
  std::uint64_t share_bytes = 0;
  std::uint64_t cpu_millis = 0;
  std::uint64_t memory_bytes = 0;
  bool operator==(const DemandShape&) const = default;
};

// The demand of the jobs waiting and running: one DemandShape per (whole
// GPUs or slice share, model, CPU, memory) with the number of replicas
// asking for it, CPU-only jobs left out; sorted by (gpus, model, share millis,
// share bytes, CPU, memory). At most `max_pending` of
// the pending jobs are counted (the first listed), so a queue of 100,000
// costs a bounded pass.
std::vector<DemandShape> DemandOf(const std::vector<PendingJob>& pending,
                                  const std::vector<RunningJob>& running,
                                  std::size_t max_pending = 10'000);

struct Snapshot {
  TimeMs now_ms = 0;
  std::vector<NodeView> nodes;      // sorted by name
  std::vector<PendingJob> pending;  // any order; the scheduler orders them
  std::vector<RunningJob> running{};
  model::Policy policy = model::DefaultPolicy();
  // Per queue path (leaf queues, "tenant/queue"): GPU use decayed with the
  // policy's half-life, in milli-GPU-seconds. Missing: none.
  std::map<std::string, std::int64_t> decayed_usage{};
  // Optional (sched/running_memo.h): what earlier cycles over this stream of
  // snapshots resolved about its running jobs; plans are the same without.
  std::shared_ptr<RunningMemo> memo{};
  // Optional: the shapes asked for (DemandOf). With slices among them, every
  // replica goes where it adds the least fragmentation for those shapes
  // (FGD); else, with shapes that name a GPU model on a cluster of several
  // models, a job free to use any model goes where it leaves those shapes
  // the most room (Cluster::SetDemand); empty: placement packs by free GPUs
  // alone.
  std::vector<DemandShape> demand{};
};

// A running job waiting again (evicted, or moved): every field it carries
// over, and as many replicas as it ran.
PendingJob PendingJobOf(const RunningJob& r);
// A waiting job once placed on `replicas` at `started_at_ms` (never
// checkpointed yet).
RunningJob RunningJobOf(const PendingJob& p, std::vector<ReplicaPlacement> replicas,
                        TimeMs started_at_ms);

// A node of the inventory as the scheduler sees it when nothing runs there:
// every GPU free, all its CPUs and memory free, GPUs sorted by index.
NodeView NodeViewOf(const model::NodeInfo& info, bool ready);

// Marks the GPUs a job's replicas hold on `nodes` as taken (`take`) or gives
// them back: whole GPUs, or one slice per replica (model::SliceOf) added to or
// taken from the GPU's shared share and memory. What builds or advances a
// snapshot by hand (the simulator, tests) keeps the GPU side of the
// invariant above with it; CPU and memory are the caller's.
void HoldGpus(std::vector<NodeView>& nodes, const model::Resources& per_replica,
              const std::vector<ReplicaPlacement>& replicas, bool take);

}  // namespace berth::sched
