// Estimated starts, reservations and backfill (EASY style). A queue head
// that waits for GPUs gets its earliest start by replaying the releases of
// running jobs at their max runtime (berthd stops a job then, so that is a
// hard bound) onto the working cluster inside its statement, rolled back
// after. While the cycle's cap allows, the GPUs it would get are reserved:
// from then on a job may use a reserved GPU only if it ends (now + its max
// runtime) no later than the reserved start, so backfill never delays the
// reserved job. GPUs outside every reservation are used as before.
#include <algorithm>
#include <iterator>
#include <tuple>

#include "common/checked.h"
#include "sched/cycle.h"

namespace berth::sched {

TimeMs Cycle::EndOf(const PendingJob& job) const {
  if (job.max_runtime_ms <= 0 || job.max_runtime_ms >= kNever - s_.now_ms) return kNever;
  return s_.now_ms + job.max_runtime_ms;
}

TimeMs Cycle::ExpectedEndOf(const PendingJob& job) const {
  if (job.max_runtime_ms > 0 || !job.predicted.known()) return EndOf(job);
  if (job.predicted.runtime_ms >= kNever - s_.now_ms) return kNever;
  return s_.now_ms + job.predicted.runtime_ms;
}

void Cycle::HideReserved(TimeMs end) {
  hidden_.clear();
  hidden_shared_.clear();
  for (const auto& [key, hold] : holds_) {
    if (end <= hold.from) continue;  // it ends before the reserved start: may use it
    const GpuView& g = cluster_.Node(key.first).gpus[key.second];
    if (g.free) {
      cluster_.SetGpuFree(key.first, key.second, false);
      hidden_.push_back(key);
    } else if (g.sharing && g.shared_millis > 0 && g.shared_millis < 1000) {
      // Reserved for a slice beside slices already there: no other slice
      // may take the room it was promised.
      hidden_shared_.emplace_back(key, g.shared_millis);
      cluster_.SetGpuSharedMillis(key.first, key.second, 1000);
    }
  }
}

void Cycle::UnhideReserved() {
  for (const auto& key : hidden_) cluster_.SetGpuFree(key.first, key.second, true);
  for (const auto& [key, millis] : hidden_shared_) {
    cluster_.SetGpuSharedMillis(key.first, key.second, millis);
  }
  hidden_.clear();
  hidden_shared_.clear();
}

std::vector<Cycle::GpuKey> Cycle::KeysOf(const std::vector<ReplicaPlacement>& replicas) const {
  std::vector<GpuKey> out;
  for (const auto& rp : replicas) {
    auto n = cluster_.Find(rp.node);
    if (!n) continue;
    const auto& gpus = cluster_.Node(*n).gpus;
    for (std::uint32_t idx : rp.gpu_indices) {
      if (const GpuView* g = cluster_.Gpu(*n, idx)) {
        out.emplace_back(*n, static_cast<std::size_t>(g - gpus.data()));
      }
    }
  }
  return out;
}

void Cycle::ReplayRelease(const model::Resources& res,
                          const std::vector<ReplicaPlacement>& replicas, TimeMs t) {
  // Into a scratch job whose buffers are reused: no allocation per release.
  RunningJob& part = scratch_;
  part.resources = res;
  part.replicas.resize(replicas.size());
  for (std::size_t k = 0; k < replicas.size(); ++k) {
    part.replicas[k].node = replicas[k].node;
    part.replicas[k].gpu_indices = replicas[k].gpu_indices;
  }
  if (!holds_.empty() || !expected_.empty()) {
    // A GPU reserved for a job that is still due to hold it stays taken; the
    // end of that reservation frees it.
    for (auto& rp : part.replicas) {
      auto n = cluster_.Find(rp.node);
      if (!n) continue;
      std::erase_if(rp.gpu_indices, [&](std::uint32_t idx) {
        const GpuView* g = cluster_.Gpu(*n, idx);
        if (g == nullptr) return true;
        const GpuKey key{*n, static_cast<std::size_t>(g - cluster_.Node(*n).gpus.data())};
        auto it = holds_.find(key);
        if (it != holds_.end()) {
          if (it->second.until <= t) return false;
          // The reservation's end frees it (Replay).
          deferred_.push_back(key);
          return true;
        }
        auto ex = expected_.find(key);
        if (ex == expected_.end() || ex->second <= t) return false;
        // The earlier head takes it from this end until its own: the end
        // of that head's run frees it (Replay).
        deferred_.push_back(key);
        return true;
      });
    }
  }
  cluster_.Release(part);
}

void Cycle::ExtendTimeline() {
  if (!timeline_built_) {
    timeline_built_ = true;
    for (std::size_t i = 0; i < s_.running.size(); ++i) {
      const RunningJob& r = s_.running[i];
      // A declared max runtime (started_at_ms is the agent's report:
      // saturating, whatever it says), else a predicted end
      // (runtime_estimate.h, with its fallback once overrun).
      const ExpectedEnd end = sched::ExpectedEndOf(s_.now_ms, r.started_at_ms, r.max_runtime_ms,
                                                   r.predicted.runtime_ms);
      if (end.end_ms == 0) continue;
      timeline_.push_back({end.end_ms, 0, i});
    }
    std::sort(timeline_.begin(), timeline_.end());
  }
  if (timed_started_ == started_.size()) return;
  // Jobs placed since: sorted apart, then merged in (buffers reused: a large
  // allocation per replay costs more than the replay).
  fresh_.clear();
  for (; timed_started_ < started_.size(); ++timed_started_) {
    if (started_[timed_started_].end != kNever) {
      fresh_.push_back({started_[timed_started_].end, 1, timed_started_});
    }
  }
  if (fresh_.empty()) return;
  std::sort(fresh_.begin(), fresh_.end());
  merged_.clear();
  merged_.reserve(timeline_.size() + fresh_.size());
  std::merge(timeline_.begin(), timeline_.end(), fresh_.begin(), fresh_.end(),
             std::back_inserter(merged_));
  timeline_.swap(merged_);
}

model::Reason Cycle::ExplainWaiting(const JobCtx& ctx, std::uint32_t placed_before_failure) {
  const std::uint64_t state = cluster_.StateId();
  const std::size_t mark = cluster_.Mark();
  HideReserved(EndOf(*ctx.job));
  if (hidden_.empty() && hidden_shared_.empty()) {
    return ExplainNoFit(ctx, placed_before_failure);  // nothing to hide
  }
  // Cached like ExplainNoFit, by the state before hiding (hiding takes fresh
  // ids) and by the GPUs hidden.
  std::string key = ExplainKey(ctx, placed_before_failure);
  key += '\3';
  for (const auto& [n, i] : hidden_) {
    key += std::to_string(n);
    key += ':';
    key += std::to_string(i);
    key += ' ';
  }
  for (const auto& [gpu, millis] : hidden_shared_) {
    key += std::to_string(gpu.first);
    key += '/';
    key += std::to_string(gpu.second);
    key += ' ';
  }
  const auto hidden = static_cast<std::int64_t>(hidden_.size());
  hidden_.clear();
  hidden_shared_.clear();
  auto it = explained_.find(key);
  if (it != explained_.end() && it->second.first == state) {
    cluster_.Rollback(mark);
    return it->second.second;
  }
  model::Reason r = ComputeNoFit(ctx, placed_before_failure);
  cluster_.Rollback(mark);
  r.counts[std::string(model::kReservedFreeGpus)] = hidden;
  explained_[std::move(key)] = {state, r};
  return r;
}

const std::vector<char>& Cycle::UsableNodes(const JobCtx& ctx) {
  std::string key = ExplainKey(ctx, 0);
  auto it = usable_.find(key);
  if (it != usable_.end()) return it->second;
  std::vector<char> usable(cluster_.size());
  for (std::size_t n = 0; n < usable.size(); ++n) {
    usable[n] = cluster_.StaticCause(n, ctx.shape).empty() ? 1 : 0;
  }
  return usable_.emplace(std::move(key), std::move(usable)).first->second;
}

Eta Cycle::Estimate(const JobCtx& ctx) {
  // The answer depends on the shape, the cluster state and the holds; heads
  // that wait one after another with nothing placed between share it.
  std::string key = ExplainKey(ctx, 0);
  key += '\2';
  key += std::to_string(plan_.reservations.size());
  key += '\2';
  key += std::to_string(expected_heads_);
  auto it = estimated_.find(key);
  if (it != estimated_.end() && it->second.first == cluster_.StateId()) return it->second.second;
  const std::uint64_t state = cluster_.StateId();
  Eta eta = Replay(ctx);
  estimated_[std::move(key)] = {state, eta};
  return eta;
}

Eta Cycle::Replay(const JobCtx& ctx) {
  Eta eta;
  if (cluster_.empty()) return eta;
  const std::vector<char>& usable = UsableNodes(ctx);
  ExtendTimeline();
  // Releases by time: running jobs at their max runtime, jobs placed this
  // cycle at now + theirs (timeline_), reservations at their end (unholds).
  std::vector<GpuKey> held;
  std::vector<std::pair<TimeMs, std::size_t>> unholds;
  for (const auto& [gpu, hold] : holds_) {
    if (hold.until != kNever && usable[gpu.first] != 0)
      unholds.emplace_back(hold.until, held.size());
    held.push_back(gpu);
  }
  // GPUs earlier heads are expected to take, until their predicted ends.
  deferred_.clear();
  for (const auto& [gpu, until] : expected_) {
    if (holds_.contains(gpu)) continue;
    if (usable[gpu.first] != 0) unholds.emplace_back(until, held.size());
    held.push_back(gpu);
  }
  std::sort(unholds.begin(), unholds.end());
  auto relevant = [&](const TimedRelease& e) {
    const auto& nodes = e.kind == 0 ? RunningNodes(e.index) : started_[e.index].nodes;
    if (e.kind == 0 && evicted_[e.index]) return false;
    return std::any_of(nodes.begin(), nodes.end(), [&](std::size_t n) { return usable[n] != 0; });
  };
  std::size_t a = 0;
  std::size_t b = 0;
  auto skip = [&] {
    while (a < timeline_.size() && !relevant(timeline_[a])) ++a;
  };
  skip();
  if (a == timeline_.size() && unholds.empty()) {
    FindBlockers(ctx, eta);
    return eta;
  }
  const std::size_t mark = cluster_.Mark();
  // Reserved GPUs free now are taken by their reservation until it ends. A
  // reserved GPU that holds slices (a slice reserved beside them) is filled
  // for the whole replay: its share at the reservation's end is not tracked,
  // so the estimate errs late, never early.
  std::vector<char> taken(held.size(), 0);
  for (std::size_t h = 0; h < held.size(); ++h) {
    const GpuView& g = cluster_.Node(held[h].first).gpus[held[h].second];
    if (g.free) {
      cluster_.SetGpuFree(held[h].first, held[h].second, false);
      taken[h] = 1;
    } else if (g.sharing && g.shared_millis > 0 && g.shared_millis < 1000) {
      cluster_.SetGpuSharedMillis(held[h].first, held[h].second, 1000);
    }
  }
  // Whether an end replayed so far was a prediction, and the last job ended.
  bool predicted = false;
  std::int64_t after_job = 0;
  TimeMs after_ms = 0;
  bool after_overrun = false;
  while (a < timeline_.size() || b < unholds.size()) {
    const TimeMs t = std::min(a < timeline_.size() ? timeline_[a].t : kNever,
                              b < unholds.size() ? unholds[b].first : kNever);
    for (; a < timeline_.size() && timeline_[a].t == t; ++a, skip()) {
      const TimedRelease& e = timeline_[a];
      if (!relevant(e)) continue;
      if (e.kind == 0) {
        const RunningJob& r = s_.running[e.index];
        ReplayRelease(r.resources, r.replicas, t);
        predicted = predicted || r.max_runtime_ms <= 0;
        after_job = r.id;
        after_overrun = r.max_runtime_ms <= 0 &&
                        SaturatingAdd(r.started_at_ms, r.predicted.runtime_ms) <= s_.now_ms;
      } else {
        const Started& st = started_[e.index];
        ReplayRelease(st.resources, plan_.placements[st.placement].replicas, t);
        predicted = predicted || st.predicted;
        after_job = st.job;
        after_overrun = false;
      }
      after_ms = t;
    }
    for (; b < unholds.size() && unholds[b].first == t; ++b) {
      const std::size_t h = unholds[b].second;
      if (taken[h] != 0 ||
          std::find(deferred_.begin(), deferred_.end(), held[h]) != deferred_.end()) {
        cluster_.SetGpuFree(held[h].first, held[h].second, true);
      }
    }
    if (auto placed = cluster_.PlaceGang(ctx.shape, nullptr)) {
      eta.known = true;
      eta.start_ms = std::max(t, s_.now_ms);
      eta.replicas = std::move(*placed);
      eta.basis = predicted ? model::EtaBasis::kPredicted : model::EtaBasis::kDeclared;
      eta.after_job = after_job;
      eta.after_ms = after_job != 0 ? after_ms : 0;
      eta.after_overrun = after_job != 0 && after_overrun;
      break;
    }
  }
  cluster_.Rollback(mark);
  if (!eta.known) FindBlockers(ctx, eta);
  return eta;
}

// Every release with a known time has been replayed and the job still does
// not fit: jobs without a max runtime on nodes it could use hold it back, or
// (none there) it does not fit even on an emptied cluster.
void Cycle::FindBlockers(const JobCtx& ctx, Eta& eta) {
  const std::vector<char>& usable = UsableNodes(ctx);
  std::int64_t lowest = 0;
  std::int64_t count = 0;
  auto add = [&](std::int64_t id) {
    ++count;
    if (lowest == 0 || id < lowest) lowest = id;
  };
  for (std::size_t n = 0; n < usable.size(); ++n) {
    if (usable[n] == 0) continue;
    unlimited_on_.ForEach(n, add);
  }
  std::vector<std::int64_t> reserved;  // reserved jobs without a max runtime
  for (const auto& [gpu, hold] : holds_) {
    if (hold.until == kNever && usable[gpu.first] != 0 &&
        std::find(reserved.begin(), reserved.end(), hold.unlimited_job) == reserved.end()) {
      reserved.push_back(hold.unlimited_job);
      add(hold.unlimited_job);
    }
  }
  eta.known = false;
  if (count > 0) {
    eta.unknown = model::EtaUnknown::kBlockedByUnlimited;
    eta.blocked_by = lowest;
    eta.blockers = count;
  } else {
    eta.unknown = model::EtaUnknown::kCapacity;
  }
}

void Cycle::Reserve(const JobCtx& ctx, const Eta& eta) {
  const TimeMs until =
      ctx.job->max_runtime_ms > 0 && ctx.job->max_runtime_ms < kNever - eta.start_ms
          ? eta.start_ms + ctx.job->max_runtime_ms
          : kNever;
  for (const GpuKey& gpu : KeysOf(eta.replicas)) {
    auto [it, fresh] = holds_.try_emplace(gpu, Hold{eta.start_ms, until, 0});
    if (!fresh) {
      it->second.from = std::min(it->second.from, eta.start_ms);
      it->second.until = std::max(it->second.until, until);
    }
    if (until == kNever && it->second.unlimited_job == 0) it->second.unlimited_job = ctx.job->id;
  }
  auto at = std::lower_bound(hold_starts_.begin(), hold_starts_.end(), eta.start_ms);
  if (at == hold_starts_.end() || *at != eta.start_ms) hold_starts_.insert(at, eta.start_ms);
  plan_.reservations.push_back({ctx.job->id, eta.start_ms, eta.replicas});
}

void Cycle::Expect(const JobCtx& ctx, const Eta& eta) {
  // Only a head whose own run time is predicted: without one, its end is
  // unknown, and an estimate behind it would be none at all.
  const PendingJob& job = *ctx.job;
  if (!eta.known || job.max_runtime_ms > 0 || !job.predicted.known()) return;
  // As many heads as may hold reservations (backfill.max_reservations): each
  // one makes every estimate after it a fresh replay, and past a few dozen
  // heads the order GPUs will be served in is a guess anyway.
  if (std::ssize(plan_.reservations) + static_cast<std::ptrdiff_t>(expected_heads_) >=
      s_.policy.backfill.max_reservations) {
    return;
  }
  const TimeMs until = SaturatingAdd(eta.start_ms, job.predicted.runtime_ms);
  for (const GpuKey& gpu : KeysOf(eta.replicas)) {
    auto [it, fresh] = expected_.try_emplace(gpu, until);
    if (!fresh) it->second = std::max(it->second, until);
  }
  ++expected_heads_;
}

void Cycle::AddEta(const Eta& eta, bool reserved, model::Reason& why) const {
  auto set = [&why](std::string_view key, std::int64_t v) { why.counts[std::string(key)] = v; };
  if (eta.known) {
    set(model::kEtaMs, eta.start_ms);
    set(model::kEtaInMs, eta.start_ms - s_.now_ms);
    set(model::kEtaReserved, reserved ? 1 : 0);
    set(model::kEtaBasis, static_cast<std::int64_t>(eta.basis));
    if (eta.after_job != 0) {
      set(model::kEtaAfterJob, eta.after_job);
      set(model::kEtaAfterMs, eta.after_ms);
      if (eta.after_overrun) set(model::kEtaAfterOverrun, 1);
    }
    return;
  }
  set(model::kEtaUnknown, static_cast<std::int64_t>(eta.unknown));
  if (eta.unknown == model::EtaUnknown::kBlockedByUnlimited) {
    set(model::kEtaBlockedBy, eta.blocked_by);
    set(model::kEtaBlockers, eta.blockers);
  }
}

void Cycle::AddPrediction(const PendingJob& job, model::Reason& why) {
  if (job.max_runtime_ms > 0 || !job.predicted.known()) return;
  why.counts[std::string(model::kPredictedRuntimeMs)] = job.predicted.runtime_ms;
  why.counts[std::string(model::kPredictedBasis)] = static_cast<std::int64_t>(job.predicted.basis);
  why.counts[std::string(model::kPredictedSamples)] = job.predicted.samples;
}

void Cycle::Backfill() {
  if (candidates_.empty()) return;
  dropped_.assign(plan_.pending.size(), false);
  // A failed try is remembered by what decides it (queue, shape, how many
  // reservation starts it ends after) and the cluster state: most of the
  // jobs behind a head share a few shapes, and once the GPUs they may use
  // are gone each shape is tried once per state, not once per job.
  using Key =
      std::tuple<std::string_view, std::string_view, std::uint32_t, std::uint32_t, std::uint32_t,
                 std::uint64_t, std::uint64_t, std::string_view, bool, int, int, int, std::size_t,
                 std::string_view, bool, std::uint32_t, std::uint64_t>;
  std::map<Key, std::uint64_t> failed;
  for (const Candidate& cand : candidates_) {
    const PendingJob& j = *cand.job;
    // Running ahead of a head needs free whole GPUs somewhere (the cheap
    // test first: once the cluster is full, most candidates stop here).
    if (!cand.backfill && j.resources.gpus > 0 && !model::IsSlice(j.resources) &&
        cluster_.FreeGpus() < j.resources.gpus) {
      continue;
    }
    const TimeMs end = EndOf(j);
    const auto after = static_cast<std::size_t>(
        std::lower_bound(hold_starts_.begin(), hold_starts_.end(), end) - hold_starts_.begin());
    const bool plain = j.node_selector.empty() && j.tolerations.empty() && j.image.empty();
    Key key{j.tenant,
            j.queue,
            j.replicas,
            j.resources.gpus,
            j.resources.cpu_millis,
            j.resources.memory_bytes,
            j.resources.gpu_memory_bytes,
            j.resources.gpu_model,
            j.topology.one_node,
            static_cast<int>(j.topology.nvlink_island),
            j.preemptible ? (*j.preemptible ? 1 : 0) : -1,
            static_cast<int>(j.priority),
            after,
            j.pool,
            cand.backfill,
            j.resources.gpu_share_millis,
            j.resources.gpu_share_bytes};
    if (plain) {
      if (auto it = failed.find(key); it != failed.end() && it->second == cluster_.StateId()) {
        continue;
      }
    }
    const std::uint64_t state = cluster_.StateId();
    const JobCtx ctx = Resolve(j);
    std::optional<QuotaRefusal> refusal;
    std::uint32_t placed_before = 0;
    const bool placed = ctx.leaf && (cand.backfill ? PlaceNow(ctx, refusal, placed_before)
                                                   : PlaceAhead(ctx, heads_[cand.head],
                                                                *head_capacity_of_[cand.head]));
    if (placed) {
      dropped_[cand.pending] = true;
      // The jobs behind it in its queue have one job fewer ahead.
      const std::int64_t gpus = std::int64_t{j.resources.gpus} * j.replicas;
      for (std::size_t k = cand.pending + 1; k < cand.block_end; ++k) {
        model::Reason& r = plan_.pending[k].reason;
        if (dropped_[k] || r.code != model::ReasonCode::kBehindInQueue) continue;
        for (auto [name, by] :
             {std::pair{model::kPosition, std::int64_t{1}},
              std::pair{model::kAheadJobs, std::int64_t{1}}, std::pair{model::kAheadGpus, gpus}}) {
          if (auto it = r.counts.find(name); it != r.counts.end()) it->second -= by;
        }
      }
    } else if (plain) {
      failed[key] = state;
    }
  }
}

}  // namespace berth::sched
