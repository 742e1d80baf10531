#include "control/transitions.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <string>

#include "common/units.h"
#include "model/message_template.h"
#include "model/policy.h"
#include "model/reason.h"
#include "model/reason_catalogue.h"

namespace berth::control {

using model::JobRecord;
using model::JobState;
using model::JobUpdate;
using model::Reason;
using model::ReasonCode;
using model::RunRecord;
using model::StopCause;

namespace {

// The runs of the latest attempt, as the rules of SettleAttempt see them:
// the first of each kind.
struct Attempt {
  const RunRecord* failed = nullptr;
  const RunRecord* max_runtime = nullptr;
  const RunRecord* start_error = nullptr;
  const RunRecord* lost = nullptr;
  const RunRecord* gpu = nullptr;
  const RunRecord* evicted = nullptr;
  const RunRecord* liveness = nullptr;
};

std::optional<Attempt> ReadAttempt(const JobRecord& job) {
  std::uint32_t latest = 0;
  for (const auto& r : job.runs) latest = std::max(latest, r.attempt);
  Attempt a;
  auto first = [](const RunRecord*& slot, const RunRecord& r) {
    if (slot == nullptr) slot = &r;
  };
  for (const auto& r : job.runs) {
    if (r.attempt != latest) continue;
    if (r.state != model::RunState::kExited) return std::nullopt;  // still running
    const StopCause cause = r.stopped_for;
    const bool lost = model::RunLost(cause);
    if (cause == StopCause::kMaxRuntime) first(a.max_runtime, r);
    if (lost) first(a.lost, r);
    if (cause == StopCause::kGpuError) first(a.gpu, r);
    if (cause == StopCause::kLiveness) first(a.liveness, r);
    if (model::IsEviction(cause) || cause == StopCause::kDrained) first(a.evicted, r);
    if (!r.start_error.empty() && !lost) first(a.start_error, r);
    const bool bad = r.exit_code.value_or(0) != 0 || r.signal.value_or(0) != 0;
    // Replicas Berth stopped because a peer failed are not the cause.
    if (bad && cause == StopCause::kNone) first(a.failed, r);
  }
  return a;
}

// `evicted` is a run of u.job (unchanged here).
void Requeue(JobUpdate& u, const RunRecord& evicted, TimeMs now) {
  u.job.state = JobState::kPending;
  u.job.started_at_ms.reset();
  std::string message;
  switch (evicted.stopped_for) {
    case StopCause::kMoved:
      message = "every replica stopped for the move; it restarts on the GPUs planned for it";
      break;
    case StopCause::kDrained:
      u.job.reason = {ReasonCode::kDrained, {{"replica", evicted.replica}}, evicted.node};
      message = fmt::format(
          "every replica stopped because node {} is being drained; waiting to be placed "
          "elsewhere",
          evicted.node);
      break;
    default:
      // The reason recorded at eviction (who, why, work lost) stays until it
      // is placed again.
      message = fmt::format("every replica stopped after it was {}; waiting to be placed again",
                            model::StopCauseName(evicted.stopped_for));
      break;
  }
  u.events.push_back({now, JobState::kPending, "Requeued", std::move(message), std::nullopt});
}

// The retry policy's backoff before the `failures`-th retry: doubled for
// each failure so far, capped.
std::int64_t Backoff(const model::Retry& retry, std::uint32_t failures) {
  std::int64_t backoff = retry.backoff_ms;
  for (std::uint32_t i = 1; i < failures && backoff < model::kMaxRetryBackoffMs; ++i) {
    backoff *= 2;
  }
  return std::min(backoff, model::kMaxRetryBackoffMs);
}

// SettleAttempt on u.job in place, its events appended to u.events: false
// (and nothing changed) while a run of the latest attempt has not exited.
// RecordExit settles the update it builds this way, without a copy of the
// job. What it reads of the job it reads before it writes it; `a` points
// into u.job.runs, which it does not change. `cap`: the policy's retry cap
// on the job's queue, in force as the attempt settles.
bool SettleInto(JobUpdate& u, TimeMs now, const std::optional<model::AttemptCap>& cap) {
  const JobRecord& job = u.job;
  const auto read = ReadAttempt(job);
  if (!read) return false;
  const Attempt& a = *read;
  const bool faulted = a.gpu != nullptr || a.lost != nullptr;
  if (!job.cancel_requested && a.evicted != nullptr && a.failed == nullptr &&
      a.start_error == nullptr && !faulted) {
    Requeue(u, *a.evicted, now);
    return true;
  }
  JobState state = JobState::kSucceeded;
  Reason reason{ReasonCode::kSucceeded, {}, {}};
  std::string failure_class;  // of a failed attempt: decides a retry
  if (job.cancel_requested) {
    state = JobState::kCancelled;
    reason = {ReasonCode::kCancelled, {}, job.cancelled_by};
  } else if (a.gpu != nullptr) {
    state = JobState::kFailed;
    reason = {ReasonCode::kGpuFailed, {{"replica", a.gpu->replica}}, a.gpu->stop_detail};
    failure_class = "gpu_hardware";
  } else if (a.max_runtime != nullptr) {
    state = JobState::kFailed;
    reason = {
        ReasonCode::kMaxRuntimeExceeded,
        {{"max_runtime_s", job.spec.max_runtime_ms / 1000}, {"replica", a.max_runtime->replica}},
        {}};
    failure_class = "max_runtime";
  } else if (a.liveness != nullptr) {
    state = JobState::kFailed;
    reason = {
        ReasonCode::kLivenessFailed, {{"replica", a.liveness->replica}}, a.liveness->stop_detail};
    failure_class = "user_code";
  } else if (a.lost != nullptr) {
    state = JobState::kFailed;
    const std::string detail =
        a.lost->stopped_for == StopCause::kFenced
            ? fmt::format("its agent on {} lost contact with berthd and stopped it (fenced)",
                          a.lost->node)
            : a.lost->start_error;
    reason = {ReasonCode::kRunLost, {{"replica", a.lost->replica}}, detail};
    failure_class = "node_lost";
  } else if (a.start_error != nullptr) {
    state = JobState::kFailed;
    reason = {ReasonCode::kFailedToStart,
              {{"replica", a.start_error->replica}},
              a.start_error->start_error};
    failure_class = "command_not_found";
    if (a.start_error->failure_class == "run_identity") {
      // Not the job's command: the node could not run it as its tenant.
      reason.counts["run_identity"] = 1;
      failure_class = "run_identity";
    }
  } else if (a.failed != nullptr) {
    state = JobState::kFailed;
    reason = {ReasonCode::kFailedExitCode, {{"replica", a.failed->replica}}, {}};
    // One of the two: an exit code, or the signal that killed it.
    if (a.failed->signal) {
      reason.counts["signal"] = *a.failed->signal;
    } else {
      reason.counts["exit_code"] = a.failed->exit_code.value_or(0);
    }
    failure_class = a.failed->failure_class.empty() ? "user_code" : a.failed->failure_class;
  }
  if (state == JobState::kFailed) {
    const std::uint32_t failures = job.failures + 1;
    const auto& retry = job.spec.retry;
    const bool retries =
        std::find(retry.on.begin(), retry.on.end(), failure_class) != retry.on.end();
    u.job.failures = failures;
    const std::uint32_t max_attempts = model::EffectiveMaxAttempts(retry.max_attempts, cap);
    if (retries && failures < max_attempts) {
      // Back to the queue with the same identity after the backoff.
      const std::int64_t backoff = Backoff(retry, failures);
      u.job.state = JobState::kPending;
      u.job.started_at_ms.reset();
      u.job.retry_after_ms = now + backoff;
      u.job.reason = {ReasonCode::kRetrying,
                      {{"failures", failures},
                       {"max_attempts", max_attempts},
                       {"backoff_s", (backoff + 999) / 1000}},
                      fmt::format("{}: {}", failure_class, model::RenderReason(reason))};
      u.events.push_back(
          {now, JobState::kPending, "Retrying", model::RenderReason(u.job.reason), std::nullopt});
      return true;
    }
    if (failures > 1) reason.counts["attempts"] = failures;
    reason.counts[retries ? "retries_exhausted" : "retry_class_excluded"] = 1;
    if (cap && retries && failures < retry.max_attempts) {
      // The policy's cap, not the job's block, stopped the retry: say whose
      // cap and what the job asked for (model/reason.cc renders it).
      reason.counts["retry_cap"] = max_attempts;
      reason.counts["retry_asked"] = retry.max_attempts;
      if (!cap->queue.empty()) reason.counts["retry_cap_queue"] = 1;
    }
  }
  // A replica killed by a signal has no exit code, and one that exited has
  // no signal: unset, not 0, so readers need not guess.
  const RunRecord* cause = a.failed != nullptr ? a.failed : a.start_error;
  std::optional<std::int32_t> code = 0;
  std::optional<std::int32_t> sig;
  if (faulted) {
    code.reset();
  } else if (cause != nullptr) {
    code = cause->exit_code;
    sig = cause->signal;
  } else if (a.max_runtime != nullptr) {
    code = a.max_runtime->exit_code;
    sig = a.max_runtime->signal;
  } else if (a.liveness != nullptr) {
    code = a.liveness->exit_code;
    sig = a.liveness->signal;
  }
  u.job.state = state;
  u.job.reason = reason;
  u.job.finished_at_ms = now;
  u.job.exit_code = code;
  u.job.signal = sig;
  u.events.push_back({now, state, std::string(model::JobStateName(state)),
                      model::RenderReason(reason), std::nullopt});
  return true;
}

}  // namespace

std::optional<JobUpdate> SettleAttempt(const JobRecord& job, TimeMs now,
                                       const std::optional<model::AttemptCap>& cap) {
  if (!ReadAttempt(job)) return std::nullopt;
  JobUpdate u{job, {}};
  SettleInto(u, now, cap);
  return u;
}

namespace {

// The checkpoint handshake's outcome for an Exited event: whether a run that
// Berth stopped had time to save its work, and how old its last checkpoint
// is. Users deciding whether to trust a resumed run read exactly this.
std::string CheckpointNote(bool stopped, const model::RunExit& exit,
                           std::optional<TimeMs> stored_checkpoint_ms) {
  std::string note;
  if (exit.clean_stop && stopped) {
    note += *exit.clean_stop ? "; it exited within its grace period"
                             : "; it was killed after its grace period (no clean checkpoint)";
  }
  std::optional<TimeMs> checkpoint = exit.last_checkpoint_ms;
  if (stored_checkpoint_ms && (!checkpoint || *stored_checkpoint_ms > *checkpoint)) {
    checkpoint = stored_checkpoint_ms;
  }
  if (checkpoint && *checkpoint > 0) {
    const TimeMs before = std::max<TimeMs>(0, exit.ended_at_ms - *checkpoint);
    note += fmt::format("; last checkpoint {}.{} s before the exit", before / 1000,
                        (before % 1000) / 100);
  }
  return note;
}

}  // namespace

std::optional<StartUpdate> StartRun(const JobRecord& job, const std::string& run_id,
                                    std::int64_t pid, TimeMs started_at, std::uint32_t port) {
  auto it = std::find_if(job.runs.begin(), job.runs.end(),
                         [&](const RunRecord& r) { return r.run_id == run_id; });
  if (it == job.runs.end() || it->state != model::RunState::kStarting) return std::nullopt;
  StartUpdate out{*it, {job, {}}};
  out.run.state = model::RunState::kRunning;
  out.run.pid = pid;
  out.run.port = port;
  out.run.started_at_ms = started_at;
  for (auto& r : out.job.job.runs) {
    if (r.run_id == run_id) r = out.run;
  }
  if (job.state == JobState::kScheduled) {
    out.job.job.state = JobState::kRunning;
    out.job.job.started_at_ms = started_at;
    out.job.job.reason = {ReasonCode::kRunning, {}, {}};
  }
  out.job.events.push_back(
      {started_at, JobState::kRunning, "Started",
       port > 0
           ? fmt::format("replica {} started on {} (pid {}), serving on port {}", out.run.replica,
                         out.run.node, pid, port)
           : fmt::format("replica {} started on {} (pid {})", out.run.replica, out.run.node, pid),
       std::nullopt});
  return out;
}

std::optional<JobUpdate> RecordRunHealth(const JobRecord& job, const std::string& run_id,
                                         bool ready, bool liveness_failed,
                                         const std::string& detail, TimeMs at) {
  auto it = std::find_if(job.runs.begin(), job.runs.end(),
                         [&](const RunRecord& r) { return r.run_id == run_id; });
  if (it == job.runs.end() || it->state == model::RunState::kExited) return std::nullopt;
  const bool failed_now = liveness_failed && it->stop_detail != detail;
  if (it->ready == ready && !failed_now) return std::nullopt;
  JobUpdate u{job, {}};
  RunRecord& run = *std::find_if(u.job.runs.begin(), u.job.runs.end(),
                                 [&](const RunRecord& r) { return r.run_id == run_id; });
  const bool changed = run.ready != ready;
  run.ready = ready;
  run.probe_detail = detail;
  if (changed) run.ready_changed_ms = at;
  if (liveness_failed) {
    run.stop_detail = detail;
    u.events.push_back({at, job.state, "LivenessFailed",
                        fmt::format("replica {} on {}: {}; its agent is stopping it", run.replica,
                                    run.node, detail),
                        std::nullopt});
  } else {
    u.events.push_back({at, job.state, ready ? "Ready" : "NotReady",
                        fmt::format("replica {} on {} is {}: {}", run.replica, run.node,
                                    ready ? "ready" : "not ready", detail),
                        std::nullopt});
  }
  return u;
}

std::optional<ExitUpdate> RecordExit(const JobRecord& job, const model::RunExit& exit, TimeMs now,
                                     const std::optional<model::AttemptCap>& cap) {
  auto it = std::find_if(job.runs.begin(), job.runs.end(),
                         [&](const RunRecord& r) { return r.run_id == exit.run_id; });
  if (it == job.runs.end() || it->state == model::RunState::kExited) return std::nullopt;
  ExitUpdate out{*it, {job, {}}};
  RunRecord& run = out.run;
  const RunRecord before = *it;
  // Berth's own stop reason wins over the agent's echo (a gang stop arrives
  // at the agent as a plain stop); max_runtime and liveness are the agent's
  // to say.
  StopCause cause = before.stopped_for != StopCause::kNone ? before.stopped_for : exit.stopped_for;
  if (exit.stopped_for == StopCause::kMaxRuntime || exit.stopped_for == StopCause::kLiveness) {
    cause = exit.stopped_for;
  }
  // Never started: no start time, so neither runtime nor GPU time is metered.
  const bool never_started = exit.never_started && before.state == model::RunState::kStarting;
  run.state = model::RunState::kExited;
  run.exit_code = exit.exit_code;
  run.signal.reset();
  if (exit.signal != 0) {
    run.exit_code.reset();
    run.signal = exit.signal;
  }
  run.finished_at_ms = exit.ended_at_ms;
  if (!run.started_at_ms && !never_started) run.started_at_ms = exit.started_at_ms;
  run.stopped_for = cause;
  run.start_error = exit.start_error;
  run.clean_stop = exit.clean_stop;
  if (run.failure_class.empty()) run.failure_class = exit.failure_class;
  const TimeMs checkpoint =
      std::max(before.last_checkpoint_ms.value_or(0), exit.last_checkpoint_ms.value_or(0));
  run.last_checkpoint_ms = checkpoint == 0 ? std::nullopt : std::optional<TimeMs>(checkpoint);

  std::string how =
      never_started ? std::string(
                          "was never started: it was stopped before its start order reached "
                          "the agent")
      : !exit.start_error.empty() ? fmt::format("could not start: {}", exit.start_error)
      : exit.signal != 0          ? fmt::format("was killed by signal {}", exit.signal)
                                  : fmt::format("exited with code {}", exit.exit_code);
  if (cause != StopCause::kNone) {
    how += fmt::format(" (stopped: {})", model::StopCauseName(cause));
  }
  // Stopped by Berth, or by its agent (a lost node's runs were not asked).
  const bool stopped = cause != StopCause::kNone && cause != StopCause::kLost;
  how += CheckpointNote(stopped, exit, before.last_checkpoint_ms);
  JobRecord& after = out.job.job;
  out.job.events.push_back({exit.ended_at_ms, job.state, "Exited",
                            fmt::format("replica {} on {} {}", run.replica, run.node, how),
                            std::nullopt});
  for (auto& r : after.runs) {
    if (r.run_id == run.run_id) r = run;
  }
  const bool failed = exit.exit_code != 0 || exit.signal != 0 || !exit.start_error.empty();
  const bool lost = model::RunLost(cause);
  // A fenced run that exited 0 on its stop signal ended all the same.
  if ((failed && (cause == StopCause::kNone || cause == StopCause::kGpuError)) || lost) {
    for (auto& r : after.runs) {
      const bool active =
          r.state == model::RunState::kStarting || r.state == model::RunState::kRunning;
      if (!active || r.stop_requested) continue;
      r.stop_requested = true;
      r.stopped_for = StopCause::kGang;
    }
  }
  // In place: its events follow the Exited event.
  out.settled = SettleInto(out.job, now, cap);
  return out;
}

namespace {

bool Active(const RunRecord& r) {
  return r.state == model::RunState::kStarting || r.state == model::RunState::kRunning;
}

// Asks every active run not yet asked to stop, for `cause`.
void StopRest(JobRecord& job, StopCause cause) {
  for (auto& r : job.runs) {
    if (!Active(r) || r.stop_requested) continue;
    r.stop_requested = true;
    r.stopped_for = cause;
  }
}

}  // namespace

Result<JobUpdate> CancelJob(const JobRecord& job, const std::string& by, TimeMs now) {
  if (model::IsTerminal(job.state)) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("job {} already finished ({}); nothing to cancel", job.id,
                            model::JobStateName(job.state)));
  }
  JobUpdate u{job, {}};
  u.job.cancel_requested = true;
  u.job.cancelled_by = by;
  if (job.state == JobState::kPending) {
    u.job.state = JobState::kCancelled;
    u.job.finished_at_ms = now;
    u.job.reason = {ReasonCode::kCancelled, {}, by};
    u.events.push_back({now, JobState::kCancelled, "Cancelled",
                        fmt::format("cancelled by {} before it started", by), std::nullopt});
    return u;
  }
  for (auto& r : u.job.runs) {
    if (!Active(r)) continue;
    r.stop_requested = true;
    r.stopped_for = StopCause::kCancelled;
  }
  u.events.push_back({now, job.state, "CancelRequested",
                      fmt::format("cancel requested by {}; stopping replicas", by), std::nullopt});
  return u;
}

