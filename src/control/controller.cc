#include "control/controller.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "control/agent_decode.h"
#include "control/job_token.h"
#include "control/lifecycle.h"
#include "control/run_log.h"
#include "control/snapshot_builder.h"
#include "meter/alerting.h"
#include "meter/metrics.h"
#include "model/failure.h"
#include "model/reason.h"
#include "proto_convert/node.h"
#include "sched/hints.h"

namespace berth::server {

Controller::Controller(store::Store& store, const sched::Scheduler& scheduler, const Clock& clock,
                       ControllerOptions options)
    : store_(store),
      scheduler_(scheduler),
      clock_(clock),
      options_(std::move(options)),
      forecaster_(std::make_unique<Forecaster>(scheduler_, options_.forecast)) {}

Controller::~Controller() {
  Stop();
}

Status Controller::Start() {
  // A stored policy that no longer parses stops berthd here, not mid-pass.
  BERTH_RETURN_IF_ERROR(ReloadPolicy());
  if (auto policy = ActivePolicy(); policy) {
    spdlog::info("scheduling under policy v{} ({} queues)", (*policy)->version,
                 (*policy)->policy.queues.size());
  }
  auto nodes = store_.ListNodes();
  if (!nodes) return std::unexpected(nodes.error());
  spdlog::info(
      "a silent node's runs are presumed lost {} s after its last heartbeat (lease, then the "
      "longer of --node-lost-grace and the agents' fence grace, two stop graces of {} s and a "
      "margin; a run with a longer checkpoint grace waits longer)",
      model::PresumeGoneAfterMs(Fencing(), options_.stop_grace_ms) / 1000,
      options_.stop_grace_ms / 1000);
  TimeMs now = clock_.NowMs();
  {
    std::lock_guard lock(mu_);
    // After a restart every known node gets a full lease to reconnect before
    // it is declared NotReady; its stored state stands until then.
    for (const auto& n : *nodes) {
      live_[n.info.name] =
          LiveNode{nullptr, now, n.state == model::NodeState::kReady, {}, {}, {}, false, {}};
    }
  }
  thread_ = std::thread([this] { Loop(); });
  return Ok();
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Controller::Wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void Controller::Loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(options_.tick_ms),
                   [this] { return wake_ || stopping_; });
      if (stopping_) return;
      // Wakes that arrive while the pass is held back join this pass.
      if (const TimeMs gap = next_pass_ms_ - clock_.NowMs(); gap > 0) {
        cv_.wait_for(lock, std::chrono::milliseconds(gap), [this] { return stopping_; });
        if (stopping_) return;
      }
      wake_ = false;
    }
    const TimeMs start = clock_.NowMs();
    if (auto st = RunPass(); !st) spdlog::error("control pass failed: {}", st.error().message);
    const TimeMs end = clock_.NowMs();
    next_pass_ms_ = end + std::clamp<TimeMs>(end - start, 0, options_.max_pass_gap_ms);
  }
}

Status Controller::CheckLeases(TimeMs now) {
  std::vector<std::string> lapsed;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, live] : live_) {
      if (live.ready && now - live.last_heartbeat_ms > options_.lease_ms) {
        live.ready = false;
        lapsed.push_back(name);
      }
    }
  }
  for (const auto& name : lapsed) {
    spdlog::warn("node {} lease lapsed: NotReady", name);
    BERTH_RETURN_IF_ERROR(store_.SetNodeState(name, model::NodeState::kNotReady, now));
    store::Publish(store_.change_feed(), store::Topic::kNode, name, {}, {}, "state");
  }
  return Ok();
}

TimeMs Controller::RunGraceMs(const model::JobSpec& spec) const {
  return spec.checkpoint.grace_ms > 0 ? spec.checkpoint.grace_ms : options_.stop_grace_ms;
}

model::FenceTiming Controller::Fencing() const {
  return {options_.lease_ms, options_.heartbeat_interval_ms, options_.agent_fence_grace_ms,
          options_.node_lost_grace_ms};
}

