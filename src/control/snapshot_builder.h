// Builds the scheduler's immutable view of the cluster from stored state
// (nodes, active runs, pending jobs, the active policy) and the live lease
// state only the controller knows. Kept apart from the control loop so the
// mapping from store records to scheduler inputs is readable in one place.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/policy.h"
#include "sched/plan.h"
#include "sched/snapshot.h"
#include "store/store.h"

namespace berth::server {

using SpecLookup = std::function<Result<model::JobSpec>(std::int64_t job_id)>;

struct SnapshotInputs {
  TimeMs now_ms = 0;
  const std::vector<store::NodeRecord>* nodes = nullptr;
  const std::map<std::string, bool>* ready = nullptr;  // node -> lease is live
  const std::vector<store::RunRecord>* active_runs = nullptr;
  const store::PendingQueue* pending = nullptr;
  const model::Policy* policy = nullptr;
  // Per leaf queue ("tenant/queue"), milli-GPU-seconds; nullptr: none.
  const std::map<std::string, std::int64_t>* decayed_usage = nullptr;
  // Finished runs to predict run times from (control/runtime_feed.h);
  // nullptr: no predictions.
  const sched::RuntimeHistory* history = nullptr;
};

// A stored node as the scheduler sees it with nothing running: cordoned
// when cordoned or drained, its cordoned GPUs unhealthy.
sched::NodeView NodeViewFor(const store::NodeRecord& node, bool ready);

// The placement and pools a job's spec asks for, as a snapshot holds it.
sched::PendingJob PendingFrom(const store::JobRecord& job);

[[nodiscard]] Result<sched::Snapshot> BuildSnapshot(const SnapshotInputs& in,
                                                    const SpecLookup& spec_of);

// Marks each job a reason of `plan` names (model::kJobRefKeys) that belongs to
// another tenant than the job the reason is about (model::MarkOtherTenantJob),
// by the tenants `snap` holds; a reference whose job `snap` does not hold is
// marked too. The ids stay: the API hides them from a reader who cannot read
// every tenant's jobs.
void MarkOtherTenantJobs(sched::Plan& plan, const sched::Snapshot& snap);

}  // namespace berth::server
