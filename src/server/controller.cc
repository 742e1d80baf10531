#include "server/controller.h"

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

#include "model/failure.h"
#include "proto_convert/node.h"
#include "server/agent_decode.h"
#include "server/alerting.h"
#include "server/job_token.h"
#include "server/metrics.h"
#include "server/run_log.h"
#include "server/snapshot_builder.h"

namespace berth::server {
namespace {

berth::v1::ServerMessage AckOf(const std::string& run_id) {
  berth::v1::ServerMessage msg;
  msg.mutable_ack_exit()->set_run_id(run_id);
  return msg;
}

// torchrun's environment for one replica of a gang, so `torch.distributed`
// (init_method env://) and launchers that read it work unchanged. Each
// replica is one rank; ranks are contiguous per node, nodes ordered by their
// lowest replica, so RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK when
// every node holds the same number of replicas. MASTER_ADDR is the host of
// rank 0; MASTER_PORT is derived from the job id (29500 + id mod 20000) so
// concurrent gangs rarely meet on one host. A job's own env wins.
std::map<std::string, std::string> DistributedEnv(const store::RunRecord& run,
                                                  const model::JobSpec& spec,
                                                  const std::vector<store::RunRecord>& gang,
                                                  const std::vector<store::NodeRecord>& nodes) {
  std::vector<const store::RunRecord*> by_replica;
  for (const auto& r : gang) by_replica.push_back(&r);
  std::sort(by_replica.begin(), by_replica.end(),
            [](const auto* a, const auto* b) { return a->replica < b->replica; });
  std::vector<std::string> node_order;  // by lowest replica
  for (const auto* r : by_replica) {
    if (std::find(node_order.begin(), node_order.end(), r->node) == node_order.end()) {
      node_order.push_back(r->node);
    }
  }
  std::uint32_t rank = 0;
  std::uint32_t local_rank = 0;
  std::uint32_t local_world = 0;
  std::uint32_t node_rank = 0;
  std::uint32_t next = 0;
  for (std::size_t n = 0; n < node_order.size(); ++n) {
    std::uint32_t local = 0;
    for (const auto* r : by_replica) {
      if (r->node != node_order[n]) continue;
      if (r->replica == run.replica) {
        rank = next;
        local_rank = local;
        node_rank = static_cast<std::uint32_t>(n);
      }
      ++local;
      ++next;
    }
    if (node_order[n] == run.node) local_world = local;
  }
  std::string master = node_order.empty() ? run.node : node_order.front();
  for (const auto& n : nodes) {
    if (n.info.name == master && !n.info.hostname.empty()) master = n.info.hostname;
  }
  std::map<std::string, std::string> env{
      {"WORLD_SIZE", std::to_string(spec.replicas)},
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"GROUP_RANK", std::to_string(node_rank)},
      {"NODE_RANK", std::to_string(node_rank)},
      {"MASTER_ADDR", master},
      {"MASTER_PORT", std::to_string(29500 + run.job_id % 20000)},
      {"BERTH_NNODES", std::to_string(node_order.size())},
      {"BERTH_NODE_RANK", std::to_string(node_rank)}};
  return env;
}

}  // namespace

Controller::Controller(store::Store& store, const sched::Scheduler& scheduler, const Clock& clock,
                       ControllerOptions options)
    : store_(store), scheduler_(scheduler), clock_(clock), options_(std::move(options)) {}

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
    lost.stopped_for = model::StopCauseName(model::StopCause::kLost);
    lost.start_error = fmt::format(
        "node {} stopped heartbeating {} s ago, longer than its lease and the time its agent "
        "takes to fence the run ({} s in all); the run is presumed lost",
        run.node, (now - it->second) / 1000, after / 1000);
    spdlog::warn("run {} of job {} on {}: {}", run.run_id, run.job_id, run.node, lost.start_error);
    auto job = store_.MarkRunExited(lost, now);
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

Result<std::int64_t> Controller::ApplyPolicy(const std::string& yaml, const std::string& by,
                                             const std::string& comment,
                                             std::optional<std::int64_t> base) {
  auto version = store_.ApplyPolicyOnBase(yaml, by, comment, base, clock_.NowMs());
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
                                                const std::string& comment) {
  auto version = store_.RollbackPolicy(to_version, by, comment, clock_.NowMs());
  if (!version) return std::unexpected(version.error());
  spdlog::info("policy v{} applied by {}: rollback to v{}", *version, by, to_version);
  BERTH_RETURN_IF_ERROR(ReloadPolicy());
  Wake();
  return *version;
}