Result<bool> Controller::DeclareLostRuns(TimeMs now, const std::vector<store::RunRecord>& active) {
  std::map<std::string, TimeMs> silent;  // NotReady node -> last heartbeat
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, live] : live_) {
      if (!live.ready) silent[name] = live.last_heartbeat_ms;
    }
  }
  if (silent.empty()) return false;
  const model::FenceTiming timing = Fencing();
  bool any = false;
  for (const auto& run : active) {
    auto it = silent.find(run.node);
    if (it == silent.end()) continue;
    auto spec = SpecOf(run.job_id);
    if (!spec) return std::unexpected(spec.error());
    // Until then the agent, cut off but alive, may still be stopping it: a
    // next attempt started sooner could run beside it.
    const TimeMs after = model::PresumeGoneAfterMs(timing, RunGraceMs(*spec));
    if (now - it->second <= after) continue;
    store::RunExit lost;
    lost.run_id = run.run_id;
    lost.exit_code = -1;
    lost.ended_at_ms = now;
    lost.stopped_for = model::StopCause::kLost;
    lost.start_error = fmt::format(
        "node {} stopped heartbeating {} s ago, longer than its lease and the time its agent "
        "takes to fence the run ({} s in all); the run is presumed lost",
        run.node, (now - it->second) / 1000, after / 1000);
    spdlog::warn("run {} of job {} on {}: {}", run.run_id, run.job_id, run.node, lost.start_error);
    auto job = MarkRunExitedUnderPolicy(lost, now);
    if (!job) return std::unexpected(job.error());
    CountOutcome(*job, now);
    any = true;
  }
  return any;
}

Result<model::JobSpec> Controller::SpecOf(std::int64_t job_id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = spec_cache_.find(job_id); it != spec_cache_.end()) return it->second;
  }
  auto job = store_.GetJob(job_id);
  if (!job) return std::unexpected(job.error());
  std::lock_guard lock(mu_);
  spec_cache_[job_id] = job->spec;
  return job->spec;
}

Status Controller::ReloadPolicy() {
  auto active = store_.ActivePolicy();
  if (!active) return std::unexpected(active.error());
  auto fresh = std::make_shared<const store::PolicyVersion>(std::move(*active));
  std::lock_guard lock(mu_);
  // Concurrent changes may reload out of order; the newest version wins.
  if (policy_ == nullptr || policy_->version <= fresh->version) policy_ = std::move(fresh);
  return Ok();
}

Result<std::shared_ptr<const store::PolicyVersion>> Controller::ActivePolicy() {
  {
    std::lock_guard lock(mu_);
    if (policy_ != nullptr) return policy_;
  }
  BERTH_RETURN_IF_ERROR(ReloadPolicy());
  std::lock_guard lock(mu_);
  return policy_;
}

Result<model::JobRecord> Controller::MarkRunExitedUnderPolicy(const model::RunExit& exit,
                                                              TimeMs now) {
  // The policy in force as the attempt settles: its retry cap bounds the
  // job's attempts, even when it changed since the job was submitted.
  auto policy = ActivePolicy();
  if (!policy) return std::unexpected(policy.error());
  return control::MarkRunExited(store_, exit, now, &(*policy)->policy);
}

Result<std::int64_t> Controller::ApplyPolicy(const std::string& yaml, const std::string& by,
                                             const std::string& comment,
                                             std::optional<std::int64_t> base,
                                             const store::AuditOf<std::int64_t>& audit) {
  auto version = store_.ApplyPolicyOnBase(yaml, by, comment, base, clock_.NowMs(), audit);
  if (!version) return std::unexpected(version.error());
  spdlog::info("policy v{} applied by {}", *version, by);
  BERTH_RETURN_IF_ERROR(ReloadPolicy());
  Wake();
  return *version;
}

