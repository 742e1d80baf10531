// Research baselines for berth-sim, as snapshot adjusters over Berth's own
// schedulers (docs/evaluation.md describes each and what it assumes).
//
// - SJF with an oracle: the FIFO scheduler, ordering waiting jobs by their
//   true remaining run time instead of submit time. Non-preemptive. No real
//   scheduler knows run times; it bounds what ordering alone can gain.
// - Tiresias-style discretized least-attained-service (Gu et al., NSDI'19):
//   jobs are put in priority levels by the GPU time they have had so far
//   (GPUs x time run, the "2D" attained service); a job that crosses a
//   threshold drops a level, and a waiting job of a higher level preempts
//   running jobs of lower ones. Within a level, first come first served.
//   Tiresias' starvation guard (promote after a long wait) is not modelled.
//   Runs on the scheduling core with every job in one queue, the levels as
//   its priority classes.
// - Placement baselines for OpenB's fill mode (fill.h): first fit, best fit
//   (pack: the node left with the fewest free GPUs) and spread (the node
//   with the most free GPUs, as Kubernetes' default least-allocated score).
//   No queues, quotas or preemption: each waiting job in submit order is
//   placed where the rule says, or left waiting.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sched/scheduler.h"
#include "sim/engine.h"

namespace berth::sim {

// FIFO without quotas: every job in one queue under the default policy, so
// the FIFO scheduler keeps one line for the whole cluster.
SnapshotAdjuster OneQueue();

SnapshotAdjuster ShortestJobFirstOracle();

// Levels by attained GPU-milliseconds: below thresholds[0] is the top level
// (critical), below thresholds[1] the next (high), and so on down to low.
// At most three thresholds.
SnapshotAdjuster LeastAttainedService(std::vector<std::int64_t> thresholds_gpu_ms);

enum class PlacementRule { kFirstFit, kBestFit, kSpread };

class PlacementBaseline : public sched::Scheduler {
 public:
  explicit PlacementBaseline(PlacementRule rule) : rule_(rule) {}
  [[nodiscard]] sched::Plan Schedule(const sched::Snapshot& snapshot) const override;

 private:
  PlacementRule rule_;
};

// Free capacity of one GPU for new work in milli-GPUs: 1000 when no run
// holds it, 1000 minus its slices on a sharing GPU, else 0 (and 0 when
// unhealthy).
std::int64_t FreeMillis(const sched::GpuView& g);

// The GPUs one replica of `r` would take on `node` (best fit among slices:
// the sharing GPU with the least room that still fits), or nullopt when it
// does not fit: node not ready, CPU, memory, GPU model or memory, or GPUs.
std::optional<std::vector<std::uint32_t>> FitReplica(const sched::NodeView& node,
                                                     const model::Resources& r);

}  // namespace berth::sim
