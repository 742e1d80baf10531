#include "sim/baselines.h"

#include <algorithm>
#include <array>

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

}  // namespace berth::sim