Result<store::PolicyVersion> Controller::PreviewPolicy(const std::string& yaml,
                                                       const std::string& by) {
  return store_.PreviewPolicy(yaml, by, clock_.NowMs());
}

Result<std::int64_t> Controller::RollbackPolicy(std::int64_t to_version, const std::string& by,
                                                const std::string& comment,
                                                const store::AuditOf<std::int64_t>& audit) {
  auto version = store_.RollbackPolicy(to_version, by, comment, clock_.NowMs(), audit);
  if (!version) return std::unexpected(version.error());
  spdlog::info("policy v{} applied by {}: rollback to v{}", *version, by, to_version);
  BERTH_RETURN_IF_ERROR(ReloadPolicy());
  Wake();
  return *version;
}

Result<store::QuotaRequest> Controller::ApproveQuotaRequest(
    std::int64_t id, const std::string& by, const std::string& comment,
    const store::AuditOf<store::QuotaRequest, store::QuotaRequest>& audit) {
  auto approved = control::ApproveQuotaRequest(store_, id, by, comment, clock_.NowMs(), audit);
  if (!approved) return std::unexpected(approved.error());
  spdlog::info("policy v{} applied by {}: quota request {}", approved->policy_version.value_or(0),
               by, id);
  BERTH_RETURN_IF_ERROR(ReloadPolicy());
  Wake();
  return approved;
}

