#include "sim/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <queue>
#include <random>
#include <set>
#include <span>
#include <tuple>

#include "model/usage_ledger.h"
#include "sched/hints.h"
#include "sched/running_memo.h"
#include "sim/lifecycle.h"

namespace berth::sim {
namespace {

struct Running {
  std::vector<sched::ReplicaPlacement> replicas;
  TimeMs start_ms = 0;
  TimeMs end_ms = 0;
  std::uint64_t key = 0;  // the snapshot's run_key: unique per run in one simulation
};

struct ReplayJob {
  const SimJob* job = nullptr;
  TimeMs work_saved_ms = 0;          // progress kept by checkpoints across evictions
  std::int64_t attained_gpu_ms = 0;  // GPU time of finished or evicted runs
  bool restarted = false;            // evicted at least once: pays the restart overhead
  // Waiting out a reclaim grace: since when, as the last plan said (given
  // back to the core in its PendingJob), and since the first plan that said
  // so before its next start (what the bound is measured from).
  TimeMs reclaim_since_ms = 0;
  TimeMs reclaim_first_ms = 0;
  bool reclaim_held_otherwise = false;  // a plan since then gave another reason
  std::optional<Running> running;
  // What the control layer's transitions have made of it (lifecycle.h):
  // from its arrival until it succeeds, then dropped (nothing changes a
  // finished job), so that only jobs in the system hold one.
  std::unique_ptr<model::JobRecord> record;
};

// An exponentially distributed duration of mean `mean_ms` (at least 1 ms),
// from the generator's raw bits so that it is the same on every platform.
TimeMs Exponential(std::mt19937_64& rng, TimeMs mean_ms) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
  const double x = -std::log1p(-u) * static_cast<double>(mean_ms);
  return std::max<TimeMs>(1, static_cast<TimeMs>(std::llround(x)));
}

sched::PendingJob PendingOf(const SimJob& j, TimeMs reclaim_since_ms) {
  sched::PendingJob p;
  p.id = j.id;
  p.tenant = j.tenant;
  p.queue = j.queue;
  p.priority = j.priority;
  p.submitted_at_ms = j.submit_ms;
  p.replicas = j.replicas;
  p.resources = j.resources;
  p.preemptible = j.preemptible;
  p.max_runtime_ms = j.max_runtime_ms;
  p.reclaim_since_ms = reclaim_since_ms;
  return p;
}

sched::RuntimeShape ShapeOf(const SimJob& j) {
  return {j.resources.gpus, j.replicas, model::IsSlice(j.resources)};
}

sched::RunningJob RunningOf(std::int64_t id, const ReplayJob& s, const SimOptions& options) {
  sched::RunningJob r;
  r.id = id;
  r.tenant = s.job->tenant;
  r.queue = s.job->queue;
  r.priority = s.job->priority;
  r.preemptible = s.job->preemptible;
  r.max_runtime_ms = s.job->max_runtime_ms;
  r.started_at_ms = s.running->start_ms;
  r.resources = s.job->resources;
  r.replicas = s.running->replicas;
  r.run_key = s.running->key;
  r.checkpoints = options.movable && options.checkpoint_interval_ms > 0;
  r.submitted_at_ms = s.job->submit_ms;
  return r;
}

// Position of the first job in `list` (sorted by id) whose id is `id` or more.
template <typename List>
std::size_t FirstAtOrAfter(const List& list, std::int64_t id) {
  return static_cast<std::size_t>(
      std::lower_bound(list.begin(), list.end(), id,
                       [](const auto& j, std::int64_t v) { return j.id < v; }) -
      list.begin());
}

// Merges the running jobs appended at `old_running` and after (in id order
// among themselves) into the ones before, of which those before `from` have
// lower ids than all of them: one permutation applied to both lists.
void MergeAppended(std::vector<sched::RunningJob>& running, std::vector<model::UsageInterval>& busy,
                   std::size_t from, std::size_t old_running) {
  std::vector<std::size_t> order(running.size());
  std::iota(order.begin(), order.end(), 0);
  std::inplace_merge(order.begin() + static_cast<std::ptrdiff_t>(from),
                     order.begin() + static_cast<std::ptrdiff_t>(old_running), order.end(),
                     [&](std::size_t x, std::size_t y) { return running[x].id < running[y].id; });
  std::vector<sched::RunningJob> merged;
  std::vector<model::UsageInterval> intervals;
  merged.reserve(order.size() - from);
  intervals.reserve(order.size() - from);
  for (std::size_t k = from; k < order.size(); ++k) {
    merged.push_back(std::move(running[order[k]]));
    intervals.push_back(std::move(busy[order[k]]));
  }
  for (std::size_t k = from; k < order.size(); ++k) {
    running[k] = std::move(merged[k - from]);
    busy[k] = std::move(intervals[k - from]);
  }
}

// The snapshot the engine keeps: the policy, a memo, and the nodes in name
// order with every GPU free.
sched::Snapshot FirstSnapshot(const std::vector<sched::NodeView>& nodes,
                              const model::Policy& policy) {
  sched::Snapshot snap;
  snap.policy = policy;
  // The scheduler remembers each run's node and usage between cycles: a run
  // keeps its key, and so its replicas, until it ends.
  snap.memo = std::make_shared<sched::RunningMemo>();
  snap.nodes = nodes;
  std::sort(snap.nodes.begin(), snap.nodes.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& n : snap.nodes) {
    for (auto& g : n.gpus) g.free = true;
  }
  return snap;
}

// The jobs in submit order (trace order among equal submits).
std::vector<const SimJob*> InSubmitOrder(const std::vector<SimJob>& jobs) {
  std::vector<const SimJob*> arrivals;
  for (const auto& j : jobs) arrivals.push_back(&j);
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const SimJob* a, const SimJob* b) { return a->submit_ms < b->submit_ms; });
  return arrivals;
}

