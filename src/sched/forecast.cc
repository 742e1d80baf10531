#include "sched/forecast.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "model/reason.h"
#include "model/usage_ledger.h"
#include "sched/runtime_estimate.h"

namespace berth::sched {
namespace {

constexpr TimeMs kForecastNever = std::numeric_limits<TimeMs>::max();

// The forecast's own copy of the cluster and the jobs, advanced step by step.
class Forward {
 public:
  Forward(Snapshot s, const ForecastOptions& o) : f_(std::move(s)), options_(o) {
    f_.memo.reset();  // a memo names runs of the real stream, not these
    recompute_demand_ = !f_.demand.empty();
    for (const auto& r : f_.running) {
      ends_[r.id] = EndOf(r.started_at_ms, r.max_runtime_ms, r.predicted, false);
    }
  }

  Forecast Run(const Scheduler& scheduler, const Plan* first) {
    Forecast out;
    const TimeMs begin = f_.now_ms;
    Plan plan = first != nullptr ? *first : scheduler.Schedule(f_);
    for (;;) {
      ++out.cycles;
      out.last_step_ms = f_.now_ms;
      Apply(plan, out);
      if (f_.pending.empty()) {
        out.end = ForecastEnd::kAllStarted;
        break;
      }
      if (out.cycles >= options_.max_cycles) {
        out.end = ForecastEnd::kCycleLimit;
        break;
      }
      if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
        out.end = ForecastEnd::kCancelled;
        break;
      }
      const TimeMs next = NextStep();
      if (next == kForecastNever) {
        out.end = ForecastEnd::kNoKnownEnd;
        break;
      }
      if (next - begin > options_.horizon_ms) {
        out.end = ForecastEnd::kHorizon;
        break;
      }
      Advance(next);
      plan = scheduler.Schedule(f_);
    }
    return out;
  }

 private:
  struct End {
    TimeMs at = kForecastNever;
    bool predicted = false;
  };

  // When a run started at `started` is expected to end, seen from now.
  End EndOf(TimeMs started, std::int64_t max_runtime_ms, const RuntimePrediction& p,
            bool placed) const {
    using Runs = ForecastOptions::Runs;
    const bool mean =
        options_.runs == Runs::kMean || (placed && options_.runs == Runs::kMeanOfPlaced);
    const TimeMs runtime = mean ? p.mean_or_runtime() : p.runtime_ms;
    const ExpectedEnd e = ExpectedEndOf(f_.now_ms, started, max_runtime_ms, runtime);
    return {e.end_ms == 0 ? kForecastNever : e.end_ms, e.predicted};
  }

  NodeView* NodeNamed(const std::string& name) {
    auto it = std::lower_bound(f_.nodes.begin(), f_.nodes.end(), name,
                               [](const NodeView& n, const std::string& k) { return n.name < k; });
    return it != f_.nodes.end() && it->name == name ? &*it : nullptr;
  }

  // Takes (or gives back) what a job's replicas hold: GPUs, CPU, memory.
  void Hold(const model::Resources& per, const std::vector<ReplicaPlacement>& replicas, bool take) {
    HoldGpus(f_.nodes, per, replicas, take);
    for (const auto& rp : replicas) {
      NodeView* n = NodeNamed(rp.node);
      if (n == nullptr) continue;
      if (take) {
        n->cpu_millis_free -= std::min<std::uint64_t>(n->cpu_millis_free, per.cpu_millis);
        n->memory_bytes_free -= std::min(n->memory_bytes_free, per.memory_bytes);
      } else {
        n->cpu_millis_free += per.cpu_millis;
        n->memory_bytes_free += per.memory_bytes;
      }
    }
  }

  // Milli-GPUs a running job holds (what decayed usage counts).
  std::int64_t MgpuOf(const RunningJob& r) {
    if (!model::IsSlice(r.resources)) {
      return std::int64_t{r.resources.gpus} * 1000 * static_cast<std::int64_t>(r.replicas.size());
    }
    std::int64_t sum = 0;
    for (const auto& rp : r.replicas) {
      const NodeView* n = NodeNamed(rp.node);
      std::uint64_t card = 0;
      if (n != nullptr && !rp.gpu_indices.empty()) {
        for (const auto& g : n->gpus) {
          if (g.index == rp.gpu_indices.front()) card = g.memory_bytes;
        }
      }
      sum += model::SliceOf(r.resources, card).millis;
    }
    return sum;
  }

