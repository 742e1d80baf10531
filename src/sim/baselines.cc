#include "sim/baselines.h"

#include <algorithm>
#include <array>
#include <map>

namespace berth::sim {

namespace {

void IntoOneQueue(sched::Snapshot& snap) {
  for (auto& p : snap.pending) {
    p.tenant = "default";
    p.queue = "default";
  }
  for (auto& r : snap.running) {
    r.tenant = "default";
    r.queue = "default";
  }
  snap.policy = model::DefaultPolicy();
  snap.decayed_usage.clear();
}

}  // namespace

SnapshotAdjuster OneQueue() {
  return
      [](sched::Snapshot& snap, const std::map<std::int64_t, JobProgress>&) { IntoOneQueue(snap); };
}

SnapshotAdjuster ShortestJobFirstOracle() {
  return [](sched::Snapshot& snap, const std::map<std::int64_t, JobProgress>& progress) {
    IntoOneQueue(snap);
    // The FIFO scheduler orders by (submitted_at_ms, id): give it run times.
    for (auto& p : snap.pending) p.submitted_at_ms = progress.at(p.id).remaining_ms;
  };
}

SnapshotAdjuster LeastAttainedService(std::vector<std::int64_t> thresholds) {
  std::sort(thresholds.begin(), thresholds.end());
  if (thresholds.size() > 3) thresholds.resize(3);
  return [thresholds](sched::Snapshot& snap, const std::map<std::int64_t, JobProgress>& progress) {
    static constexpr std::array<model::Priority, 4> kLevels{
        model::Priority::kCritical, model::Priority::kHigh, model::Priority::kNormal,
        model::Priority::kLow};
    auto level = [&](std::int64_t id) {
      std::int64_t attained = progress.at(id).attained_gpu_ms;
      std::size_t l = 0;
      while (l < thresholds.size() && attained >= thresholds[l]) ++l;
      // With fewer thresholds the last level is the lowest one.
      return l == thresholds.size() ? model::Priority::kLow : kLevels[l];
    };
    IntoOneQueue(snap);
    for (auto& p : snap.pending) {
      p.priority = level(p.id);
      p.preemptible = true;
    }
    for (auto& r : snap.running) {
      r.priority = level(r.id);
      r.preemptible = true;
    }
  };
}

std::int64_t FreeMillis(const sched::GpuView& g) {
  if (!g.healthy) return 0;
  if (g.free) return 1000;
  if (g.sharing && g.shared_millis > 0) return 1000 - std::int64_t{g.shared_millis};
  return 0;
}

std::optional<std::vector<std::uint32_t>> FitReplica(const sched::NodeView& node,
                                                     const model::Resources& r) {
  if (!node.ready || node.cpu_millis_free < r.cpu_millis ||
      node.memory_bytes_free < r.memory_bytes) {
    return std::nullopt;
  }
  auto eligible = [&](const sched::GpuView& g) {
    return g.healthy && (r.gpu_model.empty() || g.model == r.gpu_model) &&
           g.memory_bytes >= r.gpu_memory_bytes;
  };
  std::vector<std::uint32_t> out;
  if (model::IsSlice(r)) {
    std::optional<std::pair<std::int64_t, std::uint32_t>> best;  // (room left, index)
    for (const auto& g : node.gpus) {
      if (!eligible(g) || !g.sharing) continue;
      const model::GpuSlice slice = model::SliceOf(r, g.memory_bytes);
      const std::int64_t room = FreeMillis(g) - std::int64_t{slice.millis};
      if (room < 0 || g.shared_bytes + slice.bytes > g.memory_bytes) continue;
      if (!best || room < best->first) best = std::pair{room, g.index};
    }
    if (!best) return std::nullopt;
    out.push_back(best->second);
    return out;
  }
  for (const auto& g : node.gpus) {
    if (out.size() == r.gpus) break;
    if (eligible(g) && g.free) out.push_back(g.index);
  }
  if (out.size() < r.gpus) return std::nullopt;
  return out;
}

sched::Plan PlacementBaseline::Schedule(const sched::Snapshot& snapshot) const {
  sched::Plan plan;
  std::vector<sched::NodeView> nodes = snapshot.nodes;
  std::vector<const sched::PendingJob*> order;
  for (const auto& p : snapshot.pending) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return std::pair{a->submitted_at_ms, a->id} < std::pair{b->submitted_at_ms, b->id};
  });
  auto free_gpus = [](const sched::NodeView& n) {
    std::int64_t sum = 0;
    for (const auto& g : n.gpus) sum += FreeMillis(g);
    return sum;
  };
  for (const auto* job : order) {
    std::vector<sched::NodeView> trial = nodes;
    std::vector<sched::ReplicaPlacement> replicas;
    bool placed = true;
    for (std::uint32_t i = 0; i < job->replicas && placed; ++i) {
      std::optional<std::size_t> pick;
      std::vector<std::uint32_t> pick_gpus;
      std::int64_t pick_score = 0;
      for (std::size_t n = 0; n < trial.size(); ++n) {
        auto gpus = FitReplica(trial[n], job->resources);
        if (!gpus) continue;
        const std::int64_t score = rule_ == PlacementRule::kSpread    ? -free_gpus(trial[n])
                                   : rule_ == PlacementRule::kBestFit ? free_gpus(trial[n])
                                                                      : 0;
        if (!pick || score < pick_score) {
          pick = n;
          pick_gpus = std::move(*gpus);
          pick_score = score;
          if (rule_ == PlacementRule::kFirstFit) break;
        }
      }
      if (!pick) {
        placed = false;
        break;
      }
      sched::ReplicaPlacement rp{i, trial[*pick].name, pick_gpus};
      sched::HoldGpus(trial, job->resources, {rp}, true);
      trial[*pick].cpu_millis_free -= job->resources.cpu_millis;
      trial[*pick].memory_bytes_free -= job->resources.memory_bytes;
      replicas.push_back(std::move(rp));
    }
    if (placed) {
      nodes = std::move(trial);
      plan.placements.push_back({job->id, std::move(replicas)});
    } else {
      plan.pending.push_back({job->id, {model::ReasonCode::kNoNodeFits, {}, {}}});
    }
  }
  return plan;
}

}  // namespace berth::sim