Result<store::QuotaRequest> Controller::ApproveQuotaRequest(std::int64_t id, const std::string& by,
                                                            const std::string& comment) {
  auto approved = store_.ApproveQuotaRequest(id, by, comment, clock_.NowMs());
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
  auto pending = store_.PendingJobs();
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
      pending = store_.PendingJobs();
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
    std::vector<store::JobRecord> schedulable;
    // Low-priority jobs of tenants over an enforced budget wait; the
    // scheduler never sees them (running jobs are never stopped for a budget).
    std::vector<sched::PendingDecision> over_budget;
    for (auto& job : *pending) {
      if (movers.contains(job.id)) continue;
      if (job.spec.priority == model::Priority::kLow) {
        if (auto it = over_budget_.find(job.spec.tenant); it != over_budget_.end()) {
          over_budget.push_back({job.id, it->second});
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
      schedulable.push_back(std::move(job));
    }
    // Decayed usage as of now: what ended, and what runs (its end is now).
    std::vector<model::UsageInterval> running;
    for (const auto& [run_id, i] : ledger_active_) {
      if (i.start_ms > 0) running.push_back(i);
    }
    const auto usage = ledger_.At(now, running);
    SnapshotInputs inputs{now, &*nodes, &ready, &*active, &schedulable, &(*policy)->policy, &usage};
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
    plan.pending.insert(plan.pending.end(), over_budget.begin(), over_budget.end());
    HoldPlacementsBehindEvictions(plan);
    BERTH_RETURN_IF_ERROR(store_.ApplyPlan(plan, *nodes, (*policy)->version, now));
    CountPass(plan, schedulable, cycle.count(), now);
    if (*moved || !plan.placements.empty() || !plan.evictions.empty()) {
      active = store_.ActiveRuns();
      if (!active) return std::unexpected(active.error());
      // Runs placed just now are known when they end, even before the next pass.
      BERTH_RETURN_IF_ERROR(ObserveRuns(now, (*policy)->policy.usage_half_life_ms, *active));
    }
  }
  return Dispatch(*active, *nodes);
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

void Controller::CountPass(const sched::Plan& plan,
                           const std::vector<store::JobRecord>& schedulable, double seconds,
                           TimeMs now) {
  if (metrics_ == nullptr) return;
  metrics_->ObserveCycle(seconds, plan.placements.size());
  for (const auto& p : plan.placements) {
    if (p.moved) continue;  // a running job's new place: it did not wait
    auto it = std::find_if(schedulable.begin(), schedulable.end(),
                           [&](const store::JobRecord& j) { return j.id == p.job_id; });
    if (it == schedulable.end()) continue;
    metrics_->ObserveQueueWait(it->spec.tenant, it->spec.queue,
                               static_cast<double>(now - it->submitted_at_ms) / 1000.0);
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
      reason.detail += fmt::format("{}job {}", reason.detail.empty() ? "" : ", ", id);
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
                                        const std::vector<store::JobRecord>& pending,
                                        std::int64_t policy_version, TimeMs now) {
  if (held_moves_.empty()) return false;
  std::set<std::int64_t> running;
  std::set<std::pair<std::string, std::uint32_t>> busy;  // GPUs active runs hold
  for (const auto& run : active) {
    running.insert(run.job_id);
    for (auto g : run.gpu_indices) busy.emplace(run.node, g);
  }
  std::set<std::int64_t> waiting;
  for (const auto& job : pending) waiting.insert(job.id);
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
    BERTH_RETURN_IF_ERROR(store_.ApplyPlan(plan, nodes, policy_version, now));
    placed = true;
  }
  return placed;
}

Status Controller::RecoverEvictions(const std::vector<store::RunRecord>& active) {
  std::set<std::int64_t> victims;
  for (const auto& run : active) {
    const auto cause = model::ParseStopCause(run.stopped_for).value_or(model::StopCause::kNone);
    if (run.stop_requested && model::IsEviction(cause)) {
      victims.insert(run.job_id);
    }
  }
  for (std::int64_t victim : victims) {
    auto job = store_.GetJob(victim);
    if (!job) return std::unexpected(job.error());
    const auto& r = job->reason;
    if (r.code != model::ReasonCode::kPreempted && r.code != model::ReasonCode::kReclaimed &&
        r.code != model::ReasonCode::kMoved) {
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

berth::v1::StartRun Controller::StartOrder(const store::RunRecord& run, const model::JobSpec& spec,
                                           const std::vector<store::RunRecord>& gang,
                                           const std::vector<store::NodeRecord>& nodes,
                                           const model::Policy& policy) const {
  berth::v1::StartRun o;
  // Who the run executes as on its node: the tenant's, from the policy in
  // force when it starts (docs/security.md).
  const model::RunAs run_as = model::RunIdentityOf(policy, spec.tenant);
  auto* id = o.mutable_run_as();
  id->set_user(run_as.user);
  id->set_numeric(run_as.uid.has_value());
  id->set_uid(run_as.uid.value_or(0));
  id->set_gid(run_as.gid);
  for (auto g : run_as.groups) id->add_groups(g);
  id->set_allow_root(run_as.allow_root);
  o.set_tenant(spec.tenant);
  if (auto net = model::ContainerNetworkOf(policy, spec.tenant);
      net != model::ContainerNetwork::kPrivate) {
    o.set_container_network(std::string(model::ContainerNetworkName(net)));
  }
  o.set_cpu_millis(spec.resources.cpu_millis);
  o.set_memory_bytes(spec.resources.memory_bytes);
  for (const auto& m : spec.mounts) {
    auto* mount = o.add_mounts();
    mount->set_path(m.path);
    mount->set_read_only(m.read_only);
  }
  o.set_run_id(run.run_id);
  o.set_job_id(run.job_id);
  o.set_replica(run.replica);
  o.set_attempt(run.attempt);
  for (const auto& arg : spec.command) o.add_command(arg);
  auto& env = *o.mutable_env();
  for (const auto& [k, v] : spec.env) env[k] = v;
  env["BERTH_JOB_ID"] = std::to_string(run.job_id);
  env["BERTH_JOB_NAME"] = spec.name;
  env["BERTH_TENANT"] = spec.tenant;
  env["BERTH_QUEUE"] = spec.queue;
  env["BERTH_REPLICA"] = std::to_string(run.replica);
  env["BERTH_REPLICAS"] = std::to_string(spec.replicas);
  // Attempts count from 1; every placement after an eviction, a move or a
  // retry is a restart.
  env["BERTH_RESTART_COUNT"] = std::to_string(run.attempt > 0 ? run.attempt - 1 : 0);
  if (spec.array_element) {
    env["BERTH_ARRAY_ID"] = std::to_string(spec.array_element->id);
    env["BERTH_ARRAY_INDEX"] = std::to_string(spec.array_element->index);
    env["BERTH_ARRAY_SIZE"] = std::to_string(spec.array_element->size);
  }
  for (const auto& [k, v] : DistributedEnv(run, spec, gang, nodes)) {
    if (env.find(k) == env.end()) env[k] = v;  // a job's own env wins
  }
  if (job_api_.key != nullptr) {
    // Its own credential (job_token.h): never stored, never in the job's
    // record; a spec cannot set BERTH_* names, so these are Berth's.
    env["BERTH_JOB_TOKEN"] = job_api_.key->Issue(run.job_id, run.replica, run.attempt);
    if (!job_api_.api_url.empty()) env["BERTH_API_URL"] = job_api_.api_url;
    if (!job_api_.ca_pem.empty()) env["BERTH_CA_PEM"] = job_api_.ca_pem;
  }
  if (!spec.checkpoint.dir.empty()) env["BERTH_CHECKPOINT_DIR"] = spec.checkpoint.dir;
  if (!spec.checkpoint.file.empty()) env["BERTH_CHECKPOINT_FILE"] = spec.checkpoint.file;
  if (spec.checkpoint.enabled) {
    o.set_stop_signal(spec.checkpoint.signal);
    o.set_checkpoint_file(spec.checkpoint.file);
  }
  o.set_image(spec.image);
  o.set_working_dir(spec.working_dir);
  for (auto idx : run.gpu_indices) o.add_gpu_indices(idx);
  for (const auto& u : run.gpu_uuids) o.add_gpu_uuids(u);
  o.set_gpu_share_millis(run.gpu_share_millis);
  o.set_gpu_share_bytes(run.gpu_share_bytes);
  o.set_max_runtime_ms(spec.max_runtime_ms);
  o.set_grace_ms(spec.checkpoint.grace_ms > 0 ? spec.checkpoint.grace_ms : options_.stop_grace_ms);
  auto* load = o.mutable_load();
  load->set_pattern(
      spec.load.pattern == model::LoadPattern::kPeriodic ? berth::v1::LoadProfile::PERIODIC
      : spec.load.pattern == model::LoadPattern::kIdle   ? berth::v1::LoadProfile::IDLE
                                                         : berth::v1::LoadProfile::STEADY);
  load->set_util_pct(spec.load.util_pct);
  load->set_idle_util_pct(spec.load.idle_util_pct);
  load->set_memory_pct(spec.load.memory_pct);
  load->set_period_ms(spec.load.period_ms);
  load->set_idle_after_ms(spec.load.idle_after_ms);
  return o;
}

Status Controller::Dispatch(const std::vector<store::RunRecord>& active,
                            const std::vector<store::NodeRecord>& nodes) {
  struct Order {
    std::shared_ptr<AgentSession> session;
    berth::v1::ServerMessage msg;
  };
  std::vector<Order> orders;
  std::vector<const store::RunRecord*> never_started;
  for (const auto& run : active) {
    std::shared_ptr<AgentSession> session;
    bool send_start = false;
    bool send_stop = false;
    {
      std::lock_guard lock(mu_);
      auto it = live_.find(run.node);
      if (it == live_.end()) continue;
      const LiveNode& live = it->second;
      // Stopped before its start order went out, and not on the agent (see
      // LiveNode::reported): a StopRun would find nothing to stop, so the
      // run is settled here, connected or not.
      if (run.stop_requested && run.state == model::RunState::kStarting && live.registered &&
          !live.reported.contains(run.run_id) && !live.start_sent.contains(run.run_id)) {
        never_started.push_back(&run);
        continue;
      }
      if (live.session == nullptr) continue;
      session = it->second.session;
      if (run.stop_requested) {
        send_stop = it->second.stop_sent.insert(run.run_id).second;
      } else if (run.state == model::RunState::kStarting) {
        send_start = it->second.start_sent.insert(run.run_id).second;
      }
    }
    berth::v1::ServerMessage msg;
    if (send_start) {
      auto spec = SpecOf(run.job_id);
      if (!spec) return std::unexpected(spec.error());
      std::vector<store::RunRecord> gang;
      if (spec->replicas > 1) {
        auto job = store_.GetJob(run.job_id);
        if (!job) return std::unexpected(job.error());
        for (auto& r : job->runs) {
          if (r.attempt == run.attempt) gang.push_back(std::move(r));
        }
      } else {
        gang.push_back(run);
      }
      auto policy = ActivePolicy();
      if (!policy) return std::unexpected(policy.error());
      *msg.mutable_start_run() = StartOrder(run, *spec, gang, nodes, (*policy)->policy);
    } else if (send_stop) {
      auto* stop = msg.mutable_stop_run();
      stop->set_run_id(run.run_id);
      stop->set_reason(run.stopped_for.empty()
                           ? std::string(model::StopCauseName(model::StopCause::kCancelled))
                           : run.stopped_for);
      stop->set_grace_ms(options_.stop_grace_ms);
    } else {
      continue;
    }
    orders.push_back({std::move(session), std::move(msg)});
  }
  for (auto& o : orders) {
    if (!o.session->Send(o.msg)) {
      spdlog::warn("agent {} stream closed; order will be re-sent on reconnect", o.session->node());
    }
  }
  if (never_started.empty()) return Ok();
  const TimeMs now = clock_.NowMs();
  for (const auto* run : never_started) {
    store::RunExit exit;
    exit.run_id = run->run_id;
    exit.ended_at_ms = now;
    exit.stopped_for = run->stopped_for.empty()
                           ? std::string(model::StopCauseName(model::StopCause::kCancelled))
                           : run->stopped_for;
    exit.never_started = true;
    spdlog::info(
        "run {} of job {} on {} was stopped ({}) before its start order was sent; "
        "settled as never started",
        run->run_id, run->job_id, run->node, exit.stopped_for);
    // An exit the agent reported meanwhile wins: MarkRunExited settles once.
    auto job = store_.MarkRunExited(exit, now);
    if (!job) return std::unexpected(job.error());
    CountOutcome(*job, now);
  }
  // A requeued job (preempted, drained) can be placed again at once.
  Wake();
  return Ok();
}

Result<std::vector<std::int64_t>> Controller::Submit(const model::JobSpec& spec,
                                                     std::string_view submitted_by) {
  auto policy = ActivePolicy();
  if (!policy) return std::unexpected(policy.error());
  if ((*policy)->policy.FindQueue(spec.tenant + "/" + spec.queue) == nullptr) {
    return InvalidField("queue",
                        store::UnknownQueueMessage((*policy)->policy, spec.tenant, spec.queue));
  }
  if (!spec.resources.gpu_model.empty()) {
    auto nodes = store_.ListNodes();
    if (!nodes) return std::unexpected(nodes.error());
    std::set<std::string> models;
    for (const auto& n : *nodes) {
      for (const auto& g : n.info.gpus) models.insert(g.model);
    }
    if (!nodes->empty() && !models.contains(spec.resources.gpu_model)) {
      std::string known;
      for (const auto& m : models) known += (known.empty() ? "" : ", ") + m;
      return InvalidField("resources.gpu_model",
                          fmt::format("no node has a GPU of model '{}'; models in this cluster: {}",
                                      spec.resources.gpu_model, known.empty() ? "none" : known));
    }
  }
  BERTH_RETURN_IF_ERROR(model::CheckStorageGrants((*policy)->policy, spec));
  BERTH_RETURN_IF_ERROR(CheckRejectQuota((*policy)->policy, spec));
  auto ids = store_.CreateJobs(spec, clock_.NowMs(), submitted_by);
  if (!ids) return std::unexpected(ids.error());
  Wake();
  return ids;
}

namespace {

// What a job asks for against quota at submit time, before any placement:
// GPUs (whole, or a share slice) overall and under its GPU model when it
// names one, CPU and RAM; all replicas together. A memory-sized slice has
// no milli-GPU figure before it is placed and counts nothing here.
std::map<model::ResourceKey, std::int64_t> SubmitDemand(const model::JobSpec& spec) {
  std::map<model::ResourceKey, std::int64_t> d;
  const auto& r = spec.resources;
  // An array asks for all its elements at once.
  const std::int64_t replicas = std::int64_t{spec.replicas} * model::JobCount(spec);
  std::int64_t mgpu =
      model::IsSlice(r) ? std::int64_t{r.gpu_share_millis} : std::int64_t{r.gpus} * 1000;
  if (mgpu > 0) {
    d[{model::ResourceKind::kGpus, ""}] += mgpu * replicas;
    if (!r.gpu_model.empty()) d[{model::ResourceKind::kGpus, r.gpu_model}] += mgpu * replicas;
  }
  if (r.cpu_millis > 0) d[{model::ResourceKind::kCpu, ""}] += std::int64_t{r.cpu_millis} * replicas;
  if (r.memory_bytes > 0) {
    d[{model::ResourceKind::kMemory, ""}] += static_cast<std::int64_t>(r.memory_bytes) * replicas;
  }
  return d;
}

}  // namespace

Status Controller::CheckRejectQuota(const model::Policy& policy, const model::JobSpec& spec) {
  const std::string path = spec.tenant + "/" + spec.queue;
  // The queue and its ancestors that refuse work over their guarantee.
  std::vector<const model::QueuePolicy*> rejecting;
  for (const model::QueuePolicy* q = policy.FindQueue(path); q != nullptr;
       q = q->parent.empty() ? nullptr : policy.FindQueue(q->parent)) {
    if (q->over_quota == model::OverQuota::kReject && !q->quota.empty()) rejecting.push_back(q);
  }
  if (rejecting.empty()) return Ok();
  const auto demand = SubmitDemand(spec);
  if (demand.empty()) return Ok();
  store::JobFilter filter;
  filter.states = {model::JobState::kPending, model::JobState::kScheduled,
                   model::JobState::kRunning};
  filter.tenant = spec.tenant;
  filter.limit = std::numeric_limits<std::int32_t>::max();
  auto jobs = store_.ListJobs(filter);
  if (!jobs) return std::unexpected(jobs.error());
  for (const model::QueuePolicy* q : rejecting) {
    std::map<model::ResourceKey, std::int64_t> held;
    for (const auto& job : *jobs) {
      std::string job_path = job.spec.tenant + "/" + job.spec.queue;
      if (job_path != q->path && !job_path.starts_with(q->path + "/")) continue;
      for (const auto& [key, v] : SubmitDemand(job.spec)) held[key] += v;
    }
    for (const auto& [key, quota] : q->quota) {
      auto want = demand.find(key);
      if (want == demand.end()) continue;
      const std::int64_t in_use = held[key];
      if (in_use + want->second <= quota.guaranteed) continue;
      auto amount = [&](std::int64_t v) { return model::FormatQuotaAmount(key.kind, v); };
      return Fail(
          Code::kFailedPrecondition,
          fmt::format("queue {} refuses work over its quota (over_quota: reject): this job asks "
                      "for {} {}, its pending and running jobs already hold {} of {} guaranteed, "
                      "and {} + {} is over {}; nothing was submitted. Submit a smaller job, wait "
                      "for jobs to finish, or ask for more (berth quota request {} --resource {} "
                      "--guaranteed N --reason ...)",
                      q->path, amount(want->second), model::ResourceKeyName(key), amount(in_use),
                      amount(quota.guaranteed), amount(in_use), amount(want->second),
                      amount(quota.guaranteed), q->path, model::ResourceKeyName(key)),
          "resources");
    }
  }
  return Ok();
}

Result<store::ArrayCancel> Controller::CancelArray(std::int64_t array_id, const std::string& by) {
  auto done = store_.CancelArray(array_id, by, clock_.NowMs());
  if (!done) return done;
  if (metrics_ != nullptr) {
    for (std::size_t i = 0; i < done->cancelled; ++i) {
      metrics_->CountOutcome(done->tenant,
                             std::string(model::JobStateName(model::JobState::kCancelled)), "");
    }
  }
  Wake();
  return done;
}

Result<store::JobRecord> Controller::Cancel(std::int64_t job_id, const std::string& by) {
  const TimeMs now = clock_.NowMs();
  auto job = store_.CancelJob(job_id, by, now);
  if (job) {
    CountOutcome(*job, now);
    Wake();
  }
  return job;
}

Result<std::vector<NodeStatus>> Controller::Nodes() {
  auto nodes = store_.ListNodes();
  if (!nodes) return std::unexpected(nodes.error());
  std::vector<NodeStatus> out;
  std::lock_guard lock(mu_);
  for (auto& n : *nodes) {
    NodeStatus s{std::move(n), false, 0};
    if (auto it = live_.find(s.record.info.name); it != live_.end()) {
      s.connected = it->second.session != nullptr;
      s.last_heartbeat_ms = it->second.last_heartbeat_ms;
      s.record.state = it->second.ready ? model::NodeState::kReady : model::NodeState::kNotReady;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::filesystem::path Controller::LogPath(std::int64_t job_id, const std::string& run_id) const {
  return options_.log_dir / std::to_string(job_id) / (run_id + ".log");
}

std::string Controller::LogTail(const store::JobRecord& job, const std::string& run_id,
                                std::size_t bytes) {
  return RunLogTail(LogPath(job.id, run_id), bytes, LogLimitFor(job.spec.tenant));
}

std::uint64_t Controller::LogLimitFor(std::string_view tenant) {
  auto active = ActivePolicy();
  if (!active) return options_.log_limit_bytes;
  const model::EffectiveLimit limit =
      model::LimitOf((*active)->policy, tenant, &model::Limits::log_bytes_per_run);
  if (limit.setting.empty()) return options_.log_limit_bytes;
  return static_cast<std::uint64_t>(limit.value);
}

void Controller::ClassifyExit(store::RunExit& exit, std::int64_t job_id) {
  if (store::RunLost(exit.stopped_for)) {
    // Stopped by its own agent, cut off from berthd: the node's fault.
    exit.failure_class = model::FailureClassName(model::FailureClass::kNodeLost);
    return;
  }
  if (exit.oom_kills > 0 && exit.start_error.empty()) {
    // The kernel's own count in the run's cgroup: nothing the job printed.
    exit.failure_class = model::FailureClassName(model::FailureClass::kHostOutOfMemory);
    return;
  }
  if (!exit.start_error.empty()) {
    if (exit.failure_class.empty()) {  // run_identity, from the agent, stays
      exit.failure_class = model::FailureClassName(model::FailureClass::kCommandNotFound);
    }
    return;
  }
  if (exit.exit_code == 0 && exit.signal == 0) return;
  // The agent ships every byte of the log before the exit, so the tail is
  // complete here; the class decides whether the retry policy retries.
  model::Reason r{model::ReasonCode::kFailedExitCode, {}, {}};
  if (exit.signal != 0) {
    r.counts["signal"] = exit.signal;
  } else {
    r.counts["exit_code"] = exit.exit_code;
  }
  auto tenant = store_.JobTenant(job_id);
  const std::uint64_t limit = tenant ? LogLimitFor(*tenant) : options_.log_limit_bytes;
  const std::string tail = RunLogTail(LogPath(job_id, exit.run_id), kFailureTailBytes, limit);
  if (auto f = model::ClassifyFailure(r, tail)) {
    exit.failure_class = model::FailureClassName(f->cls);
  }
}

Result<berth::v1::OutputReply> Controller::AskOutputs(const std::string& node,
                                                      berth::v1::OutputRequest req) {
  std::shared_ptr<AgentSession> session;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(node); it != live_.end() && it->second.ready) {
      session = it->second.session;
    }
  }
  if (session == nullptr) {
    return Fail(Code::kUnavailable,
                fmt::format("node {} is not connected, and a run's outputs stay on the node that "
                            "ran it; try again once it is back (berth node {})",
                            node, node));
  }
  return outputs_.Ask(*session, std::move(req));
}

Status Controller::OnRegister(const berth::v1::Register& reg,
                              const std::shared_ptr<AgentSession>& session) {
  TimeMs now = clock_.NowMs();
  model::NodeInfo info = proto_convert::NodeFromProto(reg.node());
  BERTH_RETURN_IF_ERROR(CheckNodeInventory(info));
  for (const auto& g : reg.node().gpus()) {
    // Kept out of placement, not cordoned (as in OnGpuHealth); said here so
    // an operator sees why.
    auto health = proto_convert::HealthFromWire(g.health(), g.health_detail());
    if (!health.known) spdlog::warn("node {} GPU {}: {}", info.name, g.index(), health.detail);
  }
  BERTH_RETURN_IF_ERROR(store_.UpsertNode(info, now));
  spdlog::info("node {} registered: {} GPUs ({}), {} runs reported", info.name, info.gpus.size(),
               info.gpu_provider, reg.runs_size());

  // Reconcile what the agent reports against what the store says.
  std::set<std::string> reported;
  std::vector<berth::v1::ServerMessage> replies;
  berth::v1::ServerMessage hello;
  auto* registered = hello.mutable_registered();
  for (const auto& r : reg.runs()) {
    reported.insert(r.run_id());
    auto run = store_.GetRun(r.run_id());
    if (!run) return std::unexpected(run.error());
    std::uint64_t have = 0;
    if (*run) {
      // Every byte received, the dropped middle of a long log included: the
      // agent resumes after it.
      have = RunLogReceived(LogPath((*run)->job_id, r.run_id()));
    }
    (*registered->mutable_log_offsets())[r.run_id()] = have;
    if (r.phase() == berth::v1::RunStatus::EXITED) {
      if (*run) {
        // As in OnRunExited: the log is durable before the exit is.
        BERTH_RETURN_IF_ERROR(SyncRunLog(LogPath((*run)->job_id, r.run_id())));
        if ((*run)->state == model::RunState::kStarting && r.exit().started_at_ms() != 0) {
          BERTH_RETURN_IF_ERROR(
              store_.MarkRunStarted(r.run_id(), r.pid(), r.exit().started_at_ms(), now));
        }
        store::RunExit exit = ExitFromProto(r.exit());
        ClassifyExit(exit, (*run)->job_id);
        auto job = store_.MarkRunExited(exit, now);
        if (!job) return std::unexpected(job.error());
        CountOutcome(*job, now);
      }
      replies.push_back(AckOf(r.run_id()));
      continue;
    }
    // Running on the agent.
    if (!*run || (*run)->state == model::RunState::kExited) {
      // Berth does not know this process (or already settled it): stop it.
      berth::v1::ServerMessage stop;
      stop.mutable_stop_run()->set_run_id(r.run_id());
      stop.mutable_stop_run()->set_reason("unknown to berthd");
      stop.mutable_stop_run()->set_grace_ms(options_.stop_grace_ms);
      replies.push_back(std::move(stop));
      continue;
    }
    // pid 0: accepted by the agent but not started yet; RunStarted follows.
    if ((*run)->state == model::RunState::kStarting && r.pid() != 0) {
      BERTH_RETURN_IF_ERROR(store_.MarkRunStarted(r.run_id(), r.pid(), r.started_at_ms(), now));
    }
  }
  // Runs the store believes are running here that the agent no longer knows.
  auto active = store_.ActiveRuns();
  if (!active) return std::unexpected(active.error());
  for (const auto& run : *active) {
    if (run.node != info.name || reported.contains(run.run_id)) continue;
    if (run.state != model::RunState::kRunning) continue;  // Starting: re-sent below
    store::RunExit lost;
    lost.run_id = run.run_id;
    lost.exit_code = -1;
    lost.ended_at_ms = now;
    lost.stopped_for = model::StopCauseName(model::StopCause::kLost);
    lost.start_error = fmt::format("the agent on {} no longer knows this run", info.name);
    auto job = store_.MarkRunExited(lost, now);
    if (!job) return std::unexpected(job.error());
    CountOutcome(*job, now);
  }

  registered->set_node_name(info.name);
  registered->set_lease_ms(options_.lease_ms);
  registered->set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  session->Send(hello);
  for (const auto& m : replies) session->Send(m);

  {
    std::lock_guard lock(mu_);
    auto& live = live_[info.name];
    live.session = session;
    live.last_heartbeat_ms = now;
    live.ready = true;
    live.start_sent.clear();
    live.stop_sent.clear();
    live.registered = true;
    live.reported = std::move(reported);
    live.gpus.clear();
    for (const auto& g : info.gpus) live.gpus.insert(g.index);
  }
  Wake();
  return Ok();
}

TelemetryCounts Controller::telemetry_counts() const {
  std::lock_guard lock(telemetry_mu_);
  return telemetry_counts_;
}

void Controller::OnTelemetry(const std::string& node, const berth::v1::GpuTelemetry& msg) {
  std::set<std::uint32_t> gpus;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(node);
    if (it != live_.end()) gpus = it->second.gpus;
  }
  // Each run named is looked up once per message: active on this node or not.
  std::map<std::string, bool> active;
  auto is_active = [&](const std::string& run_id) {
    auto [it, fresh] = active.emplace(run_id, false);
    if (fresh) {
      auto run = store_.GetRun(run_id);
      it->second = run && *run && (*run)->node == node && (*run)->state != model::RunState::kExited;
    }
    return it->second;
  };
  std::vector<model::GpuSample> samples;
  samples.reserve(static_cast<std::size_t>(msg.samples_size()));
  TelemetryCounts counted;
  for (const auto& p : msg.samples()) {
    if (!gpus.contains(p.gpu())) {
      ++counted.dropped_unknown_gpu;
      continue;
    }
    if (!std::all_of(p.run_ids().begin(), p.run_ids().end(), is_active)) {
      ++counted.dropped_inactive_run;
      continue;
    }
    samples.push_back(SampleFromProto(node, p));
  }
  if (telemetry_sink_) {
    counted.accepted = samples.size();
    if (!samples.empty()) telemetry_sink_(samples);
  } else {
    counted.dropped_no_sink = samples.size();
  }
  if (counted.dropped_unknown_gpu + counted.dropped_inactive_run > 0) {
    spdlog::debug(
        "agent {}: dropped {} telemetry samples of unregistered GPUs and {} naming runs "
        "not active on the node",
        node, counted.dropped_unknown_gpu, counted.dropped_inactive_run);
  }
  std::lock_guard lock(telemetry_mu_);
  telemetry_counts_.accepted += counted.accepted;
  telemetry_counts_.dropped_unknown_gpu += counted.dropped_unknown_gpu;
  telemetry_counts_.dropped_inactive_run += counted.dropped_inactive_run;
  telemetry_counts_.dropped_no_sink += counted.dropped_no_sink;
}

void Controller::OnHeartbeat(const std::string& node) {
  TimeMs now = clock_.NowMs();
  bool back = false;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(node);
    if (it == live_.end()) return;
    it->second.last_heartbeat_ms = now;
    if (!it->second.ready) {
      it->second.ready = true;
      back = true;
    }
  }
  if (back) {
    spdlog::info("node {} heartbeats again: Ready", node);
    if (auto st = store_.SetNodeState(node, model::NodeState::kReady, now); !st) {
      spdlog::error("recording node {} Ready failed: {}", node, st.error().message);
    }
    Wake();
  }
}

void Controller::OnDisconnect(const std::shared_ptr<AgentSession>& session) {
  std::lock_guard lock(mu_);
  auto it = live_.find(session->node());
  // The lease, not the stream, decides readiness: a short network blip must
  // not fail a node. Only forget the session if it is still the current one.
  if (it != live_.end() && it->second.session == session) it->second.session = nullptr;
}

Status Controller::OnRunStarted(const std::string& node, const berth::v1::RunStarted& msg) {
  (void)node;
  auto st = store_.MarkRunStarted(msg.run_id(), msg.pid(), msg.started_at_ms(), clock_.NowMs());
  if (!st && st.error().code == Code::kNotFound) {
    spdlog::warn("agent {} started unknown run {}", node, msg.run_id());
    return Ok();
  }
  return st;
}

Status Controller::OnRunExited(const std::string& node, const berth::v1::RunExited& msg) {
  store::RunExit exit = ExitFromProto(msg);
  auto run = store_.GetRun(msg.run_id());
  if (!run) return std::unexpected(run.error());
  if (*run) {
    // Every byte of the log arrived before the exit on this stream; it is
    // made durable before the exit is recorded, so the ack below never lets
    // the agent drop a copy berthd could still lose.
    BERTH_RETURN_IF_ERROR(SyncRunLog(LogPath((*run)->job_id, msg.run_id())));
    // Only a failed exit has a class to read from its log.
    if (exit.exit_code != 0 || exit.signal != 0 || !exit.start_error.empty()) {
      ClassifyExit(exit, (*run)->job_id);
    }
  }
  const TimeMs now = clock_.NowMs();
  auto job = store_.MarkRunExited(exit, now);
  if (!job && job.error().code != Code::kNotFound) return std::unexpected(job.error());
  if (job) CountOutcome(*job, now);
  std::shared_ptr<AgentSession> session;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(node); it != live_.end()) session = it->second.session;
  }
  // The exit is durable: the agent may now forget the run.
  if (session) session->Send(AckOf(msg.run_id()));
  Wake();
  return Ok();
}

Status Controller::OnRunCheckpoint(const std::string& node, const berth::v1::RunCheckpoint& msg) {
  auto st = store_.RecordCheckpoint(msg.run_id(), msg.checkpoint_at_ms());
  if (!st && st.error().code == Code::kNotFound) {
    spdlog::warn("agent {} reported a checkpoint of unknown run {}", node, msg.run_id());
    return Ok();
  }
  return st;
}

Status Controller::OnGpuHealth(const std::string& node, const berth::v1::GpuHealthChanged& msg) {
  const TimeMs now = clock_.NowMs();
  const proto_convert::WireHealth health =
      proto_convert::HealthFromWire(msg.health(), msg.health_detail());
  const bool healthy = health.health == model::Health::kHealthy;
  auto st = store_.SetGpuHealth(node, msg.index(), healthy, health.detail, now);
  if (!st && st.error().code == Code::kNotFound) {
    spdlog::warn("agent {} reported health of unknown GPU {}", node, msg.index());
    return Ok();
  }
  BERTH_RETURN_IF_ERROR(st);
  if (healthy) {
    // Recovery is an admin's call: the automatic cordon stays until
    // `berth uncordon NODE/GPU`.
    spdlog::info(
        "node {} GPU {} reports healthy again; it stays cordoned until an admin "
        "uncordons it",
        node, msg.index());
    Wake();
    return Ok();
  }
  if (!health.known) {
    // An agent of another version may send a health berthd does not know.
    // The GPU takes no new work (recorded unhealthy above, with why), but
    // Berth neither cordons it nor stops its runs on a word it cannot read:
    // agents upgraded ahead of berthd would otherwise stop every job of a
    // fleet. The agent's next "healthy" makes the GPU schedulable again.
    spdlog::warn("node {} GPU {}: {}; its runs keep running", node, msg.index(), health.detail);
    Wake();
    return Ok();
  }
  const std::string detail =
      fmt::format("GPU {} ({}) on node {}: {}", msg.index(), msg.uuid(), node, msg.health_detail());
  spdlog::error("{}; cordoning that GPU and stopping its jobs", detail);
  store::Cordon cordon;
  cordon.reason = msg.health_detail();
  cordon.by = "berth";
  cordon.automatic = true;
  BERTH_RETURN_IF_ERROR(store_.SetCordon(node, msg.index(), cordon, now));
  if (audit_ != nullptr) {
    store::AuditEntry entry;
    entry.time_ms = now;
    entry.actor = "berth";
    entry.action = "gpu.cordon";
    entry.object = fmt::format("gpu/{}/{}", node, msg.index());
    entry.after =
        nlohmann::json{{"cordon", "cordon"}, {"reason", cordon.reason}, {"automatic", true}}.dump();
    entry.outcome = "ok";
    // The cordon is already committed; a record that failed to land is
    // worth an error in the log, not a refusal of the agent's report.
    if (auto rec = audit_->Append(std::move(entry)); !rec) {
      spdlog::error("audit: could not record the automatic cordon of {} GPU {}: {}", node,
                    msg.index(), rec.error().message);
    }
  }
  auto jobs = store_.StopRunsOnGpu(node, msg.index(), detail, now);
  if (!jobs) return std::unexpected(jobs.error());
  store::Alert alert;
  alert.kind = "gpu_hardware";
  alert.node = node;
  alert.gpu = msg.index();
  alert.subject = fmt::format("{}/{}", node, msg.index());
  alert.raised_ms = now;
  alert.message = fmt::format(
      "{}. Berth cordoned the GPU{}. Check it, then `berth uncordon {}/{}` if the error was "
      "transient.",
      detail,
      jobs->empty()
          ? ""
          : fmt::format(" and stopped {} job(s) on it for their retry policies", jobs->size()),
      node, msg.index());
  if (alerts_ != nullptr) {
    // The gpu_health rule sets severity and sinks; one open alert per GPU.
    auto id =
        alerts_->Raise(model::AlertKind::kGpuHealth, std::move(alert), store::AlertDedupe::kOpen);
    if (!id) return std::unexpected(id.error());
  } else {
    alert.severity = "critical";
    auto id = store_.RaiseAlert(alert);
    if (!id) return std::unexpected(id.error());
  }
  Wake();
  return Ok();
}

Status Controller::Cordon(const std::string& node, std::optional<std::uint32_t> gpu, bool drain,
                          const std::string& reason, const std::string& by) {
  if (drain && gpu) {
    return InvalidField("gpu", "drain applies to whole nodes; cordon a single GPU instead");
  }
  const TimeMs now = clock_.NowMs();
  store::Cordon cordon;
  cordon.kind = drain ? "drain" : "cordon";
  cordon.reason = reason;
  cordon.by = by;
  BERTH_RETURN_IF_ERROR(store_.SetCordon(node, gpu, cordon, now));
  if (drain) {
    auto jobs = store_.StopRunsOnNode(node, now);
    if (!jobs) return std::unexpected(jobs.error());
    spdlog::info("node {} drained by {}: stopping {} job(s)", node, by, jobs->size());
  }
  Wake();
  return Ok();
}

Result<bool> Controller::Uncordon(const std::string& node, std::optional<std::uint32_t> gpu,
                                  const std::string& by) {
  auto had = store_.Uncordon(node, gpu, by, clock_.NowMs());
  if (had) Wake();
  return had;
}

Result<std::optional<std::string>> Controller::NodeOfRun(const std::string& run_id) {
  auto run = store_.GetRun(run_id);
  if (!run) return std::unexpected(run.error());
  if (!*run) return std::optional<std::string>();
  return std::optional<std::string>((*run)->node);
}

Status Controller::OnLogChunk(const std::string& node, const berth::v1::LogChunk& msg) {
  auto run = store_.GetRun(msg.run_id());
  if (!run) return std::unexpected(run.error());
  if (!*run) {
    spdlog::warn("agent {} sent logs for unknown run {}", node, msg.run_id());
    return Ok();
  }
  auto tenant = store_.JobTenant((*run)->job_id);
  if (!tenant) return std::unexpected(tenant.error());
  const std::uint64_t limit = LogLimitFor(*tenant);
  auto path = LogPath((*run)->job_id, msg.run_id());
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::lock_guard lock(log_mu_);
  return WriteRunLog(path, msg.offset(), msg.data(), limit);
}

}  // namespace berth::server
