// What one scheduling cycle decides. The control loop is the only place that
// applies a plan, in one store transaction.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/reason.h"

namespace berth::sched {

struct ReplicaPlacement {
  std::uint32_t replica = 0;
  std::string node;
  std::vector<std::uint32_t> gpu_indices;  // node-local, ascending
  bool operator==(const ReplicaPlacement&) const = default;
};

// A whole gang: every replica of the job, or the job is not in the plan.
struct Placement {
  std::int64_t job_id = 0;
  std::vector<ReplicaPlacement> replicas;
  // Jobs whose eviction (in Plan::evictions) frees what this placement uses;
  // start it only after they have stopped.
  std::vector<std::int64_t> after_evicting{};
  // A running job moved to make room for another (consolidation): its new
  // place, taken once its own eviction (cause kMove) has stopped it. The job
  // is in Snapshot::running, not pending.
  bool moved = false;
  // Set when the placement takes its queue (or an ancestor) past its GPU
  // guarantee: it runs on capacity borrowed from other queues and may be
  // reclaimed. The numbers are milli-GPUs, with this placement counted.
  struct Borrowed {
    std::string queue;
    std::int64_t used_mgpu = 0;
    std::int64_t guaranteed_mgpu = 0;
  };
  std::optional<Borrowed> borrowed{};
  // Set when the job ran ahead of its queue's head, which waits for
  // capacity: it uses only nodes and GPUs the head could never use, so it
  // cannot delay the head (docs/scheduling.md, "Ahead of a blocked head").
  // `causes`: why the head could never use them, as node causes of
  // model::Reason (gpu_model_mismatch, outside_pool, ...), with how many of
  // the job's nodes each holds for.
  struct AheadOf {
    std::int64_t head_job = 0;
    std::map<std::string, std::int64_t, std::less<>> causes;
  };
  std::optional<AheadOf> ahead_of{};
};

enum class EvictionCause { kReclaim, kPreempt, kMove };
std::string_view EvictionCauseName(EvictionCause cause);

// A running job to stop (and requeue) so that `by_job` can be placed.
struct Eviction {
  std::int64_t job_id = 0;
  std::int64_t by_job = 0;
  std::string by_queue;  // "tenant/queue" of by_job
  EvictionCause cause = EvictionCause::kReclaim;
  std::int64_t work_lost_ms = 0;  // now - last checkpoint, else now - start
  model::Reason reason;           // kReclaimed / kPreempted / kMoved, for the victim's timeline
  // kMove: where the job runs now and where it restarts (its Placement with
  // `moved` in the same plan).
  std::vector<ReplicaPlacement> moved_from{};
  std::vector<ReplicaPlacement> moved_to{};
};

struct PendingDecision {
  std::int64_t job_id = 0;
  model::Reason reason;
};

// GPUs held for a waiting queue head (backfill): running jobs release them by
// start_ms at the latest (their max runtime), and nothing placed on them in
// this cycle ends later than start_ms. Only jobs with a max runtime may use
// them meanwhile.
struct Reservation {
  std::int64_t job_id = 0;
  std::int64_t start_ms = 0;  // absolute; the job's estimated start
  std::vector<ReplicaPlacement> replicas;
};

struct Plan {
  std::vector<Placement> placements;
  std::vector<PendingDecision> pending;  // a reason for every job left waiting
  std::vector<Eviction> evictions{};
  std::vector<Reservation> reservations{};  // in the order they were made
};

}  // namespace berth::sched
