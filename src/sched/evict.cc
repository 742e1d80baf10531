// Reclaim and preemption: victims are chosen only together with the
// placement they enable. Every try runs inside the cluster's statement and
// is rolled back unless the whole gang fits and passes quota.
#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "common/checked.h"
#include "sched/cycle.h"

namespace berth::sched {

std::int64_t Cycle::WorkLostMs(const RunningJob& r) const {
  TimeMs since = r.last_checkpoint_ms > 0 ? r.last_checkpoint_ms : r.started_at_ms;
  return std::max<std::int64_t>(0, SaturatingSub(s_.now_ms, since));
}

std::int64_t Cycle::LostMgpuMs(std::size_t i) const {
  const RunningJob& r = s_.running[i];
  std::int64_t per_replica = std::int64_t{r.resources.gpus} * 1000;
  if (per_replica == 0 && model::IsSlice(r.resources)) {
    per_replica = std::max<std::int64_t>(1, r.resources.gpu_share_millis);
  }
  const auto mgpu = SaturatingMul(per_replica, static_cast<std::int64_t>(r.replicas.size()));
  return SaturatingMul(WorkLostMs(r), mgpu);
}

std::vector<std::size_t> Cycle::Candidates(const JobCtx& ctx, EvictionCause cause, Relief* relief,
                                           TimeMs saved_since) const {
  std::vector<std::size_t> out;
  auto mine = book_.Chain(*ctx.leaf);
  // Preemption looks only at the job's own queue; reclaim at the jobs of
  // every queue whose side of the tree lends (decided once per queue).
  std::vector<const std::vector<std::size_t>*> groups;
  if (headroom_reclaim_) {
    // Headroom reclaim: preemptible jobs of any queue, this one's too, that
    // are not inference replicas and hold GPUs in a pool with headroom.
    for (const auto& [vq, jobs] : running_by_leaf_) groups.push_back(&jobs);
  } else if (cause == EvictionCause::kPreempt) {
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
      if (saved_since > 0 && !(r.checkpoints && r.last_checkpoint_ms >= saved_since)) continue;
      if (cause == EvictionCause::kPreempt && !headroom_reclaim_ &&
          running_priority_[i] >= ctx.priority) {
        continue;
      }
      if (headroom_reclaim_) {
        if (RunningInference(i)) continue;
        const auto& at = RunningNodes(i);
        if (std::none_of(at.begin(), at.end(),
                         [&](std::size_t n) { return occupied_headroom_[n] != 0; })) {
          continue;
        }
      }
      // Useless unless one of its replicas sits on a node the job could use.
      bool useful = std::any_of(RunningNodes(i).begin(), RunningNodes(i).end(), [&](std::size_t n) {
        return cluster_.StaticCause(n, ctx.shape).empty();
      });
      if (!useful) continue;
      if (SaturatingSub(s_.now_ms, r.started_at_ms) < s_.policy.min_runtime_ms) {
        if (relief != nullptr) {
          TimeMs old_enough = SaturatingAdd(r.started_at_ms, s_.policy.min_runtime_ms);
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
  // Least valuable first, then least wasteful: the GPU time thrown away
  // (work since the last checkpoint, else since the start, times the
  // job's GPUs), then jobs that checkpoint (they resume from it) before
  // jobs that start over.
  using Key = std::tuple<std::int32_t, std::int64_t, bool, std::int64_t>;
  std::vector<std::pair<Key, std::size_t>> keyed;
  keyed.reserve(out.size());
  for (std::size_t i : out) {
    keyed.push_back(
        {Key{running_priority_[i], LostMgpuMs(i), !s_.running[i].checkpoints, s_.running[i].id},
         i});
  }
  std::sort(keyed.begin(), keyed.end());
  for (std::size_t k = 0; k < keyed.size(); ++k) out[k] = keyed[k].second;
  return out;
}

// Evicts `victims` in the working state and tries the gang. On success the
// state holds the evictions and the placement (quota not yet charged); on
// failure the caller rolls back.
bool Cycle::Attempt(const JobCtx& ctx, const std::vector<std::size_t>& victims,
                    std::vector<ReplicaPlacement>& out, Usage& delta) {
  for (std::size_t v : victims) {
    cluster_.Release(s_.running[v]);
    book_.Remove(*running_queue_[v], RunningUsage(v));
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

bool Cycle::PlaceByReclaim(const JobCtx& ctx) {
  grace_ = {};
  const TimeMs since = ctx.job->reclaim_since_ms > 0
                           ? std::min<TimeMs>(ctx.job->reclaim_since_ms, s_.now_ms)
                           : s_.now_ms;
  const TimeMs at = SaturatingAdd<TimeMs>(since, s_.policy.reclaim_grace_ms);
  if (s_.now_ms >= at) return PlaceWithVictims(ctx, EvictionCause::kReclaim);
  // Within the grace: is there a reclaim that would place the job now?
  GraceWait trial;
  if (!PlaceWithVictims(ctx, EvictionCause::kReclaim, 0, &trial)) return false;
  // Borrowers that saved since the job began waiting lose at most that
  // long (usually one checkpoint's worth): they may be taken at once.
  if (PlaceWithVictims(ctx, EvictionCause::kReclaim, std::max<TimeMs>(since, 1))) return true;
  trial.waiting = true;
  trial.since = since;
  trial.at = at;
  grace_ = std::move(trial);
  return false;
}

void Cycle::AddGrace(model::Reason& r) const {
  if (!grace_.waiting) return;
  auto set = [&r](std::string_view key, std::int64_t v) { r.counts[std::string(key)] = v; };
  set(model::kReclaimSinceMs, grace_.since);
  set(model::kReclaimAtMs, grace_.at);
  set(model::kReclaimInMs, std::max<std::int64_t>(0, grace_.at - s_.now_ms));
  set(model::kReclaimVictims, static_cast<std::int64_t>(grace_.victims.size()));
  std::int64_t first = 0;
  std::int64_t worst = 0;
  std::int64_t total = 0;
  for (std::size_t v : grace_.victims) {
    const RunningJob& job = s_.running[v];
    if (first == 0 || job.id < first) first = job.id;
    worst = std::max(worst, WorkLostMs(job));
    total = SaturatingAdd(total, LostMgpuMs(v));
  }
  set(model::kReclaimFirstVictim, first);
  set(model::kReclaimWorkLostMs, worst);
  set(model::kReclaimLostMgpuMs, total);
}

bool Cycle::PlaceWithVictims(const JobCtx& ctx, EvictionCause cause, TimeMs saved_since,
                             GraceWait* trial) {
  Relief only_saved;
  Relief& relief = saved_since > 0 ? only_saved : relief_[cause == EvictionCause::kReclaim ? 0 : 1];
  relief = {};
  auto candidates = Candidates(ctx, cause, &relief, saved_since);
  if (candidates.empty()) return false;
  const std::size_t mark = cluster_.Mark();
  std::vector<std::size_t> removed;  // victims currently taken out of the quota book
  auto undo = [&] {
    cluster_.Rollback(mark);
    for (std::size_t v : removed) book_.Add(*running_queue_[v], RunningUsage(v));
    removed.clear();
  };
  auto attempt = [&](const std::vector<std::size_t>& victims, std::vector<ReplicaPlacement>& out,
                     Usage& delta) {
    undo();
    removed = victims;
    return Attempt(ctx, victims, out, delta);
  };

  // Victims are taken in candidate order, but a whole-GPU gang is tried
  // only once a node could hold one of its replicas: a victim waits on its
  // nodes until the free GPUs and the waiting victims' GPUs there reach a
  // replica's need, and then that node's waiting victims are released
  // together. So a gang is placed by the first nodes the ordered victims
  // free, and a cluster full of small jobs costs one pass over the
  // candidates, not a try per victim. Slices and CPU-only jobs take the
  // victims one by one.
  std::vector<std::size_t> chosen;
  std::vector<ReplicaPlacement> replicas;
  Usage delta;
  bool fits = false;
  auto mine = book_.Chain(*ctx.leaf);
  auto lends = [&](std::size_t c) {
    // With the victims chosen so far gone, the lender must still be over
    // its guarantee.
    if (cause != EvictionCause::kReclaim || headroom_reclaim_) return true;
    std::optional<std::size_t> side;
    for (std::size_t a : book_.Chain(*running_queue_[c])) {
      if (std::find(mine.begin(), mine.end(), a) != mine.end()) break;
      side = a;
    }
    return side && book_.Borrowing(*side);
  };
  auto release = [&](std::size_t c) {
    chosen.push_back(c);
    removed.push_back(c);
    cluster_.Release(s_.running[c]);
    book_.Remove(*running_queue_[c], RunningUsage(c));
  };
  bool gpus_fit = false;  // the last try found GPUs: quota is what stands in the way
  auto try_place = [&] {
    const std::size_t before_try = cluster_.Mark();
    HideReserved(EndOf(*ctx.job));
    gpus_fit = false;
    if (auto placed = cluster_.PlaceGang(ctx.shape, nullptr)) {
      UnhideReserved();
      gpus_fit = true;
      delta = UsageOf(cluster_, ctx.shape.resources, *placed);
      if (!book_.Check(*ctx.leaf, delta, ctx.preemptible)) return true;
    }
    cluster_.Rollback(before_try);
    return false;
  };
  const auto& res = ctx.shape.resources;
  // Taken by node only while GPUs are what is missing: when quota is (the
  // queue's own jobs are preempted to make room in it), any victim helps.
  if (const std::size_t before = cluster_.Mark(); try_place()) cluster_.Rollback(before);
  bool by_node = res.gpus > 0 && !model::IsSlice(res) && !gpus_fit;
  std::unordered_map<std::size_t, std::uint32_t> waiting_gpus;  // [node] GPUs of waiting victims
  std::unordered_map<std::size_t, std::vector<std::size_t>> waiting_on;
  std::vector<char> taken(s_.running.size(), 0);  // released, or skipped as no longer lending
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    const std::size_t c = candidates[k];
    if (!by_node) {
      if (taken[c] != 0) continue;
      taken[c] = 1;
      if (!lends(c)) continue;
      release(c);
      if ((fits = try_place())) break;
      continue;
    }
    std::vector<std::size_t> full;  // nodes that now could hold a replica
    for (const auto& rp : s_.running[c].replicas) {
      auto n = NodeIndex(rp.node);
      if (!n) continue;  // replicas without GPUs wait too: they may hold the CPU or memory
      waiting_on[*n].push_back(c);
      auto& w = waiting_gpus[*n];
      w += static_cast<std::uint32_t>(rp.gpu_indices.size());
      if (cluster_.FreeEligible(*n, ctx.shape) + w >= res.gpus) full.push_back(*n);
    }
    if (full.empty()) continue;
    bool released = false;
    for (std::size_t n : full) {
      for (std::size_t v : waiting_on[n]) {
        if (taken[v] != 0) continue;
        taken[v] = 1;
        if (!lends(v)) continue;
        release(v);
        released = true;
      }
      waiting_on[n].clear();
      waiting_gpus[n] = 0;  // its GPUs now show as free
    }
    if (released && (fits = try_place())) break;
    if (released && gpus_fit) {
      // GPUs are there now, quota is not: from here on every victim counts,
      // the ones still waiting on their nodes first (in order).
      by_node = false;
      k = static_cast<std::size_t>(-1);  // start over; released victims are skipped
    }
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
  if (trial != nullptr) {
    trial->victims = chosen;
    trial->replicas = std::move(replicas);
    undo();
    return true;
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
  } else if (reclaim.tried && !grace_.waiting) {
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
