// The job lifecycle as named, pure transitions. Each takes the records it
// changes (model/job_record.h) and returns what it does to them: the job as
// it leaves it and the events it appends. None reads a clock, a store or the
// network; a store applies them inside the transaction that persists their
// result (store/store.h), and berth-sim applies the same ones
// (sim/lifecycle.h).
//
// Layering (docs/architecture.md): control's transitions sit between sched
// and store. They may use model and sched; store, the control loop and the
// API use them; they include nothing above them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/job_record.h"
#include "model/node.h"
#include "model/policy.h"
#include "sched/plan.h"

namespace berth::control {

// What follows once every run of the job's latest attempt has exited, as
// the first matching rule decides:
//   1. cancel requested              -> Cancelled (by whom)
//   2. evicted or drained, no fault  -> Pending again, same identity (Requeued)
//   3. a GPU error                   -> Failed (gpu_hardware)
//   4. max runtime                   -> Failed (max_runtime)
//   5. node lost or fenced           -> Failed (node_lost)
//   6. could not start               -> Failed (command_not_found or run_identity)
//   7. a replica exited non-zero     -> Failed (its failure class, else user_code)
//   8. otherwise                     -> Succeeded
// A failure whose class the job's retry policy names, with attempts left,
// returns the job to Pending after the backoff (doubled per failure, capped
// at model::kMaxRetryBackoffMs) instead (Retrying). Its attempts are the
// fewer of its retry.max_attempts and `cap`, the policy's retry cap on its
// queue (model::AttemptCapOf) in force as the attempt settles; when the cap
// is what stops a retry, the failure's reason says so (counts retry_cap,
// retry_asked, and retry_cap_queue when the cap is a queue's).
// nullopt while a run of the latest attempt has not exited.
std::optional<model::JobUpdate> SettleAttempt(
    const model::JobRecord& job, TimeMs now,
    const std::optional<model::AttemptCap>& cap = std::nullopt);

// An agent reported that run `run_id` of `job` started (process `pid`, at
// `started_at`, the agent's clock). The run becomes Running; the first
// replica to start makes a Scheduled job Running; the timeline gets a
// Started event. nullopt when the job has no such run or it is no longer
// Starting (a repeated report changes nothing). The job's `runs` holds the
// run as started.
struct StartUpdate {
  model::RunRecord run;
  model::JobUpdate job;
};
// `port`: a service replica's port on its node (0: none).
std::optional<StartUpdate> StartRun(const model::JobRecord& job, const std::string& run_id,
                                    std::int64_t pid, TimeMs started_at, std::uint32_t port = 0);

// An agent's probes changed their verdict on service replica run `run_id`
// (agent.proto RunHealth): it is ready, or not, at `at` (the agent's
// clock); `liveness_failed`: its agent is stopping it, and `detail` becomes
// its stop detail. The timeline gets a Ready / NotReady / LivenessFailed
// event. nullopt when the job has no such run, the run has exited, or the
// verdict is the one recorded already.
std::optional<model::JobUpdate> RecordRunHealth(const model::JobRecord& job,
                                                const std::string& run_id, bool ready,
                                                bool liveness_failed, const std::string& detail,
                                                TimeMs at);

// An agent reported that run `exit.run_id` of `job` ended. The run becomes
// Exited with what it reported (Berth's own stop cause wins over the
// agent's echo, except max_runtime; a run never started keeps no start
// time), the job's timeline gets an Exited event saying how it ended and
// how its checkpoint handshake went, and when the exit dooms the attempt (a
// failure, or a lost node) the replicas still running are asked to stop
// ("gang": a gang lives and dies together). The attempt is then settled as
// SettleAttempt says, in the same update. nullopt when the job has no such
// run or its exit is already recorded: an exit is recorded once.
struct ExitUpdate {
  model::RunRecord run;  // the run as it ends
  model::JobUpdate job;  // runs with the gang's stops; settled if it was the last
  bool settled = false;  // the attempt ended with this exit
};
// `cap`: as SettleAttempt's.
std::optional<ExitUpdate> RecordExit(const model::JobRecord& job, const model::RunExit& exit,
                                     TimeMs now,
                                     const std::optional<model::AttemptCap>& cap = std::nullopt);

// An eviction the scheduler decided: the job's active runs are asked to stop
// for the eviction's cause, its reason becomes the eviction's, and its
// timeline (and, for a move, the timeline of the job it makes room for,
// `by`) says so. nullopt when there is nothing left to evict: the job
// finished or a cancel is in flight since the plan was made. The runs in
// the returned job are the ones to stop (stop_requested, stopped_for set).
struct EvictionUpdate {
  model::JobUpdate victim;
  std::optional<model::JobUpdate> by;  // a move: the job it makes room for
};
std::optional<EvictionUpdate> EvictJob(const model::JobRecord& job, const sched::Eviction& eviction,
                                       const model::JobRecord* by, TimeMs now);

// A user (`by`) cancels the job. A Pending job is Cancelled at once; a
// Scheduled or Running one is marked cancel-requested and its active runs
// asked to stop ("cancelled", over any earlier stop cause): it becomes
// Cancelled when they have exited (SettleAttempt). A finished job is
// refused (FailedPrecondition, naming its state) and nothing changes.
[[nodiscard]] Result<model::JobUpdate> CancelJob(const model::JobRecord& job, const std::string& by,
                                                 TimeMs now);

// Berth stops the job's active runs not yet stopping, for `cause` (a gang
// peer's failure, a max runtime). nullopt when none is left to stop.
std::optional<model::JobUpdate> StopJob(const model::JobRecord& job, model::StopCause cause);

// GPU `gpu` of `node` reported a hardware error (`detail`, e.g. "Xid 79"):
// the job's runs holding it stop as "gpu_error" (failure class
// gpu_hardware, the detail kept for its reason), its other active runs as
// "gang", and its timeline gets a GpuFailed event per run hit. nullopt when
// no active run of the job holds that GPU.
std::optional<model::JobUpdate> FailGpu(const model::JobRecord& job, const std::string& node,
                                        std::uint32_t gpu, const std::string& detail, TimeMs now);

// `node` is being drained: every active run of a job with a replica there
// (the whole gang, wherever its other replicas run) stops as "drained", and
// the job is queued again without counting a failure when they have exited.
// nullopt when the job has no run there left to stop.
std::optional<model::JobUpdate> DrainJob(const model::JobRecord& job, const std::string& node,
                                         TimeMs now);

// What an approved quota request changes: the quota of `resource` (a quota
// key: "gpus", "gpus/H100-80GB", "cpu", ...) of queue `queue` (its policy
// path), each value that is set, in the policy's units.
struct QuotaChange {
  std::int64_t request_id = 0;
  std::string queue;
  std::string resource;
  std::optional<std::int64_t> guaranteed;
  std::optional<std::int64_t> borrow_limit;
  std::optional<std::int64_t> weight;
  std::optional<std::int64_t> lending_limit;
};

// Approving a quota request: the active policy (version `version`) with the
// change made, to be validated and applied as a new policy version like any
// other. Refused (FailedPrecondition) when the policy no longer has the
// queue, and (Internal) for a resource no quota key names.
[[nodiscard]] Result<model::Policy> ApproveQuota(const model::Policy& active, std::int64_t version,
                                                 const QuotaChange& change);

// The nodes a plan was made on, by name.
using NodeIndex = std::map<std::string, const model::NodeInfo*, std::less<>>;

// A placement the scheduler decided: the job becomes Scheduled, under
// `policy_version`, with one new Starting run per replica of its next
// attempt (GPU UUIDs and the slice it holds taken from `nodes`). nullopt
// when the job is no longer Pending or a cancel is in flight. The returned
// job's `runs` holds only the new runs.
std::optional<model::JobUpdate> PlaceJob(const model::JobRecord& job,
                                         const sched::Placement& placement, const NodeIndex& nodes,
                                         std::int64_t policy_version, TimeMs now);

}  // namespace berth::control