Status Controller::RunPass() {
  std::lock_guard pass(pass_mu_);
  TimeMs now = clock_.NowMs();
  BERTH_RETURN_IF_ERROR(CheckLeases(now));
  // The whole pass decides under this one version.
  auto policy = ActivePolicy();
  if (!policy) return std::unexpected(policy.error());

  auto nodes = store_.ListNodes();
  if (!nodes) return std::unexpected(nodes.error());
  auto active = store_.ActiveRuns();
  if (!active) return std::unexpected(active.error());
  auto lost = DeclareLostRuns(now, *active);
  if (!lost) return std::unexpected(lost.error());
  if (*lost) {
    active = store_.ActiveRuns();
    if (!active) return std::unexpected(active.error());
  }
  auto pending = store_.SharedPendingJobs();
  if (!pending) return std::unexpected(pending.error());
  BERTH_RETURN_IF_ERROR(ObserveRuns(now, (*policy)->policy.usage_half_life_ms, *active));
  if (meter_ != nullptr && (over_budget_at_ms_ < 0 || now - over_budget_at_ms_ >= 1000)) {
    // A metering failure must not stop scheduling: the last answer stands.
    if (auto over = meter_->CheckBudgets(now); over) {
      over_budget_ = std::move(*over);
    } else {
      spdlog::error("budgets: could not check tenants' budgets: {}", over.error().message);
    }
    over_budget_at_ms_ = now;
  }

  if (!pending->empty()) {
    std::map<std::string, bool> ready;
    {
      std::lock_guard lock(mu_);
      for (const auto& [name, live] : live_) ready[name] = live.ready;
    }
    if (!evictions_recovered_) {
      BERTH_RETURN_IF_ERROR(RecoverEvictions(*active));
      evictions_recovered_ = true;
    }
    auto moved = ApplyHeldMoves(*active, *nodes, ready, *pending, (*policy)->version, now);
    if (!moved) return std::unexpected(moved.error());
    if (*moved) {
      active = store_.ActiveRuns();
      if (!active) return std::unexpected(active.error());
      pending = store_.SharedPendingJobs();
      if (!pending) return std::unexpected(pending.error());
    }
    // A job whose evictions are still stopping is left out: it is already
    // promised their GPUs, and looking at it again would evict more. So is a
    // moved job that stopped before the others of its move.
    std::set<std::int64_t> still_active;
    for (const auto& run : *active) still_active.insert(run.job_id);
    std::set<std::int64_t> movers;
    for (const auto& [job, held] : held_moves_)
      movers.insert(held.movers.begin(), held.movers.end());
    store::PendingQueue schedulable;
    schedulable.reserve(pending->size());
    // Low-priority jobs of tenants over an enforced budget wait; the
    // scheduler never sees them (running jobs are never stopped for a budget).
    std::vector<sched::PendingDecision> over_budget;
    // The reason each job waits with now, so a pass writes only the reasons
    // that changed (points into the shared records, which never change).
    std::unordered_map<std::int64_t, const model::Reason*> stored_reason;
    for (auto& shared : *pending) {
      const store::JobRecord& job = *shared;
      if (movers.contains(job.id)) continue;
      if (job.spec.priority == model::Priority::kLow) {
        if (auto it = over_budget_.find(job.spec.tenant); it != over_budget_.end()) {
          over_budget.push_back({job.id, it->second});
          stored_reason[job.id] = &job.reason;
          continue;
        }
      }
      // Backing off before a retry: its reason (Retrying) says until when.
      if (job.retry_after_ms && *job.retry_after_ms > now) continue;
      auto it = awaiting_evictions_.find(job.id);
      if (it != awaiting_evictions_.end()) {
        bool waiting = std::any_of(it->second.begin(), it->second.end(),
                                   [&](std::int64_t v) { return still_active.contains(v); });
        if (waiting) continue;
        awaiting_evictions_.erase(it);
      }
      schedulable.push_back(std::move(shared));
    }
    // Decayed usage as of now: what ended, and what runs (its end is now).
    std::vector<model::UsageInterval> running;
    for (const auto& [run_id, i] : ledger_active_) {
      if (i.start_ms > 0) running.push_back(i);
    }
    const auto usage = ledger_.At(now, running);
    // Run-time predictions: the feed reads what finished since its last
    // refresh (at most once a minute), never the whole history.
    if (auto fed = runtime_feed_.Refresh(store_, now); !fed) {
      spdlog::warn("run-time predictions not refreshed: {}", fed.error().message);
    }
    SnapshotInputs inputs{now,          &*nodes,
                          &ready,       &*active,
                          &schedulable, &(*policy)->policy,
                          &usage,       &runtime_feed_.history()};
    auto snap = BuildSnapshot(inputs, [this](std::int64_t id) { return SpecOf(id); });
    if (!snap) return std::unexpected(snap.error());
    // GPUs promised to a consolidation in flight are nobody else's.
    for (const auto& [job, held] : held_moves_) {
      for (const auto& p : held.placements) {
        for (const auto& rp : p.replicas) {
          auto n = std::lower_bound(
              snap->nodes.begin(), snap->nodes.end(), rp.node,
              [](const sched::NodeView& v, const std::string& name) { return v.name < name; });
          if (n == snap->nodes.end() || n->name != rp.node) continue;
          for (auto& g : n->gpus) {
            if (std::find(rp.gpu_indices.begin(), rp.gpu_indices.end(), g.index) !=
                rp.gpu_indices.end()) {
              g.free = false;
            }
          }
        }
      }
    }
    // A measured duration, not a decision: the one place a pass reads the
    // steady clock instead of the injected Clock.
    const auto cycle_start = std::chrono::steady_clock::now();
    sched::Plan plan = scheduler_.Schedule(*snap);
    const std::chrono::duration<double> cycle = std::chrono::steady_clock::now() - cycle_start;
    MarkOtherTenantJobs(plan, *snap);
    plan.pending.insert(plan.pending.end(), over_budget.begin(), over_budget.end());
    for (const auto& job : schedulable) stored_reason[job->id] = &job->reason;
    std::erase_if(plan.pending, [&](const sched::PendingDecision& d) {
      auto it = stored_reason.find(d.job_id);
      return it != stored_reason.end() && *it->second == d.reason;
    });
    VerifyHints(plan, *snap, stored_reason);
    HoldPlacementsBehindEvictions(plan);
    BERTH_RETURN_IF_ERROR(control::ApplyPlan(store_, plan, *nodes, (*policy)->version, now));
    CountPass(plan, schedulable, cycle.count(), now);
    // At most once per interval, the snapshot goes on to a forecast of the
    // waiting jobs' starts, made off this thread.
    if (forecaster_->Wants(now)) forecaster_->Offer(std::move(*snap));
    if (*moved || !plan.placements.empty() || !plan.evictions.empty()) {
      active = store_.ActiveRuns();
      if (!active) return std::unexpected(active.error());
      // Runs placed just now are known when they end, even before the next pass.
      BERTH_RETURN_IF_ERROR(ObserveRuns(now, (*policy)->policy.usage_half_life_ms, *active));
    }
  }
  return Dispatch(*active, *nodes);
}