  // Carries out one forecast cycle's plan, as the control loop would.
  void Apply(const Plan& plan, Forecast& out) {
    const TimeMs now = f_.now_ms;
    std::unordered_set<std::int64_t> evicted;
    for (const auto& e : plan.evictions) {
      if (e.cause != EvictionCause::kMove) evicted.insert(e.job_id);
    }
    if (!evicted.empty()) {
      std::vector<RunningJob> kept;
      kept.reserve(f_.running.size());
      for (auto& r : f_.running) {
        if (!evicted.contains(r.id)) {
          kept.push_back(std::move(r));
          continue;
        }
        Hold(r.resources, r.replicas, false);
        ends_.erase(r.id);
        f_.pending.push_back(PendingJobOf(r));
      }
      f_.running = std::move(kept);
    }
    std::unordered_map<std::int64_t, const Placement*> placed;
    for (const auto& p : plan.placements) {
      if (!p.moved) {
        placed[p.job_id] = &p;
        continue;
      }
      for (auto& r : f_.running) {
        if (r.id != p.job_id) continue;
        Hold(r.resources, r.replicas, false);
        r.replicas = p.replicas;
        Hold(r.resources, r.replicas, true);
      }
    }
    if (!placed.empty()) {
      std::vector<PendingJob> waiting;
      waiting.reserve(f_.pending.size());
      for (auto& p : f_.pending) {
        auto it = placed.find(p.id);
        if (it == placed.end()) {
          waiting.push_back(std::move(p));
          continue;
        }
        RunningJob r = RunningJobOf(p, it->second->replicas, now);
        Hold(r.resources, r.replicas, true);
        ends_[r.id] = EndOf(now, r.max_runtime_ms, r.predicted, true);
        if (out.start_ms.try_emplace(r.id, now).second) out.predicted[r.id] = predicted_so_far_;
        f_.running.push_back(std::move(r));
      }
      f_.pending = std::move(waiting);
    }
    // A reclaim grace counts from the cycle that first needed the reclaim,
    // as the control loop carries it from one cycle's reason to the next.
    const std::string since_key(model::kReclaimSinceMs);
    std::unordered_map<std::int64_t, TimeMs> since;
    for (const auto& d : plan.pending) {
      const auto it = d.reason.counts.find(since_key);
      since[d.job_id] = it == d.reason.counts.end() ? 0 : it->second;
    }
    for (auto& p : f_.pending) {
      const auto it = since.find(p.id);
      p.reclaim_since_ms = it == since.end() ? 0 : it->second;
    }
  }

  // The next time something changes: a run's expected end, or a reclaim
  // grace running out; at least min_step_ms after now.
  TimeMs NextStep() const {
    const TimeMs now = f_.now_ms;
    TimeMs next = kForecastNever;
    for (const auto& [id, e] : ends_) {
      if (e.at > now) next = std::min(next, e.at);
    }
    const TimeMs grace = f_.policy.reclaim_grace_ms;
    for (const auto& p : f_.pending) {
      if (p.reclaim_since_ms > 0 && grace > 0 && p.reclaim_since_ms + grace > now) {
        next = std::min(next, p.reclaim_since_ms + grace);
      }
    }
    if (next == kForecastNever) return next;
    return std::max(next, now + options_.min_step_ms);
  }

  // Moves the forecast's clock to `t`: usage decays and grows with what
  // runs, and every run expected to end by then ends.
  void Advance(TimeMs t) {
    const std::int64_t half = f_.policy.usage_half_life_ms;
    const TimeMs from = f_.now_ms;
    std::unordered_map<std::string, double> add;
    for (const auto& r : f_.running) {
      add[r.tenant + "/" + r.queue] += model::UsageLedger::HeldWorth(MgpuOf(r), from, t, t, half);
    }
    const double keep = model::UsageLedger::Decay(t - from, half);
    for (auto& [queue, value] : f_.decayed_usage) {
      value = static_cast<std::int64_t>(static_cast<double>(value) * keep);
    }
    for (const auto& [queue, value] : add) {
      f_.decayed_usage[queue] += static_cast<std::int64_t>(value);
    }
    f_.now_ms = t;
    while (next_arrival_ < options_.arrivals.size() &&
           options_.arrivals[next_arrival_].submitted_at_ms <= t) {
      f_.pending.push_back(options_.arrivals[next_arrival_++]);
    }
    std::vector<RunningJob> kept;
    kept.reserve(f_.running.size());
    for (auto& r : f_.running) {
      const auto it = ends_.find(r.id);
      if (it == ends_.end() || it->second.at > t) {
        kept.push_back(std::move(r));
        continue;
      }
      predicted_so_far_ = predicted_so_far_ || it->second.predicted;
      Hold(r.resources, r.replicas, false);
      ends_.erase(it);
    }
    f_.running = std::move(kept);
    if (recompute_demand_) f_.demand = DemandOf(f_.pending, f_.running);
  }

  Snapshot f_;
  ForecastOptions options_;
  std::unordered_map<std::int64_t, End> ends_;
  bool predicted_so_far_ = false;
  std::size_t next_arrival_ = 0;  // in options_.arrivals
  bool recompute_demand_ = false;
};

}  // namespace

Forecast ForecastStarts(const Scheduler& scheduler, Snapshot snapshot,
                        const ForecastOptions& options, const Plan* first) {
  Forward forward(std::move(snapshot), options);
  return forward.Run(scheduler, first);
}

}  // namespace berth::sched
