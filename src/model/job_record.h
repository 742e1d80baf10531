// What Berth knows about one job and its runs: the records the control
// layer's transitions (control/transitions.h) read and change, and that a
// store (store/store.h) persists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "model/job.h"
#include "model/reason.h"

namespace berth::model {

// Why Berth (or an agent) stopped a run. The core works on the enum; the
// names are the stored and wire form ("preempted", "gpu_error", ...), and
// kNone ("") is a run that ended on its own. The edges that read a name from
// outside (the store, the agent stream) read one they do not know as
// kUnknown: a stop for a cause this version cannot tell, which neither
// requeues nor retries as an eviction would.
enum class StopCause {
  kNone,
  kCancelled,   // a user cancelled the job
  kMaxRuntime,  // it ran past its max_runtime
  kGang,        // a peer replica failed; a gang lives and dies together
  kPreempted,   // evicted for a higher-priority job
  kReclaimed,   // evicted to give a queue its guarantee back
  kMoved,       // evicted to move it (consolidation); it restarts elsewhere
  kDrained,     // its node is being drained
  kLost,        // berthd presumed its node gone
  kFenced,      // its agent, cut off from berthd, stopped it
  kGpuError,    // a GPU it held reported a hardware error
  kLiveness,    // a service replica's liveness probe failed; its agent stopped it
  kUnknown,     // "unknown": stopped, for a name this version does not know
};
std::string_view StopCauseName(StopCause cause);
// nullopt for a name this version does not know; the edges read it as
// kUnknown.
std::optional<StopCause> ParseStopCause(std::string_view name);
// Evicted by a scheduling decision (preempted, reclaimed, moved).
bool IsEviction(StopCause cause);

struct RunRecord {
  std::string run_id;  // "<job>.<replica>.<attempt>", never reused
  std::int64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::string node;
  std::vector<std::uint32_t> gpu_indices;
  std::vector<std::string> gpu_uuids;
  // A slice of gpu_indices[0] (the job's resources.gpu_share), else 0:
  // what the run holds of the card, fixed when it is placed.
  std::uint32_t gpu_share_millis = 0;
  std::uint64_t gpu_share_bytes = 0;
  RunState state = RunState::kStarting;
  std::int64_t pid = 0;
  // A service replica's port on its node, as its agent gave it; 0: none.
  std::uint32_t port = 0;
  std::optional<TimeMs> started_at_ms;
  std::optional<TimeMs> finished_at_ms;
  std::optional<std::int32_t> exit_code;
  std::optional<std::int32_t> signal;
  // Why it was stopped; kNone when it ended on its own.
  StopCause stopped_for = StopCause::kNone;
  std::string start_error;
  bool stop_requested = false;  // berthd wants this run stopped
  // The last checkpoint the run reported (file mtime or API), unix ms.
  std::optional<TimeMs> last_checkpoint_ms{};
  // For a run Berth stopped: whether it exited on its own within the grace
  // period (true) or was killed (false); nullopt when not stopped or unknown.
  std::optional<bool> clean_stop{};
  // For a failed run: its failure class (model::FailureClassName), read from
  // its log tail by berthd when the exit arrived; "" when it did not fail.
  std::string failure_class{};
  // Why Berth stopped it, in words, when the reason needs more than
  // stopped_for (the GPU error that stopped a "gpu_error" run).
  std::string stop_detail{};
  // A service replica's readiness as its agent's probes last said it
  // (agent.proto RunHealth); nullopt: no verdict yet. The probe's outcome
  // behind it, and when it last changed (unix ms).
  std::optional<bool> ready{};
  std::string probe_detail{};
  std::optional<TimeMs> ready_changed_ms{};

  bool operator==(const RunRecord&) const = default;
};

// Whether a run ended because its node was lost: presumed gone by berthd
// ("lost"), or stopped by its own agent, cut off from berthd ("fenced",
// docs/operations.md). Either is a node_lost failure for the retry policy.
inline bool RunLost(StopCause stopped_for) {
  return stopped_for == StopCause::kLost || stopped_for == StopCause::kFenced;
}

struct JobEvent {
  TimeMs time_ms = 0;
  JobState state = JobState::kPending;
  std::string event;  // Submitted, Scheduled, Started, Exited, CancelRequested, ...
  std::string message;
  // The policy version a scheduling decision was made under ("Scheduled").
  std::optional<std::int64_t> policy_version;
};

struct JobRecord {
  std::int64_t id = 0;
  JobSpec spec;
  JobState state = JobState::kPending;
  Reason reason;
  TimeMs submitted_at_ms = 0;
  std::optional<TimeMs> started_at_ms;
  std::optional<TimeMs> finished_at_ms;
  std::optional<std::int32_t> exit_code;
  std::optional<std::int32_t> signal;
  bool cancel_requested = false;
  std::string cancelled_by;  // who asked, when cancel_requested
  // The policy version in effect when the job was last scheduled.
  std::optional<std::int64_t> policy_version;
  // Failed attempts so far, and when a job waiting to retry may be placed
  // again (its retry policy's backoff); nullopt when it is not backing off.
  std::uint32_t failures = 0;
  std::optional<TimeMs> retry_after_ms;
  // Placements so far: the attempt number of its latest runs.
  std::uint32_t attempts = 0;
  std::string submitted_by;        // the identity that submitted it; "" before schema 5
  std::vector<RunRecord> runs;     // filled by GetJob and ListJobs
  std::vector<JobEvent> timeline;  // filled by GetJob only
};

// What an agent reports when a run's process ends.
struct RunExit {
  std::string run_id;
  std::int32_t exit_code = 0;
  std::int32_t signal = 0;
  std::optional<TimeMs> started_at_ms;
  TimeMs ended_at_ms = 0;
  StopCause stopped_for = StopCause::kNone;
  std::string start_error;
  std::optional<bool> clean_stop{};  // see RunRecord
  std::string failure_class{};       // see RunRecord
  std::optional<TimeMs> last_checkpoint_ms{};
  // The run was stopped before it was ever started (its start order never
  // reached the agent): no process ran, so no runtime and no GPU time. Only
  // honoured for a run still Starting; a run the agent reported started
  // keeps its start.
  bool never_started = false;
  // From the run's cgroup: the kernel's OOM kills and the memory it used
  // against its limit; a failed run with an OOM kill is host_out_of_memory.
  std::uint64_t oom_kills = 0;
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t memory_limit_bytes = 0;
};

// What one transition does to one job (control/transitions.h): the job as
// it leaves it and the events it appends to its timeline, in order. A store
// persists it as given, inside the transaction of the batch it belongs to.
struct JobUpdate {
  JobRecord job;
  std::vector<JobEvent> events;
};

}  // namespace berth::model