std::optional<JobUpdate> StopJob(const JobRecord& job, StopCause cause) {
  const bool any = std::any_of(job.runs.begin(), job.runs.end(),
                               [](const RunRecord& r) { return Active(r) && !r.stop_requested; });
  if (!any) return std::nullopt;
  JobUpdate u{job, {}};
  StopRest(u.job, cause);
  return u;
}

std::optional<JobUpdate> FailGpu(const JobRecord& job, const std::string& node, std::uint32_t gpu,
                                 const std::string& detail, TimeMs now) {
  JobUpdate u{job, {}};
  std::vector<std::uint32_t> hit;
  for (auto& r : u.job.runs) {
    if (!Active(r) || r.node != node) continue;
    if (std::find(r.gpu_indices.begin(), r.gpu_indices.end(), gpu) == r.gpu_indices.end()) continue;
    r.stop_requested = true;
    r.stopped_for = StopCause::kGpuError;
    r.failure_class = "gpu_hardware";
    r.stop_detail = detail;
    hit.push_back(r.replica);
  }
  if (hit.empty()) return std::nullopt;
  // A gang lives and dies together: its other replicas stop too.
  StopRest(u.job, StopCause::kGang);
  for (auto replica : hit) {
    u.events.push_back({now, job.state, "GpuFailed",
                        fmt::format("replica {}: {}; stopping the job", replica, detail),
                        std::nullopt});
  }
  return u;
}

