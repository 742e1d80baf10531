// What one scheduling cycle decides. The control loop is the only place that
// applies a plan, in one store transaction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/reason.h"

namespace berth::sched {

struct ReplicaPlacement {
  std::uint32_t replica = 0;
  std::string node;
  std::vector<std::uint32_t> gpu_indices;  // node-local, ascending
};

// A whole gang: every replica of the job, or the job is not in the plan.
struct Placement {
  std::int64_t job_id = 0;
  std::vector<ReplicaPlacement> replicas;
};

struct PendingDecision {
  std::int64_t job_id = 0;
  model::Reason reason;
};

struct Plan {
  std::vector<Placement> placements;
  std::vector<PendingDecision> pending;  // a reason for every job left waiting
};

}  // namespace berth::sched