JobOutcome OutcomeOf(const SimJob& j) {
  JobOutcome o;
  o.id = j.id;
  o.tenant = j.tenant;
  o.queue = j.queue;
  o.gpus = (GangMgpu(j) + 999) / 1000;
  o.submit_ms = j.submit_ms;
  o.duration_ms = j.duration_ms;
  return o;
}

// One simulation: the cluster, the jobs and the virtual clock, with one
// method per thing that happens to them. Simulate builds one and runs it
// once. It keeps its own copy of the nodes, and refers to the caller's jobs,
// policy, scheduler, options and adjuster, which outlive it.
class Engine {
 public:
  Engine(const std::vector<sched::NodeView>& nodes, const std::vector<SimJob>& jobs,
         const model::Policy& policy, const sched::Scheduler& scheduler, const SimOptions& options,
         const SnapshotAdjuster& adjust);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Files the options' node failures: those on a schedule, and each node's
  // first random one. An unknown node, a down time or an MTTR that is not
  // positive is an invalid argument.
  Status PlanFailures();
  // Runs the clock from the first submit until nothing will change again
  // (or past the horizon), and returns the result. Once.
  Result<SimResult> Run();

 private:
  // A node failure: (at, node, down for, random).
  using Failure = std::tuple<TimeMs, std::size_t, TimeMs, bool>;

  // What happens between cycles, each at its time.
  void Arrive(TimeMs now);
  Status HappenUntil(TimeMs now);
  Status EndRun();
  void ReturnNode();
  Status NodeFailure();
  Result<bool> FailNode(std::size_t n, TimeMs at, TimeMs down_ms);
  void PlanRandomFailure(std::size_t n, TimeMs up_from);

  // What a run takes and gives back.
  void Hold(const SimJob& job, const std::vector<sched::ReplicaPlacement>& replicas, bool take);
  void Release(std::int64_t id, TimeMs now);
  void Stop(std::int64_t id, TimeMs at, bool node_failed);

  // One scheduling cycle.
  Status RunCycle(TimeMs now);
  void SyncSnapshot(TimeMs now);
  void SyncTouched(TimeMs now);
  sched::Plan Schedule(TimeMs now);
  void CheckHints(const sched::Snapshot& seen, sched::Plan& plan);
  std::map<std::int64_t, JobProgress> Progress(TimeMs now) const;
  Status ApplyPlan(const sched::Plan& plan, TimeMs now);
  Status CheckPlacement(const sched::Placement& p) const;
  Status StartRun(const sched::Placement& p, TimeMs now);
  Sample SampleAt(TimeMs now) const;
  std::optional<TimeMs> NextCycle(TimeMs now) const;

  JobOutcome& Outcome(std::int64_t id);
  SimResult TakeResult();

  const model::Policy& policy_;
  const sched::Scheduler& scheduler_;
  const SimOptions& options_;
  const SnapshotAdjuster& adjust_;
  SimResult result_;
  // The snapshot the scheduler sees is kept from cycle to cycle and updated
  // by what changed (placements, ends, evictions, node failures), not
  // rebuilt: at 10,000 running jobs and thousands of nodes, rebuilding it
  // cost more than the scheduler's decisions. The engine's own cluster
  // state is the snapshot's nodes.
  sched::Snapshot snap_;
  // With SimOptions::verify_hints: the hints the last plan showed.
  std::vector<std::pair<std::int64_t, sched::Hint>> shown_hints_;
  std::vector<sched::NodeView>& nodes_;  // snap_.nodes
  std::map<std::string, std::size_t> node_index_;
  // What PlaceJob reads of the nodes (GPU UUIDs and memory), made once.
  const SimNodes sim_nodes_;
  const std::vector<sched::NodeView> healthy_nodes_;  // health to restore on return
  std::uint64_t next_run_key_ = 0;
  std::map<std::int64_t, ReplayJob> state_;
  // Arrivals in submit order; completions by (end, id).
  const std::vector<const SimJob*> arrivals_;
  std::size_t next_arrival_ = 0;
  std::set<std::pair<TimeMs, std::int64_t>> ends_;
  std::set<std::int64_t> pending_;
  // Jobs that started, stopped, arrived or ended since the snapshot was last
  // brought up to date; snap_.running (with `busy_`, its usage intervals, in
  // the same order) and snap_.pending stay sorted by id, as a rebuild from
  // `state_` and `pending_` would give them.
  std::set<std::int64_t> touched_;
  std::vector<model::UsageInterval> busy_;
  const TimeMs t0_;  // the first submit: the cycle grid's origin
  model::UsageLedger ledger_;
  // Node failures in time order, and returns.
  std::set<Failure> failures_;
  std::set<std::pair<TimeMs, std::size_t>> returns_;
  std::vector<std::optional<TimeMs>> down_until_;
  std::vector<std::mt19937_64> rngs_;  // per node, for random failures
  // Something changed since the scheduler last ran: a cycle runs now.
  bool dirty_ = false;
  // When reclaim graces the plans reported end: a cycle runs then, though
  // nothing else changed.
  std::set<TimeMs> grace_ends_;
  // Finished runs so far (SimOptions::predict_runtimes), and the
  // predictions the kept snapshot's jobs were given at its version.
  sched::RuntimeHistory history_;
  std::uint64_t predicted_at_ = UINT64_MAX;
  void Predict(TimeMs now);
  void OracleRunningEnds();
  sched::RuntimePrediction PredictionOf(const SimJob& j) const;
  // Keeps each waiting job's first estimated start from the plan.
  void NoteEtas(const sched::Plan& plan, TimeMs now);
  // With SimOptions::eta_forecast: the forecast of `seen`, when `plan`
  // leaves a job waiting that has no estimate yet.
  void Foresee(const sched::Snapshot& seen, const sched::Plan& plan);
  std::optional<sched::Forecast> forecast_;
  // Keeps each waiting job's reclaim grace (model::kReclaimSinceMs) from
  // the plan for the next snapshot.
  void NoteReclaimGraces(const sched::Plan& plan);
};

