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

struct JobState {
  const SimJob* job = nullptr;
  TimeMs work_saved_ms = 0;          // progress kept by checkpoints across evictions
  std::int64_t attained_gpu_ms = 0;  // GPU time of finished or evicted runs
  bool restarted = false;            // evicted at least once: pays the restart overhead
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

sched::PendingJob PendingOf(const SimJob& j) {
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
  return p;
}

sched::RunningJob RunningOf(std::int64_t id, const JobState& s, const SimOptions& options) {
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

// Brings the kept snapshot's running and pending jobs up to date with the
// jobs `touched` since the last cycle, and what depends on the time (the
// last checkpoint of each running job). `busy` holds each running job's
// usage interval, in snap.running's order (by id, as the ledger sums them).
void SyncSnapshot(sched::Snapshot& snap, std::vector<model::UsageInterval>& busy,
                  std::set<std::int64_t>& touched, const std::map<std::int64_t, JobState>& state,
                  const std::set<std::int64_t>& pending, const SimOptions& options, TimeMs now) {
  if (!touched.empty()) {
    // Both lists are sorted by id, and so is `touched`: the jobs before the
    // first touched id stay where they are, and new ones (mostly the latest
    // arrivals, the highest ids) are merged into the tail. Moving 30,000
    // running jobs into a fresh vector every cycle cost more than the rest.
    auto changed = [&touched](std::int64_t id) { return touched.contains(id); };
    const std::int64_t first = *touched.begin();
    auto first_at = [first](const auto& list) {
      return static_cast<std::size_t>(
          std::lower_bound(list.begin(), list.end(), first,
                           [](const auto& j, std::int64_t id) { return j.id < id; }) -
          list.begin());
    };
    std::size_t kept = first_at(snap.running);
    for (std::size_t i = kept; i < snap.running.size(); ++i) {
      if (changed(snap.running[i].id)) continue;
      if (kept != i) {
        snap.running[kept] = std::move(snap.running[i]);
        busy[kept] = std::move(busy[i]);
      }
      ++kept;
    }
    snap.running.resize(kept);
    busy.resize(kept);
    std::erase_if(snap.pending, [&](const sched::PendingJob& p) { return changed(p.id); });
    const std::size_t old_running = snap.running.size();
    const std::size_t old_pending = snap.pending.size();
    for (std::int64_t id : touched) {  // ascending
      const JobState& s = state.at(id);
      if (s.running) {
        snap.running.push_back(RunningOf(id, s, options));
        busy.push_back(
            {s.job->tenant + "/" + s.job->queue, GangMgpu(*s.job), s.running->start_ms, now});
      } else if (pending.contains(id)) {
        snap.pending.push_back(PendingOf(*s.job));
      }
    }
    touched.clear();
    if (old_running > 0 && snap.running.size() > old_running &&
        snap.running[old_running].id < snap.running[old_running - 1].id) {
      // Merge the new ones in: one permutation applied to both lists.
      std::vector<std::size_t> order(snap.running.size());
      std::iota(order.begin(), order.end(), 0);
      const std::size_t from = first_at(std::span(snap.running).first(old_running));
      std::inplace_merge(
          order.begin() + static_cast<std::ptrdiff_t>(from),
          order.begin() + static_cast<std::ptrdiff_t>(old_running), order.end(),
          [&](std::size_t x, std::size_t y) { return snap.running[x].id < snap.running[y].id; });
      std::vector<sched::RunningJob> running;
      std::vector<model::UsageInterval> intervals;
      running.reserve(order.size() - from);
      intervals.reserve(order.size() - from);
      for (std::size_t k = from; k < order.size(); ++k) {
        running.push_back(std::move(snap.running[order[k]]));
        intervals.push_back(std::move(busy[order[k]]));
      }
      for (std::size_t k = from; k < order.size(); ++k) {
        snap.running[k] = std::move(running[k - from]);
        busy[k] = std::move(intervals[k - from]);
      }
    }
    if (old_pending > 0 && snap.pending.size() > old_pending) {
      auto by_id = [](const sched::PendingJob& x, const sched::PendingJob& y) {
        return x.id < y.id;
      };
      std::inplace_merge(snap.pending.begin(),
                         snap.pending.begin() + static_cast<std::ptrdiff_t>(old_pending),
                         snap.pending.end(), by_id);
    }
  }
  for (auto& i : busy) i.end_ms = now;
  if (options.checkpoint_interval_ms > 0) {
    // Work kept by whole checkpoint intervals since the start (0: none yet).
    for (auto& r : snap.running) {
      const TimeMs ran = now - r.started_at_ms;
      const TimeMs kept = ran / options.checkpoint_interval_ms * options.checkpoint_interval_ms;
      r.last_checkpoint_ms = kept > 0 ? r.started_at_ms + kept : 0;
    }
  }
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

Result<SimResult> Simulate(const std::vector<sched::NodeView>& nodes_in,
                           const std::vector<SimJob>& jobs, const model::Policy& policy,
                           const sched::Scheduler& scheduler, const SimOptions& options,
                           const SnapshotAdjuster& adjust) {
  if (options.cycle_ms <= 0) return Fail(Code::kInvalidArgument, "cycle_ms must be positive");
  SimResult result;
  // The snapshot the scheduler sees is kept from cycle to cycle and updated
  // by what changed (placements, ends, evictions, node failures), not
  // rebuilt: at 10,000 running jobs and thousands of nodes, rebuilding it
  // cost more than the scheduler's decisions. The engine's own cluster
  // state is the snapshot's nodes.
  sched::Snapshot snap;
  snap.policy = policy;
  // The scheduler remembers each run's node and usage between cycles: a run
  // keeps its key, and so its replicas, until it ends.
  snap.memo = std::make_shared<sched::RunningMemo>();
  std::uint64_t next_run_key = 0;
  std::vector<sched::NodeView>& nodes = snap.nodes;
  nodes = nodes_in;
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<std::string, std::size_t> node_index;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    node_index[nodes[i].name] = i;
    for (auto& g : nodes[i].gpus) {
      g.free = true;
      if (g.healthy && nodes[i].ready) ++result.cluster_gpus;
    }
  }
  // What PlaceJob reads of the nodes (GPU UUIDs and memory), made once.
  const SimNodes sim_nodes(nodes);
  std::map<std::int64_t, JobState> state;
  for (const auto& j : jobs) {
    state[j.id].job = &j;
    JobOutcome o;
    o.id = j.id;
    o.tenant = j.tenant;
    o.queue = j.queue;
    o.gpus = (GangMgpu(j) + 999) / 1000;
    o.submit_ms = j.submit_ms;
    o.duration_ms = j.duration_ms;
    result.jobs.push_back(o);
  }
  std::sort(result.jobs.begin(), result.jobs.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  auto outcome = [&](std::int64_t id) -> JobOutcome& {
    return *std::lower_bound(result.jobs.begin(), result.jobs.end(), id,
                             [](const JobOutcome& o, std::int64_t v) { return o.id < v; });
  };
  // Arrivals in submit order; completions by (end, id).
  std::vector<const SimJob*> arrivals;
  for (const auto& j : jobs) arrivals.push_back(&j);
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const SimJob* a, const SimJob* b) { return a->submit_ms < b->submit_ms; });
  std::set<std::pair<TimeMs, std::int64_t>> ends;
  std::set<std::int64_t> pending;
  // Jobs that started, stopped, arrived or ended since the snapshot was last
  // brought up to date; snap.running (with `busy`, its usage intervals, in
  // the same order) and snap.pending stay sorted by id, as a rebuild from
  // `state` and `pending` would give them.
  std::set<std::int64_t> touched;
  std::vector<model::UsageInterval> busy;
  std::size_t next_arrival = 0;
  const TimeMs t0 = arrivals.empty() ? 0 : arrivals.front()->submit_ms;
  result.first_submit_ms = t0;
  result.cycle_ms = options.cycle_ms;
  model::UsageLedger ledger;
  ledger.Reset(policy.usage_half_life_ms, t0, {});

  // Node failures: (at, node, down for, random) in time order, and returns.
  using Failure = std::tuple<TimeMs, std::size_t, TimeMs, bool>;
  std::set<Failure> failures;
  std::set<std::pair<TimeMs, std::size_t>> returns;
  std::vector<std::optional<TimeMs>> down_until(nodes.size());
  const std::vector<sched::NodeView> healthy_nodes = nodes;  // health to restore on return
  for (const auto& f : options.node_failures) {
    auto it = node_index.find(f.node);
    if (it == node_index.end()) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("node failure at {} ms: no node named '{}'", f.at_ms, f.node));
    }
    if (f.down_ms <= 0) {
      return Fail(
          Code::kInvalidArgument,
          fmt::format("node failure of {} at {} ms: down time must be positive", f.node, f.at_ms));
    }
    failures.insert({f.at_ms, it->second, f.down_ms, false});
  }
  const RandomFailures& rf = options.random_failures;
  std::vector<std::mt19937_64> rngs;
  if (rf.mtbf_ms > 0) {
    if (rf.mttr_ms <= 0) return Fail(Code::kInvalidArgument, "random failures need an MTTR > 0");
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      rngs.emplace_back(rf.seed * 0x9E3779B97F4A7C15ULL + i);
      TimeMs up = Exponential(rngs[i], rf.mtbf_ms);
      failures.insert({t0 + up, i, Exponential(rngs[i], rf.mttr_ms), true});
    }
  }

  // Takes (or gives back) what a job's replicas hold: GPUs (whole or a
  // slice), and CPU and memory.
  auto hold = [&](const SimJob& job, const std::vector<sched::ReplicaPlacement>& replicas,
                  bool take) {
    const model::Resources& r = job.resources;
    sched::HoldGpus(nodes, r, replicas, take);
    for (const auto& rp : replicas) {
      auto& node = nodes[node_index.at(rp.node)];
      if (take) {
        node.cpu_millis_free -= std::min<std::uint64_t>(node.cpu_millis_free, r.cpu_millis);
        node.memory_bytes_free -= std::min(node.memory_bytes_free, r.memory_bytes);
      } else {
        node.cpu_millis_free += r.cpu_millis;
        node.memory_bytes_free += r.memory_bytes;
      }
    }
  };
  auto release = [&](std::int64_t id, TimeMs now) {
    JobState& s = state.at(id);
    hold(*s.job, s.running->replicas, false);
    s.attained_gpu_ms += (now - s.running->start_ms) * GangMgpu(*s.job) / 1000;
    ledger.Fold({s.job->tenant + "/" + s.job->queue, GangMgpu(*s.job), s.running->start_ms, now},
                now);
    ends.erase({s.running->end_ms, id});
    s.running.reset();
    touched.insert(id);
  };
  // Stops a running job at `at` and puts it back in the queue: it keeps the
  // work up to its last checkpoint and pays the restart overhead next time.
  // An eviction by the plan, or the failure of a node it runs on.
  auto stop = [&](std::int64_t id, TimeMs at, bool node_failed) {
    JobState& s = state.at(id);
    TimeMs ran = at - s.running->start_ms;
    TimeMs kept = options.checkpoint_interval_ms > 0
                      ? ran / options.checkpoint_interval_ms * options.checkpoint_interval_ms
                      : 0;
    s.work_saved_ms = std::min(s.job->duration_ms, s.work_saved_ms + kept);
    s.restarted = true;
    JobOutcome& o = outcome(id);
    const std::int64_t lost = (ran - kept) * GangMgpu(*s.job) / 1000;
    if (node_failed) {
      ++o.failures;
      o.lost_gpu_ms_to_failures += lost;
    } else {
      ++o.evictions;
      o.lost_gpu_ms += lost;
    }
    release(id, at);
    pending.insert(id);
  };
  // A node goes down: its jobs stop, it and its GPUs are unavailable.
  auto fail_node = [&](std::size_t n, TimeMs at, TimeMs down_ms) -> Result<bool> {
    ++result.node_failures;
    down_until[n] = at + down_ms;
    returns.insert({at + down_ms, n});
    auto& node = nodes[n];
    std::vector<std::int64_t> hit;
    for (const auto& [id, s] : state) {
      if (!s.running) continue;
      for (const auto& rp : s.running->replicas) {
        if (rp.node == node.name) {
          hit.push_back(id);
          break;
        }
      }
    }
    for (std::int64_t id : hit) {
      stop(id, at, true);
      BERTH_RETURN_IF_ERROR(LoseNode(*state.at(id).record, node.name, outcome(id).failures, at));
    }
    node.ready = false;
    for (auto& g : node.gpus) g.healthy = false;
    return !hit.empty();
  };
  auto return_node = [&](std::size_t n) {
    down_until[n].reset();
    nodes[n].ready = healthy_nodes[n].ready;
    for (std::size_t g = 0; g < nodes[n].gpus.size(); ++g) {
      nodes[n].gpus[g].healthy = healthy_nodes[n].gpus[g].healthy;
    }
  };

  TimeMs now = t0;
  bool dirty = false;
  while (true) {
    // Everything that happens up to `now`.
    while (next_arrival < arrivals.size() && arrivals[next_arrival]->submit_ms <= now) {
      state.at(arrivals[next_arrival]->id).record =
          std::make_unique<model::JobRecord>(ArrivedJob(*arrivals[next_arrival]));
      pending.insert(arrivals[next_arrival]->id);
      touched.insert(arrivals[next_arrival]->id);
      ++next_arrival;
      dirty = true;
    }
    // Ends, returns and failures in time order; at one instant a job that
    // ends finishes, and a node that returns is back before it fails again.
    while (true) {
      constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();
      const TimeMs te = ends.empty() ? kNever : ends.begin()->first;
      const TimeMs tr = returns.empty() ? kNever : returns.begin()->first;
      const TimeMs tf = failures.empty() ? kNever : std::get<0>(*failures.begin());
      const TimeMs t = std::min({te, tr, tf});
      if (t > now) break;
      if (te == t) {
        auto [end, id] = *ends.begin();
        release(id, end);
        outcome(id).end_ms = end;
        JobState& s = state.at(id);
        BERTH_RETURN_IF_ERROR(Complete(*s.record, end));
        s.record.reset();
        dirty = true;
      } else if (tr == t) {
        const std::size_t n = returns.begin()->second;
        returns.erase(returns.begin());
        return_node(n);
        if (!pending.empty()) dirty = true;
      } else {
        const auto [at, n, down_ms, random] = *failures.begin();
        failures.erase(failures.begin());
        // Moot on a node already down, or once nothing runs or is still to
        // arrive (failing idle nodes then would only keep the clock going).
        const bool idle_forever = ends.empty() && next_arrival >= arrivals.size();
        if (down_until[n] || idle_forever) {
          if (random) {  // a random failure moves on to the next up time
            failures.insert(
                {std::max(at, down_until[n].value_or(at)) + Exponential(rngs[n], rf.mtbf_ms), n,
                 Exponential(rngs[n], rf.mttr_ms), true});
          }
          continue;
        }
        auto hit = fail_node(n, at, down_ms);
        if (!hit) return std::unexpected(std::move(hit.error()));
        if (*hit) dirty = true;
        if (random) {
          failures.insert({at + down_ms + Exponential(rngs[n], rf.mtbf_ms), n,
                           Exponential(rngs[n], rf.mttr_ms), true});
        }
      }
    }
    if (dirty) {
      SyncSnapshot(snap, busy, touched, state, pending, options, now);
      snap.now_ms = now;
      snap.decayed_usage = ledger.At(now, busy);
      sched::Snapshot adjusted;
      const sched::Snapshot* seen = &snap;
      if (adjust) {
        // The adjuster rewrites what it is given: a copy, so that the kept
        // snapshot stays the engine's.
        adjusted = snap;
        std::map<std::int64_t, JobProgress> progress;
        for (const auto& [id, s] : state) {
          if (!s.running && !pending.contains(id)) continue;
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
        adjust(adjusted, progress);
        seen = &adjusted;
      }
      auto started = std::chrono::steady_clock::now();
      sched::Plan plan = scheduler.Schedule(*seen);
      result.scheduler_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      ++result.cycles;
      // Evictions take effect at once in the simulation (no stop grace).
      // A moved job is evicted and placed again in the same plan: it pays
      // the same loss and restart, and counts as moved.
      for (const auto& e : plan.evictions) {
        if (!state.at(e.job_id).running) continue;
        stop(e.job_id, now, false);
        BERTH_RETURN_IF_ERROR(EvictAndExit(*state.at(e.job_id).record, e, now));
        if (e.cause == sched::EvictionCause::kMove) ++outcome(e.job_id).moves;
      }
      for (const auto& p : plan.placements) {
        JobState& s = state.at(p.job_id);
        if (s.running || !pending.contains(p.job_id)) {
          return Fail(Code::kInternal,
                      fmt::format("the plan places job {}, which is not waiting", p.job_id));
        }
        for (const auto& r : p.replicas) {
          auto& node = nodes[node_index.at(r.node)];
          if (!node.ready) {
            return Fail(Code::kInternal, fmt::format("the plan places job {} on {}, which is down",
                                                     p.job_id, r.node));
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
        BERTH_RETURN_IF_ERROR(PlaceAndStart(*s.record, p, sim_nodes.index(), policy.version, now));
        hold(*s.job, p.replicas, true);
        TimeMs run_for =
            s.job->duration_ms - s.work_saved_ms + (s.restarted ? options.restart_overhead_ms : 0);
        s.running = Running{p.replicas, now, now + run_for, ++next_run_key};
        ends.insert({now + run_for, p.job_id});
        pending.erase(p.job_id);
        touched.insert(p.job_id);
        JobOutcome& o = outcome(p.job_id);
        if (!o.first_start_ms) {
          o.first_start_ms = now;
          o.first_placement = p.replicas;
        }
      }
      Sample sample;
      sample.t_ms = now;
      for (const auto& n : nodes) {
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
      sample.pending_jobs = static_cast<std::int64_t>(pending.size());
      for (std::int64_t id : pending) sample.pending_mgpu += GangMgpu(*state.at(id).job);
      if (sample.pending_jobs == 0) sample.idle_gpus_while_waiting = 0;
      result.samples.push_back(sample);
      dirty = false;
    }
    // The next moment something happens, on the cycle grid.
    std::optional<TimeMs> next;
    if (next_arrival < arrivals.size()) next = arrivals[next_arrival]->submit_ms;
    if (!ends.empty()) next = next ? std::min(*next, ends.begin()->first) : ends.begin()->first;
    if (!returns.empty() && !pending.empty()) {
      next = next ? std::min(*next, returns.begin()->first) : returns.begin()->first;
    }
    // Failures matter only while something runs or is still to arrive.
    if (!failures.empty() && (!ends.empty() || next_arrival < arrivals.size())) {
      next = std::min(*next, std::get<0>(*failures.begin()));
    }
    if (!next) break;  // nothing will ever change again
    TimeMs step = std::max(*next, now + 1);
    now = t0 + (step - t0 + options.cycle_ms - 1) / options.cycle_ms * options.cycle_ms;
    if (options.horizon_ms > 0 && now - t0 > options.horizon_ms) break;
  }
  result.memo_hits = snap.memo->hits();
  result.memo_misses = snap.memo->misses();
  return result;
}

}  // namespace berth::sim
