// The scheduler seam: a pure function from (snapshot, time) to a plan. No
// I/O, no clock reads, no globals; the same inputs always give the same plan.
// berthd and berth-sim both call it through this interface.
#pragma once

#include "sched/plan.h"
#include "sched/snapshot.h"

namespace berth::sched {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  [[nodiscard]] virtual Plan Schedule(const Snapshot& snapshot) const = 0;
};

}  // namespace berth::sched