Engine::Engine(const std::vector<sched::NodeView>& nodes, const std::vector<SimJob>& jobs,
               const model::Policy& policy, const sched::Scheduler& scheduler,
               const SimOptions& options, const SnapshotAdjuster& adjust)
    : policy_(policy),
      scheduler_(scheduler),
      options_(options),
      adjust_(adjust),
      snap_(FirstSnapshot(nodes, policy)),
      nodes_(snap_.nodes),
      sim_nodes_(nodes_),
      healthy_nodes_(nodes_),
      arrivals_(InSubmitOrder(jobs)),
      t0_(arrivals_.empty() ? 0 : arrivals_.front()->submit_ms),
      down_until_(nodes_.size()),
      history_(options.history) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    node_index_[nodes_[i].name] = i;
    for (const auto& g : nodes_[i].gpus) {
      if (g.healthy && nodes_[i].ready) ++result_.cluster_gpus;
    }
  }
  for (const auto& j : jobs) {
    state_[j.id].job = &j;
    result_.jobs.push_back(OutcomeOf(j));
  }
  std::sort(result_.jobs.begin(), result_.jobs.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  result_.first_submit_ms = t0_;
  result_.cycle_ms = options.cycle_ms;
  ledger_.Reset(policy.usage_half_life_ms, t0_, {});
}

Status Engine::PlanFailures() {
  for (const auto& f : options_.node_failures) {
    auto it = node_index_.find(f.node);
    if (it == node_index_.end()) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("node failure at {} ms: no node named '{}'", f.at_ms, f.node));
    }
    if (f.down_ms <= 0) {
      return Fail(
          Code::kInvalidArgument,
          fmt::format("node failure of {} at {} ms: down time must be positive", f.node, f.at_ms));
    }
    failures_.insert({f.at_ms, it->second, f.down_ms, false});
  }
  const RandomFailures& rf = options_.random_failures;
  if (rf.mtbf_ms > 0) {
    if (rf.mttr_ms <= 0) return Fail(Code::kInvalidArgument, "random failures need an MTTR > 0");
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      rngs_.emplace_back(rf.seed * 0x9E3779B97F4A7C15ULL + i);
      PlanRandomFailure(i, t0_);
    }
  }
  return Ok();
}

Result<SimResult> Engine::Run() {
  TimeMs now = t0_;
  while (true) {
    // Everything that happens up to `now`, then a cycle if it changed anything.
    Arrive(now);
    BERTH_RETURN_IF_ERROR(HappenUntil(now));
    while (!grace_ends_.empty() && *grace_ends_.begin() <= now) {
      grace_ends_.erase(grace_ends_.begin());
      if (!pending_.empty()) dirty_ = true;
    }
    if (dirty_) {
      BERTH_RETURN_IF_ERROR(RunCycle(now));
    }
    const std::optional<TimeMs> next = NextCycle(now);
    if (!next) break;
    now = *next;
  }
  return TakeResult();
}

// The jobs submitted by `now` arrive: each waits, with its record Pending.
void Engine::Arrive(TimeMs now) {
  while (next_arrival_ < arrivals_.size() && arrivals_[next_arrival_]->submit_ms <= now) {
    const SimJob& job = *arrivals_[next_arrival_];
    state_.at(job.id).record = std::make_unique<model::JobRecord>(ArrivedJob(job));
    pending_.insert(job.id);
    touched_.insert(job.id);
    ++next_arrival_;
    dirty_ = true;
  }
}

// Ends, returns and failures up to `now`, in time order; at one instant a job
// that ends finishes, and a node that returns is back before it fails again.
Status Engine::HappenUntil(TimeMs now) {
  while (true) {
    constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();
    const TimeMs te = ends_.empty() ? kNever : ends_.begin()->first;
    const TimeMs tr = returns_.empty() ? kNever : returns_.begin()->first;
    const TimeMs tf = failures_.empty() ? kNever : std::get<0>(*failures_.begin());
    const TimeMs t = std::min({te, tr, tf});
    if (t > now) return Ok();
    if (te == t) {
      BERTH_RETURN_IF_ERROR(EndRun());
    } else if (tr == t) {
      ReturnNode();
    } else {
      BERTH_RETURN_IF_ERROR(NodeFailure());
    }
  }
}

