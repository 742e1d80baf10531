// "Would run now if" hints, verified. The core finds a hint for a waiting
// job by a trial placement of the changed job, checked against its queue's
// quota (explain.cc); that trial sees the cluster as it was when the job's
// turn came, not the whole cycle the changed job would go through. A hint is
// shown only after the cycle itself agrees: the scheduler runs again on the
// same snapshot with that one change made to the job, and the hint stays
// only when that plan places the job. What the second run refuses (its
// queue's order, another queue's reservation, quota counted with the rest
// of the plan) the user is never promised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "model/reason.h"
#include "sched/plan.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"

namespace berth::sched {

// The one change a hint names, as model::WouldRun renders it.
struct Hint {
  enum class Kind {
    kGpusPerReplica,  // counts[kWouldFitGpusPerReplica]: the same GPUs in smaller replicas
    kGpuModel,        // detail "gpu_model=NAME": another GPU model
    kGpuMemory,       // detail "gpu_memory=BYTES": a lower GPU memory minimum
    kPool,            // detail "pool=NAME": another pool of its queue
    kPreemptible,     // detail "headroom_pool=NAME": preemptible, into a pool's headroom
    // detail "queue_pool=QUEUE POOL": the policy binds POOL to QUEUE too (a
    // platform admin's change, not the job's).
    kQueuePool,
  };
  Kind kind = Kind::kGpuModel;
  std::string value;       // the model, pool or headroom pool
  std::uint64_t number{};  // GPUs per replica, or GPU memory in bytes
  std::string queue{};     // kQueuePool: the queue whose pools bind the job
  bool operator==(const Hint&) const = default;
};

// The hint a reason carries, if any.
std::optional<Hint> HintOf(const model::Reason& reason);

// Removes the hint from a reason (the rest of it stands).
void DropHint(model::Reason& reason);

// The job with the hint's change made to it. False when the change does not
// apply (a per-replica GPU count that does not divide the job's GPUs) or is
// not the job's (kQueuePool changes the policy: HintHolds makes it).
bool ApplyHint(const Hint& hint, PendingJob& job);

// Whether `scheduler`, run on `snapshot` with `hint` applied to waiting job
// `job_id`, places that job. `scratch` is a copy of `snapshot` the check
// may change and gives back as it found it (so that many checks on one
// snapshot copy it once).
bool HintHolds(const Scheduler& scheduler, Snapshot& scratch, std::int64_t job_id,
               const Hint& hint);

// What VerifyHints did with the hints of one plan.
struct HintCheck {
  std::size_t found = 0;             // pending decisions carrying a hint
  std::size_t verified = 0;          // checked, and the cycle placed the job
  std::size_t refuted = 0;           // checked, and it did not: dropped
  std::size_t unchecked = 0;         // past the budget: dropped
  std::size_t kept_from_before = 0;  // past the budget, shown before: kept
};

// Checks the hints of `plan` (a plan for `snapshot` by `scheduler`): at most
// `budget` of them, each by one more cycle (HintHolds); a refuted hint is
// dropped from its reason. A hint the budget leaves unchecked is dropped,
// unless `shown_before(job_id, hint)` says it was verified and shown by an
// earlier pass. Hints not shown before are checked first, in job id order.
using ShownBefore = std::function<bool(std::int64_t job_id, const Hint& hint)>;
HintCheck VerifyHints(const Scheduler& scheduler, const Snapshot& snapshot, Plan& plan,
                      std::size_t budget, const ShownBefore& shown_before = {});

}  // namespace berth::sched