std::optional<JobUpdate> DrainJob(const JobRecord& job, const std::string& node, TimeMs now) {
  const bool there = std::any_of(job.runs.begin(), job.runs.end(), [&](const RunRecord& r) {
    return Active(r) && !r.stop_requested && r.node == node;
  });
  if (!there) return std::nullopt;
  JobUpdate u{job, {}};
  // The whole gang stops, wherever its other replicas run.
  StopRest(u.job, StopCause::kDrained);
  u.events.push_back(
      {now, job.state, "Draining",
       fmt::format("node {} is being drained; stopping the job so it is placed elsewhere", node),
       std::nullopt});
  return u;
}

Result<model::Policy> ApproveQuota(const model::Policy& active, std::int64_t version,
                                   const QuotaChange& change) {
  model::Policy policy = active;
  auto queue = std::find_if(policy.queues.begin(), policy.queues.end(),
                            [&](const model::QueuePolicy& q) { return q.path == change.queue; });
  if (queue == policy.queues.end()) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("quota request {} is for queue {}, which policy v{} no longer has; "
                            "reject it and file a new one",
                            change.request_id, change.queue, version));
  }
  auto key = model::ParseResourceKey(change.resource);
  if (!key) {
    return Fail(Code::kInternal, fmt::format("quota request {} has an unknown resource '{}'",
                                             change.request_id, change.resource));
  }
  model::Quota& quota = queue->quota[*key];
  if (change.guaranteed) quota.guaranteed = *change.guaranteed;
  if (change.borrow_limit) quota.borrow_limit = *change.borrow_limit;
  if (change.weight) quota.weight = *change.weight;
  if (change.lending_limit) quota.lending_limit = *change.lending_limit;
  return policy;
}