// The earliest end: the job has run its full duration and succeeds.
Status Engine::EndRun() {
  const auto [end, id] = *ends_.begin();
  if (options_.predict_runtimes) {
    // What berthd's store would hold of it: its last run's length.
    const SimJob& j = *state_.at(id).job;
    history_.Add({j.tenant,
                  {},
                  {},
                  ShapeOf(j),
                  end - state_.at(id).running->start_ms,
                  sched::RunEnd::kSucceeded});
  }
  Release(id, end);
  Outcome(id).end_ms = end;
  ReplayJob& s = state_.at(id);
  BERTH_RETURN_IF_ERROR(Complete(*s.record, end));
  s.record.reset();
  dirty_ = true;
  return Ok();
}

// The earliest return: the node is back, as healthy as before it failed.
void Engine::ReturnNode() {
  const std::size_t n = returns_.begin()->second;
  returns_.erase(returns_.begin());
  down_until_[n].reset();
  nodes_[n].ready = healthy_nodes_[n].ready;
  for (std::size_t g = 0; g < nodes_[n].gpus.size(); ++g) {
    nodes_[n].gpus[g].healthy = healthy_nodes_[n].gpus[g].healthy;
  }
  if (!pending_.empty()) dirty_ = true;
}

// The earliest failure takes effect, unless it is moot; a random one files
// the node's next.
Status Engine::NodeFailure() {
  const auto [at, n, down_ms, random] = *failures_.begin();
  failures_.erase(failures_.begin());
  // Moot on a node already down, or once nothing runs or is still to
  // arrive (failing idle nodes then would only keep the clock going).
  const bool idle_forever = ends_.empty() && next_arrival_ >= arrivals_.size();
  if (down_until_[n] || idle_forever) {
    // A random failure moves on to the next up time.
    if (random) PlanRandomFailure(n, std::max(at, down_until_[n].value_or(at)));
    return Ok();
  }
  auto hit = FailNode(n, at, down_ms);
  if (!hit) return std::unexpected(std::move(hit.error()));
  if (*hit) dirty_ = true;
  if (random) PlanRandomFailure(n, at + down_ms);
  return Ok();
}

// A node goes down: its jobs stop, it and its GPUs are unavailable. True
// when a job was running there.
Result<bool> Engine::FailNode(std::size_t n, TimeMs at, TimeMs down_ms) {
  ++result_.node_failures;
  down_until_[n] = at + down_ms;
  returns_.insert({at + down_ms, n});
  auto& node = nodes_[n];
  std::vector<std::int64_t> hit;
  for (const auto& [id, s] : state_) {
    if (!s.running) continue;
    for (const auto& rp : s.running->replicas) {
      if (rp.node == node.name) {
        hit.push_back(id);
        break;
      }
    }
  }
  for (std::int64_t id : hit) {
    Stop(id, at, true);
    BERTH_RETURN_IF_ERROR(LoseNode(*state_.at(id).record, node.name, Outcome(id).failures, at));
  }
  node.ready = false;
  for (auto& g : node.gpus) g.healthy = false;
  return !hit.empty();
}

// Node `n`'s next random failure: up for a random time from `up_from`, then
// down for a random repair, drawn in that order from the node's generator.
void Engine::PlanRandomFailure(std::size_t n, TimeMs up_from) {
  const RandomFailures& rf = options_.random_failures;
  const TimeMs up = Exponential(rngs_[n], rf.mtbf_ms);
  const TimeMs down = Exponential(rngs_[n], rf.mttr_ms);
  failures_.insert({up_from + up, n, down, true});
}

// Takes (or gives back) what a job's replicas hold: GPUs (whole or a
// slice), and CPU and memory.
void Engine::Hold(const SimJob& job, const std::vector<sched::ReplicaPlacement>& replicas,
                  bool take) {
  const model::Resources& r = job.resources;
  sched::HoldGpus(nodes_, r, replicas, take);
  for (const auto& rp : replicas) {
    auto& node = nodes_[node_index_.at(rp.node)];
    if (take) {
      node.cpu_millis_free -= std::min<std::uint64_t>(node.cpu_millis_free, r.cpu_millis);
      node.memory_bytes_free -= std::min(node.memory_bytes_free, r.memory_bytes);
    } else {
      node.cpu_millis_free += r.cpu_millis;
      node.memory_bytes_free += r.memory_bytes;
    }
  }
}

// A run ends at `now` (done or stopped): it gives back what it held, and its
// GPU time counts for the job and its queue's usage.
void Engine::Release(std::int64_t id, TimeMs now) {
  ReplayJob& s = state_.at(id);
  Hold(*s.job, s.running->replicas, false);
  s.attained_gpu_ms += (now - s.running->start_ms) * GangMgpu(*s.job) / 1000;
  ledger_.Fold({s.job->tenant + "/" + s.job->queue, GangMgpu(*s.job), s.running->start_ms, now},
               now);
  ends_.erase({s.running->end_ms, id});
  s.running.reset();
  touched_.insert(id);
}

// Stops a running job at `at` and puts it back in the queue: it keeps the
// work up to its last checkpoint and pays the restart overhead next time.
// An eviction by the plan, or the failure of a node it runs on.
void Engine::Stop(std::int64_t id, TimeMs at, bool node_failed) {
  ReplayJob& s = state_.at(id);
  TimeMs ran = at - s.running->start_ms;
  TimeMs kept = options_.checkpoint_interval_ms > 0
                    ? ran / options_.checkpoint_interval_ms * options_.checkpoint_interval_ms
                    : 0;
  s.work_saved_ms = std::min(s.job->duration_ms, s.work_saved_ms + kept);
  s.restarted = true;
  JobOutcome& o = Outcome(id);
  const std::int64_t lost = (ran - kept) * GangMgpu(*s.job) / 1000;
  if (node_failed) {
    ++o.failures;
    o.lost_gpu_ms_to_failures += lost;
  } else {
    ++o.evictions;
    o.lost_gpu_ms += lost;
  }
  Release(id, at);
  pending_.insert(id);
}

