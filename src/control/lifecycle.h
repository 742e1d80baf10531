// The job lifecycle's writes: each loads the records it decides on in one
// store transaction (store::JobStore::UpdateJobs), applies the named
// transitions (control/transitions.h) and writes what they made of them,
// all or nothing. The store persists; these decide. The control loop, the
// API and the tests call these, never a backend's own lifecycle code, so a
// second backend (an in-memory one for tests, PostgreSQL) implements only
// loading and writing, and behaves the same by construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/job_record.h"
#include "model/policy.h"
#include "sched/plan.h"
#include "store/store.h"

namespace berth::control {

// Pending: cancels at once. Scheduled/Running: marks cancel requested and
// its runs stop-requested; the job becomes Cancelled when they exit. A
// finished job: FailedPrecondition naming its state. Returns the job after
// the change, with its timeline. `audit`, when set, makes the record of the
// cancel from the job before and after it, committed with it.
[[nodiscard]] Result<model::JobRecord> CancelJob(
    store::JobStore& store, std::int64_t id, const std::string& by, TimeMs now,
    const store::AuditOf<model::JobRecord, model::JobRecord>& audit = {});

// Cancels every element of an array that has not finished, as CancelJob
// does each, in one transaction. NotFound when no job has this array id.
// `audit`, when set, makes the record of it from the counts, committed with
// it.
[[nodiscard]] Result<store::ArrayCancel> CancelArray(
    store::JobStore& store, std::int64_t array_id, const std::string& by, TimeMs now,
    const store::AuditOf<store::ArrayCancel>& audit = {});

// Applies one scheduling cycle's decisions in one transaction, all or
// nothing: evicted jobs' runs are asked to stop (EvictJob), placed jobs
// become Scheduled with new runs recording `policy_version`, the policy the
// plan was made under (PlaceJob), and pending jobs get their reason
// (written only when it changed). `nodes`: the nodes the plan was made on.
[[nodiscard]] Status ApplyPlan(store::JobStore& store, const sched::Plan& plan,
                               const std::vector<store::NodeRecord>& nodes,
                               std::int64_t policy_version, TimeMs now);

// A plan of evictions only (ApplyPlan). Each evicted job's active runs are
// asked to stop (stopped_for "preempted", "reclaimed" or "moved") and its
// timeline records the decision (a move also in the timeline of the job it
// makes room for). When its runs have exited the job returns to Pending
// with the eviction as its reason, and its next placement is a new attempt.
[[nodiscard]] Status EvictJobs(store::JobStore& store,
                               const std::vector<sched::Eviction>& evictions, TimeMs now);

// A service replica's probes changed their verdict (RecordRunHealth);
// unknown runs are kNotFound, a repeated verdict changes nothing.
[[nodiscard]] Status MarkRunHealth(store::JobStore& store, const std::string& run_id, bool ready,
                                   bool liveness_failed, const std::string& detail, TimeMs at);
// An event on job `job_id`'s timeline that changes nothing else (a
// replica's cold start, measured by the service controller). kNotFound for
// an unknown job.
[[nodiscard]] Status AddJobEvent(store::JobStore& store, std::int64_t job_id,
                                 const std::string& event, const std::string& message, TimeMs at);
// An agent reported run `run_id` started (StartRun). NotFound for an
// unknown run; a repeated report changes nothing.
[[nodiscard]] Status MarkRunStarted(store::JobStore& store, const std::string& run_id,
                                    std::int64_t pid, TimeMs started_at, TimeMs now,
                                    std::uint32_t port = 0);

// An agent reported a run's exit (RecordExit, and SettleAttempt when it was
// the last of its attempt). Idempotent: an exit already recorded is not
// recorded again. Returns the job after the change (no timeline), so the
// caller can stop the rest of a failed gang. NotFound for an unknown run.
// `policy`: the policy in force, whose retry cap on the job's queue bounds
// its attempts (model::AttemptCapOf); null: no cap.
[[nodiscard]] Result<model::JobRecord> MarkRunExited(store::JobStore& store,
                                                     const model::RunExit& exit, TimeMs now,
                                                     const model::Policy* policy = nullptr);

// Requests a stop of every active run of the job for `why` (gang failure,
// max runtime): InvalidArgument for kNone and kUnknown, which are no cause
// to stop for. Nothing for an unknown job.
[[nodiscard]] Status RequestStop(store::JobStore& store, std::int64_t job_id, model::StopCause why,
                                 TimeMs now);

// Stops the active runs holding `gpu` on `node` (FailGpu: stopped_for
// "gpu_error", failure class gpu_hardware, `detail` kept). Returns the jobs
// affected.
[[nodiscard]] Result<std::vector<std::int64_t>> StopRunsOnGpu(store::JobStore& store,
                                                              const std::string& node,
                                                              std::uint32_t gpu,
                                                              const std::string& detail,
                                                              TimeMs now);

// Stops every active run on `node` (DrainJob: stopped_for "drained"); the
// jobs are queued again without counting a failure. Returns the jobs
// affected.
[[nodiscard]] Result<std::vector<std::int64_t>> StopRunsOnNode(store::JobStore& store,
                                                               const std::string& node, TimeMs now);

// Job `id` saved a checkpoint at `at` (the job's own call, with its job
// token): every active run of its latest attempt records it, in one
// transaction (a later report wins; an earlier one changes nothing).
// FailedPrecondition naming the job's state when no run is active; NotFound
// for an unknown job. Returns how many runs recorded it. `audit` makes the
// record from the job before and that count, committed with it.
[[nodiscard]] Result<int> RecordJobCheckpoint(
    store::JobStore& store, std::int64_t id, TimeMs at,
    const store::AuditOf<model::JobRecord, int>& audit = {});

// Approves quota request `id` (PolicyStore::ApproveQuotaRequest with the
// ApproveQuota rule): the active policy with the request's values becomes
// a new version.
[[nodiscard]] Result<store::QuotaRequest> ApproveQuotaRequest(
    store::PolicyStore& store, std::int64_t id, const std::string& by, const std::string& comment,
    TimeMs now, const store::AuditOf<store::QuotaRequest, store::QuotaRequest>& audit = {});

}  // namespace berth::control
