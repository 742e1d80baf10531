// Reclaim and preemption: victims are chosen only together with the
// placement they enable. Every try runs inside the cluster's statement and
// is rolled back unless the whole gang fits and passes quota.
#include <algorithm>
#include <tuple>

#include "sched/cycle.h"

namespace berth::sched {

std::int64_t Cycle::WorkLostMs(const RunningJob& r) const {
  TimeMs since = r.last_checkpoint_ms > 0 ? r.last_checkpoint_ms : r.started_at_ms;
  return std::max<std::int64_t>(0, s_.now_ms - since);
}

std::vector<std::size_t> Cycle::Candidates(const JobCtx& ctx, EvictionCause cause,
                                           Relief* relief) const {
  std::vector<std::size_t> out;
  auto mine = book_.Chain(*ctx.leaf);
  // Preemption looks only at the job's own queue; reclaim at the jobs of
  // every queue whose side of the tree lends (decided once per queue).
  std::vector<const std::vector<std::size_t>*> groups;
  if (cause == EvictionCause::kPreempt) {
    auto it = running_by_leaf_.find(*ctx.leaf);
    if (it == running_by_leaf_.end()) return out;
    groups.push_back(&it->second);
  } else {
    for (const auto& [vq, jobs] : running_by_leaf_) {
      if (vq == *ctx.leaf) continue;
      // The victim's side of the tree: its highest ancestor that is not also
      // ours. Only a side using more than its guarantee lends to others.
      std::optional<std::size_t> side;
      for (std::size_t a : book_.Chain(vq)) {
        if (std::find(mine.begin(), mine.end(), a) != mine.end()) break;
        side = a;
      }
      if (side && book_.Borrowing(*side)) groups.push_back(&jobs);
    }
  }
  for (const auto* group : groups) {
    for (std::size_t i : *group) {
      const RunningJob& r = s_.running[i];
      if (evicted_[i] || !running_preemptible_[i]) continue;
      if (cause == EvictionCause::kPreempt && running_priority_[i] >= ctx.priority) continue;
      // Useless unless one of its replicas sits on a node the job could use.
      bool useful =
          std::any_of(running_nodes_[i].begin(), running_nodes_[i].end(),
                      [&](std::size_t n) { return cluster_.StaticCause(n, ctx.shape).empty(); });
      if (!useful) continue;
      if (s_.now_ms - r.started_at_ms < s_.policy.min_runtime_ms) {
        if (relief != nullptr) {
          TimeMs old_enough = r.started_at_ms + s_.policy.min_runtime_ms;
          if (relief->too_young == 0 || old_enough < relief->first_old_enough_ms) {
            relief->first_old_enough_ms = old_enough;
          }
          ++relief->too_young;
        }
        continue;
      }
      out.push_back(i);
    }
  }
  if (relief != nullptr) {
    relief->tried = true;
    relief->candidates = static_cast<std::int64_t>(out.size());
  }
  std::sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) {
    return std::tuple(running_priority_[a], WorkLostMs(s_.running[a]), s_.running[a].id) <
           std::tuple(running_priority_[b], WorkLostMs(s_.running[b]), s_.running[b].id);
  });
  return out;
}

// Evicts `victims` in the working state and tries the gang. On success the
// state holds the evictions and the placement (quota not yet charged); on
// failure the caller rolls back.
bool Cycle::Attempt(const JobCtx& ctx, const std::vector<std::size_t>& victims,
                    std::vector<ReplicaPlacement>& out, Usage& delta) {
  for (std::size_t v : victims) {
    cluster_.Release(s_.running[v]);
    book_.Remove(*running_queue_[v], running_usage_[v]);
  }
  // GPUs the victims free may be reserved for another job (backfill).
  HideReserved(EndOf(*ctx.job));
  auto placed = cluster_.PlaceGang(ctx.shape, nullptr);
  if (!placed) return false;
  UnhideReserved();
  delta = UsageOf(cluster_, ctx.shape.resources, *placed);
  if (book_.Check(*ctx.leaf, delta, ctx.preemptible)) return false;
  out = std::move(*placed);
  return true;
}

