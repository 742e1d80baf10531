// Durable state of the control plane. Every method that changes state returns
// only after the change is durable (committed and synced), so anything the
// API acknowledges survives kill -9. Each mutation is one transaction and
// appends the job events it causes, which make up the job's timeline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/job.h"
#include "model/node.h"
#include "model/reason.h"
#include "sched/plan.h"

namespace berth::store {

struct RunRecord {
  std::string run_id;  // "<job>.<replica>.<attempt>", never reused
  std::int64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::string node;
  std::vector<std::uint32_t> gpu_indices;
  std::vector<std::string> gpu_uuids;
  model::RunState state = model::RunState::kStarting;
  std::int64_t pid = 0;
  std::optional<TimeMs> started_at_ms;
  std::optional<TimeMs> finished_at_ms;
  std::optional<std::int32_t> exit_code;
  std::optional<std::int32_t> signal;
  std::string stopped_for;  // "", "cancelled", "max_runtime", "gang"
  std::string start_error;
  bool stop_requested = false;  // berthd wants this run stopped
};

struct JobEvent {
  TimeMs time_ms = 0;
  model::JobState state = model::JobState::kPending;
  std::string event;  // Submitted, Scheduled, Started, Exited, CancelRequested, ...
  std::string message;
};

struct JobRecord {
  std::int64_t id = 0;
  model::JobSpec spec;
  model::JobState state = model::JobState::kPending;
  model::Reason reason;
  TimeMs submitted_at_ms = 0;
  std::optional<TimeMs> started_at_ms;
  std::optional<TimeMs> finished_at_ms;
  std::optional<std::int32_t> exit_code;
  std::optional<std::int32_t> signal;
  bool cancel_requested = false;
  std::vector<RunRecord> runs;     // filled by GetJob and ListJobs
  std::vector<JobEvent> timeline;  // filled by GetJob only
};

struct JobFilter {
  std::vector<model::JobState> states;  // empty: any
  std::string tenant;                   // empty: any
  std::string queue;                    // empty: any
  std::size_t limit = 1000;
};

struct NodeRecord {
  model::NodeInfo info;
  model::NodeState state = model::NodeState::kNotReady;
  TimeMs state_changed_ms = 0;
};

// What an agent reports when a run's process ends.
struct RunExit {
  std::string run_id;
  std::int32_t exit_code = 0;
  std::int32_t signal = 0;
  std::optional<TimeMs> started_at_ms;
  TimeMs ended_at_ms = 0;
  std::string stopped_for;
  std::string start_error;
};

class Store {
 public:
  virtual ~Store() = default;

  // --- tenants and queues (the skeleton has default/default) ---
  [[nodiscard]] virtual Result<bool> QueueExists(const std::string& tenant,
                                                 const std::string& queue) = 0;

  // --- jobs ---
  [[nodiscard]] virtual Result<std::int64_t> CreateJob(const model::JobSpec& spec, TimeMs now) = 0;
  [[nodiscard]] virtual Result<JobRecord> GetJob(std::int64_t id) = 0;
  [[nodiscard]] virtual Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;
  // Jobs the scheduler should look at: Pending, oldest first.
  [[nodiscard]] virtual Result<std::vector<JobRecord>> PendingJobs() = 0;
  // Runs in Starting or Running state, on any node, with their job ids.
  [[nodiscard]] virtual Result<std::vector<RunRecord>> ActiveRuns() = 0;

  // Pending: cancels at once. Scheduled/Running: marks cancel requested and
  // its runs stop-requested; the job becomes Cancelled when they exit.
  [[nodiscard]] virtual Result<JobRecord> CancelJob(std::int64_t id, const std::string& by,
                                                    TimeMs now) = 0;

  // Applies one scheduling cycle's decisions in one transaction: placed jobs
  // become Scheduled with new runs; pending jobs get their reason (written
  // only when it changed).
  [[nodiscard]] virtual Status ApplyPlan(const sched::Plan& plan,
                                         const std::vector<NodeRecord>& nodes, TimeMs now) = 0;

  [[nodiscard]] virtual Status MarkRunStarted(const std::string& run_id, std::int64_t pid,
                                              TimeMs started_at, TimeMs now) = 0;
  // Idempotent: an exit already recorded is not recorded again. Returns the
  // job after the change, so the caller can stop the rest of a failed gang.
  [[nodiscard]] virtual Result<JobRecord> MarkRunExited(const RunExit& exit, TimeMs now) = 0;
  // Requests a stop of every active run of the job (gang failure, max runtime).
  [[nodiscard]] virtual Status RequestStop(std::int64_t job_id, const std::string& why,
                                           TimeMs now) = 0;
  [[nodiscard]] virtual Result<std::optional<RunRecord>> GetRun(const std::string& run_id) = 0;

  // --- nodes ---
  [[nodiscard]] virtual Status UpsertNode(const model::NodeInfo& info, TimeMs now) = 0;
  [[nodiscard]] virtual Status SetNodeState(const std::string& name, model::NodeState state,
                                            TimeMs now) = 0;
  [[nodiscard]] virtual Result<std::vector<NodeRecord>> ListNodes() = 0;
};

}  // namespace berth::store
