// berth-sim's jobs as the control layer sees them: each simulated job keeps
// a model::JobRecord, and what happens to its state (placed, started,
// evicted, finished, hit by a node failure) goes through the same
// transitions the server's store applies (control/transitions.h). The
// engine (engine.cc) keeps the timing model (work saved by checkpoints,
// restart overhead, durations) and its own bookkeeping; each function here
// checks that the record agrees with it and answers Internal when it does
// not, so the simulator cannot drift from the server unnoticed.
//
// Events the transitions return are dropped: nothing in the simulator reads
// a timeline, and at tens of thousands of jobs keeping them would cost
// memory for nothing. A record's `timeline` therefore stays empty.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/transitions.h"
#include "model/job_record.h"
#include "model/node.h"
#include "sched/plan.h"
#include "sched/snapshot.h"
#include "sim/trace.h"

namespace berth::sim {

// The cluster as PlaceJob reads it (the GPUs' UUIDs and memory, by node),
// made once from the simulator's nodes. Not copyable: `index` points into
// `infos`.
class SimNodes {
 public:
  explicit SimNodes(const std::vector<sched::NodeView>& nodes);
  SimNodes(const SimNodes&) = delete;
  SimNodes& operator=(const SimNodes&) = delete;
  const control::NodeIndex& index() const { return index_; }

 private:
  std::vector<model::NodeInfo> infos_;
  control::NodeIndex index_;
};

// A job as it arrives: Pending, its spec from the trace's job. Its retry
// policy retries a node_lost failure at once and without limit: the
// simulator's assumption that a job stopped by a node failure goes back to
// the queue (docs/evaluation.md), stated as the policy a real job would
// carry for it.
model::JobRecord ArrivedJob(const SimJob& job);

// A plan's placement: PlaceJob, then StartRun for each new run (the
// simulator starts runs the moment they are placed). The job must be
// Pending; a placement PlaceJob refuses is Internal.
Status PlaceAndStart(model::JobRecord& job, const sched::Placement& placement,
                     const control::NodeIndex& nodes, std::int64_t policy_version, TimeMs now);

// A plan's eviction, taking effect at once: EvictJob, then RecordExit for
// each run it stops, exiting at `now`. The job is Pending again after.
Status EvictAndExit(model::JobRecord& job, const sched::Eviction& eviction, TimeMs now);

// The job ran its full duration: every run exits 0 at `now` (RecordExit).
// The job is Succeeded after.
Status Complete(model::JobRecord& job, TimeMs now);

// `node` failed under the job: its runs there end as the server records a
// lost node's runs ("lost", exit -1), its other replicas stop with the gang
// (RecordExit), and the attempt settles as a node_lost failure, which the
// job's retry policy (ArrivedJob) returns to Pending. `failures` is the
// simulator's count of node failures the job has been hit by, this one
// included: the record's must agree.
Status LoseNode(model::JobRecord& job, const std::string& node, std::int64_t failures, TimeMs now);

}  // namespace berth::sim
