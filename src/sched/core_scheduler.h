// The scheduling core: quota and borrowing, fair order across queues,
// priority order within them, gangs, placement filters and packing, reclaim
// and preemption, and a reason with numbers for every job left waiting.
// Semantics and examples: docs/scheduling.md. Pure: the same snapshot always
// gives the same plan.
#pragma once

#include <cstddef>

#include "sched/placement.h"
#include "sched/scheduler.h"

namespace berth::sched {

// How the core places, where a caller measures a choice (berth-sim); the
// defaults are berthd's.
struct CoreOptions {
  // Up to this many nodes FGD scores every node a replica fits; above it a
  // bounded candidate set (Cluster::SetFgdExactNodes).
  std::size_t fgd_exact_nodes = Cluster::kFgdExactNodes;
};

class CoreScheduler final : public Scheduler {
 public:
  CoreScheduler() = default;
  explicit CoreScheduler(const CoreOptions& options) : options_(options) {}
  [[nodiscard]] Plan Schedule(const Snapshot& snapshot) const override;

 private:
  CoreOptions options_;
};

}  // namespace berth::sched