namespace {

std::string Where(const std::vector<sched::ReplicaPlacement>& replicas) {
  std::string out;
  for (const auto& r : replicas) {
    out += fmt::format("{}{} GPUs [{}]", out.empty() ? "" : "; ", r.node,
                       fmt::join(r.gpu_indices, ","));
  }
  return out;
}

StopCause CauseOf(sched::EvictionCause cause) {
  switch (cause) {
    case sched::EvictionCause::kPreempt:
      return StopCause::kPreempted;
    case sched::EvictionCause::kMove:
      return StopCause::kMoved;
    case sched::EvictionCause::kReclaim:
      break;
  }
  return StopCause::kReclaimed;
}

}  // namespace

std::optional<EvictionUpdate> EvictJob(const JobRecord& job, const sched::Eviction& e,
                                       const JobRecord* by, TimeMs now) {
  // Finished or cancelled since the plan was made: nothing to evict.
  if (model::IsTerminal(job.state) || job.cancel_requested) return std::nullopt;
  EvictionUpdate out{{job, {}}, std::nullopt};
  JobRecord& victim = out.victim.job;
  const StopCause cause = CauseOf(e.cause);
  for (auto& r : victim.runs) {
    const bool active =
        r.state == model::RunState::kStarting || r.state == model::RunState::kRunning;
    if (!active || r.stop_requested) continue;
    r.stop_requested = true;
    r.stopped_for = cause;
  }
  victim.reason = e.reason;
  // A timeline is written once for every reader of its job: it names another
  // tenant's job only as that.
  model::Reason told = e.reason;
  model::HideOtherTenantsJobs(told);
  if (e.cause != sched::EvictionCause::kMove) {
    out.victim.events.push_back(
        {now, job.state, e.cause == sched::EvictionCause::kPreempt ? "Preempting" : "Reclaiming",
         model::RenderReason(told), std::nullopt});
    return out;
  }
  // Both timelines say what moves where, and for whom.
  out.victim.events.push_back({now, job.state, "Moving",
                               fmt::format("{}; from {} to {}", model::RenderReason(told),
                                           Where(e.moved_from), Where(e.moved_to)),
                               std::nullopt});
  if (by != nullptr) {
    out.by = JobUpdate{*by, {}};
    out.by->events.push_back(
        {now, by->state, "Consolidating",
         fmt::format(
             "moving {} from {} to {} so that this job's replicas fit; about {} s of "
             "its work since its last checkpoint is lost",
             model::JobRefText(model::NamesOtherTenantJob(e.reason, model::kByJob) ? 0 : e.job_id,
                               model::Lang::kEn),
             Where(e.moved_from), Where(e.moved_to), e.work_lost_ms / 1000),
         std::nullopt});
  }
  return out;
}

