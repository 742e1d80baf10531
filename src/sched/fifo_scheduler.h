// The walking skeleton's placement: FIFO within each queue (priority is not
// yet considered), first fit over nodes in name order, whole gangs only. The
// scheduling core replaces it behind the same Scheduler interface.
#pragma once

#include "sched/scheduler.h"

namespace berth::sched {

class FifoScheduler final : public Scheduler {
 public:
  [[nodiscard]] Plan Schedule(const Snapshot& snapshot) const override;
};

}  // namespace berth::sched