void Engine::NoteReclaimGraces(const sched::Plan& plan) {
  const std::string key(model::kReclaimSinceMs);
  for (const auto& d : plan.pending) {
    ReplayJob& s = state_.at(d.job_id);
    const auto it = d.reason.counts.find(key);
    const TimeMs since = it == d.reason.counts.end() ? 0 : it->second;
    // Held back by something else since it first needed the reclaim (its
    // queue's order or quota): it was not waiting for the reclaim then.
    if (s.reclaim_first_ms > 0 && !d.reason.counts.contains(model::kReclaimAtMs)) {
      s.reclaim_held_otherwise = true;
    }
    if (since == s.reclaim_since_ms) continue;
    s.reclaim_since_ms = since;
    if (since > 0) {
      if (s.reclaim_first_ms == 0) s.reclaim_first_ms = since;
      grace_ends_.insert(since + policy_.reclaim_grace_ms);
    }
    // Its PendingJob in the kept snapshot (both sorted by id).
    auto p =
        std::lower_bound(snap_.pending.begin(), snap_.pending.end(), d.job_id,
                         [](const sched::PendingJob& j, std::int64_t id) { return j.id < id; });
    if (p != snap_.pending.end() && p->id == d.job_id) p->reclaim_since_ms = since;
  }
}

sched::RuntimePrediction Engine::PredictionOf(const SimJob& j) const {
  // The trace names no user, and its job names are unique ids: the tenant
  // and the shape are what a prediction can stand on.
  return history_.Predict({j.tenant, {}, {}, ShapeOf(j)});
}

void Engine::Predict(TimeMs now) {
  // Every waiting job in the kept snapshot, again whenever a run has
  // finished since (most cycles follow an end); one lookup per tenant and
  // shape. Running jobs every cycle: how long they have run so far is part
  // of their prediction (RuntimeHistory::PredictAfter).
  if (predicted_at_ == history_.version()) {
    for (auto& p : snap_.pending) {
      if (!p.predicted.known()) p.predicted = PredictionOf(*state_.at(p.id).job);
    }
  } else {
    predicted_at_ = history_.version();
    std::map<std::tuple<std::string_view, std::uint32_t, std::uint32_t, bool>,
             sched::RuntimePrediction>
        seen;
    for (auto& p : snap_.pending) {
      const SimJob& j = *state_.at(p.id).job;
      auto [it, fresh] =
          seen.try_emplace({j.tenant, j.resources.gpus, j.replicas, model::IsSlice(j.resources)});
      if (fresh) it->second = PredictionOf(j);
      p.predicted = it->second;
    }
  }
  for (auto& r : snap_.running) {
    const SimJob& j = *state_.at(r.id).job;
    r.predicted = history_.PredictAfter({j.tenant, {}, {}, ShapeOf(j)}, now - r.started_at_ms);
  }
  OracleRunningEnds();
}

void Engine::OracleRunningEnds() {
  if (!options_.oracle_running_ends) return;
  for (auto& r : snap_.running) {
    const auto& run = state_.at(r.id).running;
    if (!run) continue;
    r.predicted = {run->end_ms - run->start_ms, sched::RuntimeBasis::kShape, 1};
  }
}

void Engine::Foresee(const sched::Snapshot& seen, const sched::Plan& plan) {
  forecast_.reset();
  const bool needed = std::ranges::any_of(plan.pending, [this](const sched::PendingDecision& d) {
    const JobOutcome& o = Outcome(d.job_id);
    return o.first_eta_given_ms == 0 && !o.first_start_ms;
  });
  if (!needed) return;
  auto started = std::chrono::steady_clock::now();
  sched::ForecastOptions o = options_.forecast;
  if (const TimeMs w = options_.forecast_arrivals_window_ms; w > 0) {
    // The past window's arrivals, again one window later: what the
    // forecast sees coming (ids negated: no real job has them).
    const TimeMs now = seen.now_ms;
    auto first = std::lower_bound(arrivals_.begin(), arrivals_.begin() + next_arrival_, now - w,
                                  [](const SimJob* j, TimeMs t) { return j->submit_ms <= t; });
    for (auto it = first; it != arrivals_.begin() + next_arrival_; ++it) {
      sched::PendingJob p = PendingOf(**it, 0);
      p.id = -p.id;
      p.submitted_at_ms += w;
      p.predicted = PredictionOf(**it);
      o.arrivals.push_back(std::move(p));
    }
  }
  forecast_ = sched::ForecastStarts(scheduler_, seen, o, &plan);
  result_.forecast_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  ++result_.forecasts;
  result_.forecast_cycles += static_cast<std::int64_t>(forecast_->cycles);
}