void Controller::VerifyHints(
    sched::Plan& plan, const sched::Snapshot& snap,
    const std::unordered_map<std::int64_t, const model::Reason*>& stored_reason) {
  // Each check is one more cycle over the whole snapshot: the budget keeps
  // the checks of a pass to about 40,000 jobs' worth of cycles (8 checks on
  // 5,000 jobs, one on 40,000 or more).
  const std::size_t jobs = std::max<std::size_t>(1, snap.pending.size() + snap.running.size());
  const std::size_t budget = options_.hint_checks_per_pass == 0
                                 ? 0
                                 : std::clamp<std::size_t>(options_.hint_check_jobs / jobs, 1,
                                                           options_.hint_checks_per_pass);
  auto shown_before = [&](std::int64_t id, const sched::Hint& hint) {
    auto it = stored_reason.find(id);
    return it != stored_reason.end() && sched::HintOf(*it->second) == hint;
  };
  const sched::HintCheck check = sched::VerifyHints(scheduler_, snap, plan, budget, shown_before);
  if (check.found > 0) {
    spdlog::debug("hints: {} found, {} verified, {} refuted, {} left for a later pass, {} kept",
                  check.found, check.verified, check.refuted, check.unchecked,
                  check.kept_from_before);
  }
  if (metrics_ != nullptr) metrics_->CountHints(check.verified, check.refuted);
  // A reason that lost an unchecked hint may now be what is stored already.
  std::erase_if(plan.pending, [&](const sched::PendingDecision& d) {
    auto it = stored_reason.find(d.job_id);
    return it != stored_reason.end() && *it->second == d.reason;
  });
}

void Controller::CountOutcome(const store::JobRecord& job, TimeMs now) {
  if (metrics_ == nullptr || !model::IsTerminal(job.state) || job.finished_at_ms != now) return;
  std::string failure_class;
  if (job.state == model::JobState::kFailed) {
    for (const auto& r : job.runs) {
      if (!r.failure_class.empty()) failure_class = r.failure_class;
    }
    if (failure_class.empty()) {
      failure_class = job.reason.code == model::ReasonCode::kGpuFailed            ? "gpu_hardware"
                      : job.reason.code == model::ReasonCode::kMaxRuntimeExceeded ? "max_runtime"
                                                                                  : "user_code";
    }
  }
  metrics_->CountOutcome(job.spec.tenant, std::string(model::JobStateName(job.state)),
                         failure_class);
}

void Controller::CountPass(const sched::Plan& plan, const store::PendingQueue& schedulable,
                           double seconds, TimeMs now) {
  if (metrics_ == nullptr) return;
  metrics_->ObserveCycle(seconds, plan.placements.size());
  for (const auto& p : plan.placements) {
    if (p.moved) continue;  // a running job's new place: it did not wait
    auto it = std::find_if(schedulable.begin(), schedulable.end(),
                           [&](const auto& j) { return j->id == p.job_id; });
    if (it == schedulable.end()) continue;
    metrics_->ObserveQueueWait((*it)->spec.tenant, (*it)->spec.queue,
                               static_cast<double>(now - (*it)->submitted_at_ms) / 1000.0);
  }
  for (const auto& e : plan.evictions) {
    metrics_->CountPreemption(std::string(sched::EvictionCauseName(e.cause)));
  }
}