bool Cycle::PlaceWithVictims(const JobCtx& ctx, EvictionCause cause) {
  Relief& relief = relief_[cause == EvictionCause::kReclaim ? 0 : 1];
  relief = {};
  auto candidates = Candidates(ctx, cause, &relief);
  if (candidates.empty()) return false;
  const std::size_t mark = cluster_.Mark();
  std::vector<std::size_t> removed;  // victims currently taken out of the quota book
  auto undo = [&] {
    cluster_.Rollback(mark);
    for (std::size_t v : removed) book_.Add(*running_queue_[v], running_usage_[v]);
    removed.clear();
  };
  auto attempt = [&](const std::vector<std::size_t>& victims, std::vector<ReplicaPlacement>& out,
                     Usage& delta) {
    undo();
    removed = victims;
    return Attempt(ctx, victims, out, delta);
  };

  // Add victims in order until the gang fits. Each one is released on top
  // of those before it; only the tentative placement is rolled back between
  // tries, so a long list costs one release and one placement per victim.
  std::vector<std::size_t> chosen;
  std::vector<ReplicaPlacement> replicas;
  Usage delta;
  bool fits = false;
  auto mine = book_.Chain(*ctx.leaf);
  for (std::size_t c : candidates) {
    if (cause == EvictionCause::kReclaim) {
      // With the victims chosen so far gone, the lender must still be over
      // its guarantee.
      std::optional<std::size_t> side;
      for (std::size_t a : book_.Chain(*running_queue_[c])) {
        if (std::find(mine.begin(), mine.end(), a) != mine.end()) break;
        side = a;
      }
      if (!side || !book_.Borrowing(*side)) continue;
    }
    chosen.push_back(c);
    removed.push_back(c);
    cluster_.Release(s_.running[c]);
    book_.Remove(*running_queue_[c], running_usage_[c]);
    const std::size_t before_try = cluster_.Mark();
    HideReserved(EndOf(*ctx.job));
    if (auto placed = cluster_.PlaceGang(ctx.shape, nullptr)) {
      UnhideReserved();
      delta = UsageOf(cluster_, ctx.shape.resources, *placed);
      if (!book_.Check(*ctx.leaf, delta, ctx.preemptible)) {
        fits = true;
        break;
      }
    }
    cluster_.Rollback(before_try);
  }
  if (!fits) {
    undo();
    return false;
  }
  // Drop victims the placement does not need, latest-chosen first.
  for (std::size_t i = chosen.size(); i-- > 0 && chosen.size() > 1;) {
    if (i >= chosen.size()) continue;
    std::vector<std::size_t> fewer = chosen;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    std::vector<ReplicaPlacement> r2;
    Usage d2;
    if (attempt(fewer, r2, d2)) chosen = std::move(fewer);
  }
  bool ok = attempt(chosen, replicas, delta);
  if (!ok) {  // cannot happen: `chosen` fitted before
    undo();
    return false;
  }
  removed.clear();  // the evictions stay: committed with the placement
  Commit(ctx, std::move(replicas), delta, chosen, cause);
  return true;
}

void Cycle::AddRelief(bool may_reclaim, model::Reason& r) const {
  const Relief& reclaim = relief_[0];
  const Relief& preempt = relief_[1];
  auto set = [&r](std::string_view key, std::int64_t v) { r.counts[std::string(key)] = v; };
  if (!may_reclaim) {
    set(model::kReclaimNotBelowGuarantee, 1);
  } else if (reclaim.tried) {
    set(model::kReclaimCandidates, reclaim.candidates);
  }
  if (preempt.tried) set(model::kPreemptCandidates, preempt.candidates);
  if (move_relief_.tried) {
    set(model::kMoveCandidates, move_relief_.candidates);
    set(model::kMaxMovesKey, s_.policy.consolidation.max_moves);
  }
  std::int64_t young = 0;
  TimeMs first = 0;
  for (const Relief* rl : {&reclaim, &preempt}) {
    if (!rl->tried || rl->too_young == 0) continue;
    if (rl == &reclaim && !may_reclaim) continue;
    if (young == 0 || rl->first_old_enough_ms < first) first = rl->first_old_enough_ms;
    young += rl->too_young;
  }
  if (young > 0) {
    set(model::kEvictableAfterMinRuntime, young);
    set(model::kMinRuntimeEndsInMs, std::max<std::int64_t>(0, first - s_.now_ms));
  }
}

}  // namespace berth::sched