void Engine::NoteEtas(const sched::Plan& plan, TimeMs now) {
  for (const auto& d : plan.pending) {
    if (forecast_) {
      JobOutcome& o = Outcome(d.job_id);
      const auto f = forecast_->start_ms.find(d.job_id);
      if (!o.first_start_ms && o.first_eta_given_ms == 0 && f != forecast_->start_ms.end()) {
        o.waited = true;
        o.first_eta_ms = f->second;
        o.first_eta_given_ms = now;
        o.first_eta_predicted = forecast_->predicted.at(d.job_id);
        continue;
      }
    }
    const auto it = d.reason.counts.find(model::kEtaMs);
    if (it == d.reason.counts.end()) {
      if (!Outcome(d.job_id).first_start_ms) Outcome(d.job_id).waited = true;
      continue;
    }
    JobOutcome& o = Outcome(d.job_id);
    if (!o.first_start_ms) o.waited = true;
    if (o.first_eta_given_ms != 0 || o.first_start_ms) continue;
    const auto after = d.reason.counts.find(model::kEtaAfterJob);
    if (after != d.reason.counts.end()) {
      o.first_eta_after_job = after->second;
      o.first_eta_after_ms = d.reason.counts.at(std::string(model::kEtaAfterMs));
    }
    o.first_eta_ms = it->second;
    o.first_eta_given_ms = now;
    const auto basis = d.reason.counts.find(model::kEtaBasis);
    o.first_eta_predicted = basis != d.reason.counts.end() &&
                            basis->second == static_cast<std::int64_t>(model::EtaBasis::kPredicted);
  }
}

// One scheduling cycle at `now`: the snapshot brought up to date, the plan
// the scheduler makes of it carried out, and a sample of the cluster after.
Status Engine::RunCycle(TimeMs now) {
  SyncSnapshot(now);
  if (options_.predict_runtimes) Predict(now);
  snap_.now_ms = now;
  snap_.decayed_usage = ledger_.At(now, busy_);
  const sched::Plan plan = Schedule(now);
  BERTH_RETURN_IF_ERROR(ApplyPlan(plan, now));
  NoteReclaimGraces(plan);
  NoteEtas(plan, now);
  result_.samples.push_back(SampleAt(now));
  dirty_ = false;
  return Ok();
}

// Brings the kept snapshot's running and pending jobs up to date with the
// jobs touched since the last cycle, and what depends on the time (the
// last checkpoint of each running job). `busy_` holds each running job's
// usage interval, in snap_.running's order (by id, as the ledger sums them).
void Engine::SyncSnapshot(TimeMs now) {
  if (!touched_.empty()) SyncTouched(now);
  for (auto& i : busy_) i.end_ms = now;
  if (options_.checkpoint_interval_ms > 0) {
    // Work kept by whole checkpoint intervals since the start (0: none yet).
    for (auto& r : snap_.running) {
      const TimeMs ran = now - r.started_at_ms;
      const TimeMs kept = ran / options_.checkpoint_interval_ms * options_.checkpoint_interval_ms;
      r.last_checkpoint_ms = kept > 0 ? r.started_at_ms + kept : 0;
    }
  }
}

// The touched jobs leave the snapshot's lists and come back as they are now
// (running, waiting or neither), in id order.
void Engine::SyncTouched(TimeMs now) {
  // Both lists are sorted by id, and so is `touched_`: the jobs before the
  // first touched id stay where they are, and new ones (mostly the latest
  // arrivals, the highest ids) are merged into the tail. Moving 30,000
  // running jobs into a fresh vector every cycle cost more than the rest.
  auto changed = [this](std::int64_t id) { return touched_.contains(id); };
  const std::int64_t first = *touched_.begin();
  std::size_t kept = FirstAtOrAfter(snap_.running, first);
  for (std::size_t i = kept; i < snap_.running.size(); ++i) {
    if (changed(snap_.running[i].id)) continue;
    if (kept != i) {
      snap_.running[kept] = std::move(snap_.running[i]);
      busy_[kept] = std::move(busy_[i]);
    }
    ++kept;
  }
  snap_.running.resize(kept);
  busy_.resize(kept);
  std::erase_if(snap_.pending, [&](const sched::PendingJob& p) { return changed(p.id); });
  const std::size_t old_running = snap_.running.size();
  const std::size_t old_pending = snap_.pending.size();
  for (std::int64_t id : touched_) {  // ascending
    const ReplayJob& s = state_.at(id);
    if (s.running) {
      snap_.running.push_back(RunningOf(id, s, options_));
      busy_.push_back(
          {s.job->tenant + "/" + s.job->queue, GangMgpu(*s.job), s.running->start_ms, now});
    } else if (pending_.contains(id)) {
      snap_.pending.push_back(PendingOf(*s.job, s.reclaim_since_ms));
    }
  }
  touched_.clear();
  if (old_running > 0 && snap_.running.size() > old_running &&
      snap_.running[old_running].id < snap_.running[old_running - 1].id) {
    MergeAppended(snap_.running, busy_,
                  FirstAtOrAfter(std::span(snap_.running).first(old_running), first), old_running);
  }
  if (old_pending > 0 && snap_.pending.size() > old_pending) {
    auto by_id = [](const sched::PendingJob& x, const sched::PendingJob& y) { return x.id < y.id; };
    std::inplace_merge(snap_.pending.begin(),
                       snap_.pending.begin() + static_cast<std::ptrdiff_t>(old_pending),
                       snap_.pending.end(), by_id);
  }
}

// The scheduler's plan for the snapshot (as the adjuster rewrites it, when
// there is one), with its wall time counted.
sched::Plan Engine::Schedule(TimeMs now) {
  // The shapes waiting and running, as berthd's snapshot builder gives them.
  snap_.demand = sched::DemandOf(snap_.pending, snap_.running);
  sched::Snapshot adjusted;
  const sched::Snapshot* seen = &snap_;
  if (adjust_) {
    // The adjuster rewrites what it is given: a copy, so that the kept
    // snapshot stays the engine's.
    adjusted = snap_;
    adjust_(adjusted, Progress(now));
    seen = &adjusted;
  }
  auto started = std::chrono::steady_clock::now();
  sched::Plan plan = scheduler_.Schedule(*seen);
  result_.scheduler_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  ++result_.cycles;
  if (options_.verify_hints) CheckHints(*seen, plan);
  if (options_.eta_forecast) Foresee(*seen, plan);
  return plan;
}