Status Controller::ObserveRuns(TimeMs now, std::int64_t half_life_ms,
                               const std::vector<store::RunRecord>& active) {
  if (!ledger_built_ || ledger_.half_life_ms() != half_life_ms) {
    auto history =
        store_.FinishedRunsSince(now - model::UsageLedger::kWindowHalfLives * half_life_ms);
    if (!history) return std::unexpected(history.error());
    std::vector<model::UsageInterval> finished;
    finished.reserve(history->size());
    for (const auto& h : *history) {
      finished.push_back({h.tenant + "/" + h.queue, h.mgpu, h.started_ms, h.finished_ms});
    }
    ledger_.Reset(half_life_ms, now, finished);
    ledger_active_.clear();
    ledger_built_ = true;
  }
  // Every active run holding GPUs is remembered, started or not, so one
  // that starts and ends between two passes is still counted once.
  std::map<std::string, model::UsageInterval> still;
  for (const auto& run : active) {
    if (run.gpu_indices.empty()) continue;
    auto spec = SpecOf(run.job_id);
    if (!spec) return std::unexpected(spec.error());
    const std::int64_t mgpu = run.gpu_share_millis > 0
                                  ? std::int64_t{run.gpu_share_millis}
                                  : static_cast<std::int64_t>(run.gpu_indices.size()) * 1000;
    // start 0: not started yet (counted from its real start once it ends).
    still.emplace(run.run_id, model::UsageInterval{spec->tenant + "/" + spec->queue, mgpu,
                                                   run.started_at_ms.value_or(0), now});
  }
  for (const auto& [run_id, before] : ledger_active_) {
    if (still.contains(run_id)) continue;
    auto run = store_.GetRun(run_id);
    if (!run) return std::unexpected(run.error());
    if (!*run || !(*run)->started_at_ms || !(*run)->finished_at_ms) continue;
    model::UsageInterval ended = before;
    ended.start_ms = *(*run)->started_at_ms;
    ended.end_ms = *(*run)->finished_at_ms;
    ledger_.Fold(ended, now);
  }
  ledger_active_ = std::move(still);
  return Ok();
}

// A placement that needs evicted jobs' GPUs cannot start until they have
// stopped (SIGTERM, grace, exit): until then the GPUs are still in use. It
// waits with a reason naming them, and a later pass places it once they are
// free, in priority order as before.
void Controller::HoldPlacementsBehindEvictions(sched::Plan& plan) {
  // Only the pass thread (under pass_mu_) touches awaiting_evictions_ and
  // held_moves_.
  std::map<std::int64_t, sched::Placement> moved;  // by the moved job
  for (auto& p : plan.placements) {
    if (p.moved) moved.emplace(p.job_id, std::move(p));
  }
  std::vector<sched::Placement> now;
  for (auto& p : plan.placements) {
    if (p.moved) continue;
    if (p.after_evicting.empty()) {
      now.push_back(std::move(p));
      continue;
    }
    model::Reason reason{model::ReasonCode::kWaitingForEvictions,
                         {{"evictions", static_cast<std::int64_t>(p.after_evicting.size())}},
                         {}};
    HeldMove held;
    for (auto id : p.after_evicting) {
      // Another tenant's victim is named only as that (its reason says so).
      auto e = std::find_if(plan.evictions.begin(), plan.evictions.end(),
                            [id](const sched::Eviction& ev) { return ev.job_id == id; });
      const bool other =
          e == plan.evictions.end() || model::NamesOtherTenantJob(e->reason, model::kByJob);
      reason.detail += fmt::format("{}{}", reason.detail.empty() ? "" : ", ",
                                   model::JobRefText(other ? 0 : id, model::Lang::kEn));
      if (auto m = moved.find(id); m != moved.end()) {
        reason.detail += fmt::format(" (moving to {})", m->second.replicas.front().node);
        held.movers.push_back(id);
      }
    }
    plan.pending.push_back({p.job_id, std::move(reason)});
    awaiting_evictions_[p.job_id] = p.after_evicting;
    if (!held.movers.empty()) {
      held.placements.push_back(std::move(p));
      for (auto id : held.movers) held.placements.push_back(std::move(moved.at(id)));
      held_moves_[held.placements.front().job_id] = std::move(held);
    }
  }
  plan.placements = std::move(now);
}

