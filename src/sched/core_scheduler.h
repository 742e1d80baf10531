// The scheduling core: quota and borrowing, fair order across queues,
// priority order within them, gangs, placement filters and packing, reclaim
// and preemption, and a reason with numbers for every job left waiting.
// Semantics and examples: docs/scheduling.md. Pure: the same snapshot always
// gives the same plan.
#pragma once

#include "sched/scheduler.h"

namespace berth::sched {

class CoreScheduler final : public Scheduler {
 public:
  [[nodiscard]] Plan Schedule(const Snapshot& snapshot) const override;
};

}  // namespace berth::sched