// The hints shown at the last cycle, applied now; then this plan's hints,
// checked on this snapshot as berthd checks them (without its budget).
void Engine::CheckHints(const sched::Snapshot& seen, sched::Plan& plan) {
  if (!shown_hints_.empty()) {
    sched::Snapshot scratch = seen;
    for (const auto& [id, hint] : shown_hints_) {
      if (!pending_.contains(id)) continue;  // ended, or placed since
      ++result_.hints_next_checked;
      if (sched::HintHolds(scheduler_, scratch, id, hint)) ++result_.hints_next_held;
    }
    shown_hints_.clear();
  }
  const sched::HintCheck check =
      sched::VerifyHints(scheduler_, seen, plan, std::numeric_limits<std::size_t>::max());
  result_.waiting_decisions += std::ssize(plan.pending);
  result_.capacity_decisions +=
      std::count_if(plan.pending.begin(), plan.pending.end(), [](const sched::PendingDecision& d) {
        return d.reason.code == model::ReasonCode::kNoNodeFits ||
               d.reason.code == model::ReasonCode::kFragmented;
      });
  result_.hints_found += static_cast<std::int64_t>(check.found);
  result_.hints_verified += static_cast<std::int64_t>(check.verified);
  result_.hints_refuted += static_cast<std::int64_t>(check.refuted);
  for (const auto& d : plan.pending) {
    if (auto hint = sched::HintOf(d.reason)) shown_hints_.emplace_back(d.job_id, std::move(*hint));
  }
}

// What the adjuster is told of each running or waiting job.
std::map<std::int64_t, JobProgress> Engine::Progress(TimeMs now) const {
  std::map<std::int64_t, JobProgress> progress;
  for (const auto& [id, s] : state_) {
    if (!s.running && !pending_.contains(id)) continue;
    JobProgress jp;
    jp.attained_gpu_ms = s.attained_gpu_ms;
    if (s.running) {
      jp.attained_gpu_ms += (now - s.running->start_ms) * GangMgpu(*s.job) / 1000;
      jp.remaining_ms = s.running->end_ms - now;
    } else {
      jp.remaining_ms = s.job->duration_ms - s.work_saved_ms;
    }
    progress.emplace(id, jp);
  }
  return progress;
}

Status Engine::ApplyPlan(const sched::Plan& plan, TimeMs now) {
  // Evictions take effect at once in the simulation (no stop grace).
  // A moved job is evicted and placed again in the same plan: it pays
  // the same loss and restart, and counts as moved.
  for (const auto& e : plan.evictions) {
    if (!state_.at(e.job_id).running) continue;
    Stop(e.job_id, now, false);
    BERTH_RETURN_IF_ERROR(EvictAndExit(*state_.at(e.job_id).record, e, now));
    if (e.cause == sched::EvictionCause::kMove) ++Outcome(e.job_id).moves;
  }
  for (const auto& p : plan.placements) {
    BERTH_RETURN_IF_ERROR(CheckPlacement(p));
    BERTH_RETURN_IF_ERROR(StartRun(p, now));
  }
  return Ok();
}

// A placement the engine can carry out, given the placements before it: of a
// waiting job, on nodes that are up, on healthy GPUs no one else holds whole.
Status Engine::CheckPlacement(const sched::Placement& p) const {
  const ReplayJob& s = state_.at(p.job_id);
  if (s.running || !pending_.contains(p.job_id)) {
    return Fail(Code::kInternal,
                fmt::format("the plan places job {}, which is not waiting", p.job_id));
  }
  for (const auto& r : p.replicas) {
    const auto& node = nodes_[node_index_.at(r.node)];
    if (!node.ready) {
      return Fail(Code::kInternal,
                  fmt::format("the plan places job {} on {}, which is down", p.job_id, r.node));
    }
    for (auto idx : r.gpu_indices) {
      for (const auto& g : node.gpus) {
        if (g.index == idx && !g.free && g.shared_millis == 0) {
          return Fail(Code::kInternal,
                      fmt::format("the plan gives GPU {} of {} twice", idx, r.node));
        }
        if (g.index == idx && !g.healthy) {
          return Fail(Code::kInternal,
                      fmt::format("the plan gives unhealthy GPU {} of {}", idx, r.node));
        }
      }
    }
  }
  return Ok();
}