Result<bool> Controller::ApplyHeldMoves(const std::vector<store::RunRecord>& active,
                                        const std::vector<store::NodeRecord>& nodes,
                                        const std::map<std::string, bool>& ready,
                                        const store::PendingQueue& pending,
                                        std::int64_t policy_version, TimeMs now) {
  if (held_moves_.empty()) return false;
  std::set<std::int64_t> running;
  std::set<std::pair<std::string, std::uint32_t>> busy;  // GPUs active runs hold
  for (const auto& run : active) {
    running.insert(run.job_id);
    for (auto g : run.gpu_indices) busy.emplace(run.node, g);
  }
  std::set<std::int64_t> waiting;
  for (const auto& job : pending) waiting.insert(job->id);
  auto usable = [&](const sched::Placement& p) {
    if (!waiting.contains(p.job_id)) return false;  // cancelled, or finished before it stopped
    return std::all_of(p.replicas.begin(), p.replicas.end(), [&](const auto& rp) {
      auto r = ready.find(rp.node);
      if (r == ready.end() || !r->second) return false;
      return std::none_of(rp.gpu_indices.begin(), rp.gpu_indices.end(), [&](std::uint32_t g) {
        return busy.contains({rp.node, g});
      });
    });
  };
  bool placed = false;
  for (auto it = held_moves_.begin(); it != held_moves_.end();) {
    HeldMove& held = it->second;
    if (std::any_of(held.movers.begin(), held.movers.end(),
                    [&](std::int64_t m) { return running.contains(m); })) {
      ++it;
      continue;
    }
    sched::Plan plan;
    if (usable(held.placements.front())) {
      for (auto& p : held.placements) {
        if (!usable(p)) {
          spdlog::info("job {} is not placed as its move planned; it is scheduled afresh",
                       p.job_id);
          continue;
        }
        p.after_evicting.clear();
        p.moved = false;
        plan.placements.push_back(std::move(p));
      }
    } else {
      spdlog::info(
          "job {}'s place is no longer free; it and the jobs moved for it are "
          "scheduled afresh",
          it->first);
    }
    awaiting_evictions_.erase(it->first);
    it = held_moves_.erase(it);
    if (plan.placements.empty()) continue;
    BERTH_RETURN_IF_ERROR(control::ApplyPlan(store_, plan, nodes, policy_version, now));
    placed = true;
  }
  return placed;
}

Status Controller::RecoverEvictions(const std::vector<store::RunRecord>& active) {
  std::set<std::int64_t> victims;
  for (const auto& run : active) {
    if (run.stop_requested && model::IsEviction(run.stopped_for)) {
      victims.insert(run.job_id);
    }
  }
  for (std::int64_t victim : victims) {
    auto job = store_.GetJob(victim);
    if (!job) return std::unexpected(job.error());
    const auto& r = job->reason;
    if (r.code != model::ReasonCode::kPreempted && r.code != model::ReasonCode::kReclaimed &&
        r.code != model::ReasonCode::kMoved && r.code != model::ReasonCode::kHeadroomReclaimed) {
      continue;
    }
    auto by = r.counts.find(model::kByJob);
    if (by == r.counts.end()) continue;
    awaiting_evictions_[by->second].push_back(victim);
    spdlog::info("job {} waits for job {} to stop ({}), as before the restart", by->second, victim,
                 model::ReasonCodeName(r.code));
  }
  return Ok();
}

}  // namespace berth::server