std::optional<JobUpdate> PlaceJob(const JobRecord& job, const sched::Placement& p,
                                  const NodeIndex& by_name, std::int64_t policy_version,
                                  TimeMs now) {
  // Cancelled or placed since the plan was made: the placement is dropped.
  if (job.state != JobState::kPending || job.cancel_requested) return std::nullopt;
  const std::uint32_t attempt = job.attempts + 1;
  JobUpdate u{job, {}};
  u.job.attempts = attempt;
  u.job.runs.clear();
  u.job.retry_after_ms.reset();
  u.job.policy_version = policy_version;
  std::string where;
  const model::Resources& res = job.spec.resources;
  for (const auto& r : p.replicas) {
    RunRecord run;
    run.run_id = fmt::format("{}.{}.{}", job.id, r.replica, attempt);
    run.job_id = job.id;
    run.replica = r.replica;
    run.attempt = attempt;
    run.node = r.node;
    run.gpu_indices = r.gpu_indices;
    model::GpuSlice slice;  // what a slice holds of its card, by model::SliceOf
    if (auto it = by_name.find(r.node); it != by_name.end()) {
      for (auto idx : r.gpu_indices) {
        for (const auto& g : it->second->gpus) {
          if (g.index != idx) continue;
          run.gpu_uuids.push_back(g.uuid);
          if (model::IsSlice(res)) slice = model::SliceOf(res, g.memory_bytes);
        }
      }
    }
    run.gpu_share_millis = slice.millis;
    run.gpu_share_bytes = slice.bytes;
    u.job.runs.push_back(std::move(run));
    where += fmt::format("{}replica {} on {} GPUs [{}]", where.empty() ? "" : "; ", r.replica,
                         r.node, fmt::join(r.gpu_indices, ","));
    if (slice.millis > 0) {
      where += fmt::format(" (a slice: {} mGPU, {})", slice.millis, FormatBytes(slice.bytes));
    }
  }
  u.job.state = JobState::kScheduled;
  u.job.reason = {ReasonCode::kScheduled, {}, {}};
  u.events.push_back({now, JobState::kScheduled, "Scheduled",
                      fmt::format("{}; under policy v{}", where, policy_version), policy_version});
  if (p.borrowed) {
    const auto& b = *p.borrowed;
    u.events.push_back(
        {now, JobState::kScheduled, "Borrowing",
         fmt::format("runs on borrowed capacity: queue {} holds {} GPU(s) with it, over its {} "
                     "guaranteed (over_quota: borrow); the job is preemptible and may be "
                     "reclaimed when other queues need their guarantee back",
                     b.queue, model::FormatQuotaAmount(model::ResourceKind::kGpus, b.used_mgpu),
                     model::FormatQuotaAmount(model::ResourceKind::kGpus, b.guaranteed_mgpu)),
         policy_version});
  }
  if (p.ahead_of) {
    // Why it ran ahead of its queue's head: the nodes it uses, counted by
    // why the head could never use them (the node causes' words).
    std::string causes;
    for (const auto& [key, text] : model::NodeCauseTexts()) {
      auto it = p.ahead_of->causes.find(key);
      if (it == p.ahead_of->causes.end()) continue;
      if (!causes.empty()) causes += ", ";
      causes += model::FillTemplate(text.en, model::TemplateArgs().Set("n", it->second));
    }
    u.events.push_back(
        {now, JobState::kScheduled, "AheadOfHead",
         fmt::format("runs ahead of job {}, which waits first in its queue for capacity: it "
                     "uses only what job {} could never use, so it cannot delay it (of its "
                     "nodes, for job {}: {})",
                     p.ahead_of->head_job, p.ahead_of->head_job, p.ahead_of->head_job, causes),
         policy_version});
  }
  return u;
}

}  // namespace berth::control
