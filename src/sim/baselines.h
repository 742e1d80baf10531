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
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace berth::sim