// A placed job starts at once: it holds its replicas' share of the nodes and
// runs for its remaining work, plus the restart overhead after an eviction.
Status Engine::StartRun(const sched::Placement& p, TimeMs now) {
  ReplayJob& s = state_.at(p.job_id);
  BERTH_RETURN_IF_ERROR(PlaceAndStart(*s.record, p, sim_nodes_.index(), policy_.version, now));
  Hold(*s.job, p.replicas, true);
  TimeMs run_for =
      s.job->duration_ms - s.work_saved_ms + (s.restarted ? options_.restart_overhead_ms : 0);
  s.running = Running{p.replicas, now, now + run_for, ++next_run_key_};
  ends_.insert({now + run_for, p.job_id});
  pending_.erase(p.job_id);
  touched_.insert(p.job_id);
  JobOutcome& o = Outcome(p.job_id);
  if (s.reclaim_first_ms > 0) {
    if (s.reclaim_held_otherwise) {
      ++o.reclaim_waits_held_otherwise;
      o.max_reclaim_wait_held_otherwise_ms =
          std::max(o.max_reclaim_wait_held_otherwise_ms, now - s.reclaim_first_ms);
    } else {
      ++o.reclaim_waits;
      o.max_reclaim_wait_ms = std::max(o.max_reclaim_wait_ms, now - s.reclaim_first_ms);
    }
    s.reclaim_first_ms = 0;
    s.reclaim_since_ms = 0;
    s.reclaim_held_otherwise = false;
  }
  if (!o.first_start_ms) {
    o.first_start_ms = now;
    o.first_placement = p.replicas;
  }
  return Ok();
}

// The cluster after the cycle at `now`.
Sample Engine::SampleAt(TimeMs now) const {
  Sample sample;
  sample.t_ms = now;
  for (const auto& n : nodes_) {
    if (!n.ready) sample.down_gpus += static_cast<std::int64_t>(n.gpus.size());
    for (const auto& g : n.gpus) {
      if (!g.healthy || !n.ready) continue;
      if (g.free) {
        sample.idle_gpus_while_waiting += 1;
      } else {
        sample.allocated_mgpu += g.shared_millis > 0 ? g.shared_millis : 1000;
      }
    }
  }
  sample.pending_jobs = static_cast<std::int64_t>(pending_.size());
  for (std::int64_t id : pending_) sample.pending_mgpu += GangMgpu(*state_.at(id).job);
  if (sample.pending_jobs == 0) sample.idle_gpus_while_waiting = 0;
  return sample;
}

// The next moment something happens, on the cycle grid; nullopt when
// nothing will ever change again, or that moment is past the horizon.
std::optional<TimeMs> Engine::NextCycle(TimeMs now) const {
  std::optional<TimeMs> next;
  if (next_arrival_ < arrivals_.size()) next = arrivals_[next_arrival_]->submit_ms;
  if (!ends_.empty()) next = next ? std::min(*next, ends_.begin()->first) : ends_.begin()->first;
  if (!returns_.empty() && !pending_.empty()) {
    next = next ? std::min(*next, returns_.begin()->first) : returns_.begin()->first;
  }
  // Failures matter only while something runs or is still to arrive.
  if (!failures_.empty() && (!ends_.empty() || next_arrival_ < arrivals_.size())) {
    next = std::min(*next, std::get<0>(*failures_.begin()));
  }
  if (!grace_ends_.empty()) {
    next = next ? std::min(*next, *grace_ends_.begin()) : *grace_ends_.begin();
  }
  if (!next) return std::nullopt;
  const TimeMs step = std::max(*next, now + 1);
  const TimeMs at =
      t0_ + (step - t0_ + options_.cycle_ms - 1) / options_.cycle_ms * options_.cycle_ms;
  if (options_.horizon_ms > 0 && at - t0_ > options_.horizon_ms) return std::nullopt;
  return at;
}

JobOutcome& Engine::Outcome(std::int64_t id) {
  return *std::lower_bound(result_.jobs.begin(), result_.jobs.end(), id,
                           [](const JobOutcome& o, std::int64_t v) { return o.id < v; });
}

// The result, with what the scheduler's memo saved over the run.
SimResult Engine::TakeResult() {
  result_.memo_hits = snap_.memo->hits();
  result_.memo_misses = snap_.memo->misses();
  return std::move(result_);
}

}  // namespace

std::int64_t GangMgpu(const SimJob& j) {
  const auto& r = j.resources;
  std::int64_t per = std::int64_t{r.gpus} * 1000;
  if (r.gpu_share_millis > 0) {
    per = r.gpu_share_millis;
  } else if (r.gpu_share_bytes > 0) {
    per = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(r.gpu_share_bytes * 1000 / (80ULL << 30)));
  }
  return per * j.replicas;
}

std::vector<sched::NodeView> UniformNodes(std::size_t count, std::uint32_t gpus,
                                          const std::string& model, const std::string& prefix) {
  std::vector<sched::NodeView> out;
  out.reserve(count);
  for (std::size_t n = 0; n < count; ++n) {
    sched::NodeView v;
    v.name = fmt::format("{}-{:04}", prefix, n);
    v.ready = true;
    v.cpu_millis_free = 128'000;
    v.memory_bytes_free = 1ULL << 40;
    for (std::uint32_t g = 0; g < gpus; ++g) {
      sched::GpuView gv;
      gv.index = g;
      gv.uuid = fmt::format("{}-gpu{}", v.name, g);
      gv.model = model;
      gv.memory_bytes = 80ULL << 30;
      v.gpus.push_back(std::move(gv));
    }
    out.push_back(std::move(v));
  }
  return out;
}

Result<SimResult> Simulate(const std::vector<sched::NodeView>& nodes,
                           const std::vector<SimJob>& jobs, const model::Policy& policy,
                           const sched::Scheduler& scheduler, const SimOptions& options,
                           const SnapshotAdjuster& adjust) {
  if (options.cycle_ms <= 0) return Fail(Code::kInvalidArgument, "cycle_ms must be positive");
  Engine engine(nodes, jobs, policy, scheduler, options, adjust);
  BERTH_RETURN_IF_ERROR(engine.PlanFailures());
  return engine.Run();
}

}  // namespace berth::sim
