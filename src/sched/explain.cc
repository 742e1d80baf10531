// Reasons for jobs left waiting: node causes counted over every node,
// fragmentation, the queue's quota numbers, and a "would run now if" when
// one change suffices and is cheap to find (a trial placement rolled back).
#include <algorithm>
#include <functional>
#include <set>

#include "sched/cycle.h"

namespace berth::sched {
namespace {

void Set(model::Reason& r, std::string_view key, std::int64_t v) {
  r.counts[std::string(key)] = v;
}

}  // namespace

void Cycle::AddQueueNumbers(const JobCtx& ctx, model::Reason& r, const QuotaRefusal* same) const {
  if (!ctx.leaf || r.counts.contains(model::kQueueUsed)) return;
  QuotaRefusal n = same != nullptr ? *same : book_.Numbers(*ctx.leaf, ctx.requested_mgpu);
  Set(r, model::kQueueRequested, ctx.requested_mgpu);
  Set(r, model::kQueueUsed, n.used);
  Set(r, model::kQueueGuaranteed, n.guaranteed);
  if (n.borrow_limit) Set(r, model::kQueueBorrowLimit, *n.borrow_limit);
  Set(r, model::kQueueBorrowable, n.borrowable_now);
}

model::Reason Cycle::ExplainQuota(const QuotaRefusal& q) {
  model::Reason r;
  r.code = q.not_preemptible ? model::ReasonCode::kNotPreemptibleOverGuarantee
                             : model::ReasonCode::kOverQuota;
  r.detail = q.queue + " " + model::ResourceKeyName(q.key);
  Set(r, model::kQueueRequested, q.requested);
  Set(r, model::kQueueUsed, q.used);
  Set(r, model::kQueueGuaranteed, q.guaranteed);
  if (q.borrow_limit) Set(r, model::kQueueBorrowLimit, *q.borrow_limit);
  Set(r, model::kQueueBorrowable, q.borrowable_now);
  return r;
}

void Cycle::AddHints(const JobCtx& ctx, model::Reason& r) {
  // A hint is given only when the changed job would both be placed and be
  // admitted by its queue's quota (per-model and GPU-memory quota count the
  // placement), so it never promises a start quota would refuse.
  auto fits = [&](const JobShape& shape) -> std::optional<std::vector<ReplicaPlacement>> {
    std::size_t mark = cluster_.Mark();
    auto placed = cluster_.PlaceGang(shape, nullptr);
    cluster_.Rollback(mark);
    if (!placed || !ctx.leaf) return placed;
    if (book_.Check(*ctx.leaf, UsageOf(cluster_, shape.resources, *placed), ctx.preemptible)) {
      return std::nullopt;
    }
    return placed;
  };
  const auto& res = ctx.shape.resources;
  // Another GPU model.
  if (!res.gpu_model.empty()) {
    JobShape any = ctx.shape;
    any.resources.gpu_model.clear();
    if (auto p = fits(any); p && !p->empty() && !p->front().gpu_indices.empty()) {
      auto n = cluster_.Find(p->front().node);
      const GpuView* g = n ? cluster_.Gpu(*n, p->front().gpu_indices.front()) : nullptr;
      if (g != nullptr && g->model != res.gpu_model) {
        r.detail = "gpu_model=" + g->model;
        return;
      }
    }
  }
  // Less resident GPU memory: the largest GPU memory size in the cluster
  // below the ask with which the job would run now.
  if (res.gpu_memory_bytes > 0 && r.counts.contains(std::string(model::kCauseGpuMemory))) {
    std::set<std::uint64_t, std::greater<>> sizes;
    for (std::size_t n = 0; n < cluster_.size(); ++n) {
      for (const GpuView& g : cluster_.Node(n).gpus) {
        if (g.memory_bytes < res.gpu_memory_bytes) sizes.insert(g.memory_bytes);
      }
    }
    for (std::uint64_t size : sizes) {
      if (size == 0) break;
      JobShape less = ctx.shape;
      less.resources.gpu_memory_bytes = size;
      if (auto p = fits(less); p && !p->empty()) {
        r.detail = "gpu_memory=" + std::to_string(size);
        return;
      }
    }
  }
  // Another pool of the queue.
  if (!ctx.job->pool.empty() && ctx.leaf) {
    std::vector<std::string> pools = book_.Pools(*ctx.leaf);
    if (pools.empty()) {
      for (const auto& p : s_.policy.pools) pools.push_back(p.name);
    }
    for (const auto& name : pools) {
      if (name == ctx.job->pool) continue;
      JobShape other = ctx.shape;
      other.pool_forbidden = false;
      other.pools = {s_.policy.FindPool(name)};
      if (other.pools.front() != nullptr && fits(other)) {
        r.detail = "pool=" + name;
        return;
      }
    }
  }
  // A pool its queue is not bound to, where it would run now: the platform
  // admin's change, named with the queue whose pools bind the job.
  if (ctx.job->pool.empty() && ctx.leaf && r.counts.contains(std::string(model::kCausePool))) {
    const std::vector<std::string>& bound = book_.Pools(*ctx.leaf);
    if (!bound.empty()) {
      for (const auto& p : s_.policy.pools) {
        if (std::find(bound.begin(), bound.end(), p.name) != bound.end()) continue;
        JobShape other = ctx.shape;
        other.pool_forbidden = false;
        other.pools = {&p};
        if (fits(other)) {
          r.detail = "queue_pool=" + book_.PoolsOwner(*ctx.leaf) + " " + p.name;
          return;
        }
      }
    }
  }
}

std::string Cycle::ExplainKey(const JobCtx& ctx, std::uint32_t placed_before_failure) {
  const JobShape& s = ctx.shape;
  const auto& res = s.resources;
  // Fields joined with separators that names cannot hold ('\0', '\1').
  std::string k;
  auto add = [&k](std::string_view v) {
    k += v;
    k += '\0';
  };
  for (std::uint64_t v :
       {std::uint64_t{s.replicas}, std::uint64_t{res.gpus}, res.gpu_memory_bytes,
        std::uint64_t{res.gpu_share_millis}, res.gpu_share_bytes, std::uint64_t{res.cpu_millis},
        res.memory_bytes, std::uint64_t{placed_before_failure}, std::uint64_t{s.pool_forbidden},
        std::uint64_t{s.topology.one_node}, static_cast<std::uint64_t>(s.topology.nvlink_island),
        std::uint64_t{s.needs_container}}) {
    add(std::to_string(v));
  }
  add(res.gpu_model);
  for (const auto& [key, value] : s.node_selector) add(key + '\1' + value);
  k += '\1';
  for (const auto& t : s.tolerations) add(t.key + '\1' + t.value + '\1' + t.effect);
  k += '\1';
  for (const model::Pool* p : s.pools) add(p != nullptr ? p->name : std::string());
  k += '\1';
  // The pool hints read the job's pool and its queue's pools (and name the
  // queue that binds them).
  if (!ctx.job->pool.empty() || !s.pools.empty()) {
    add(ctx.job->pool);
    add(ctx.leaf ? std::to_string(*ctx.leaf) : std::string("-"));
  }
  // Kept out of a pool's inference headroom: which nodes.
  if (s.headroom_full != nullptr) {
    k += '\2';
    k.append(s.headroom_full->begin(), s.headroom_full->end());
  }
  return k;
}

model::Reason Cycle::ExplainNoFit(const JobCtx& ctx, std::uint32_t placed_before_failure) {
  std::string key = ExplainKey(ctx, placed_before_failure);
  auto it = explained_.find(key);
  if (it != explained_.end() && it->second.first == cluster_.StateId()) return it->second.second;
  model::Reason r = ComputeNoFit(ctx, placed_before_failure);
  explained_[std::move(key)] = {cluster_.StateId(), r};
  return r;
}

model::Reason Cycle::ComputeNoFit(const JobCtx& ctx, std::uint32_t placed_before_failure) {
  model::Reason r;
  r.code = model::ReasonCode::kNoNodeFits;
  const auto& res = ctx.shape.resources;
  std::int64_t free_total = 0;
  std::int64_t largest = 0;
  bool any_static_ok = false;
  // Each node's cause, counted by the (static) strings the causes are: a
  // handful of distinct ones, turned into the reason's keys once.
  std::vector<std::pair<std::string_view, std::int64_t>> tally;
  // A job with an image: the nodes with no container runtime, whatever else
  // rules them out (the tally counts each node by its first cause only).
  std::int64_t without_runtime = 0;
  for (std::size_t n = 0; n < cluster_.size(); ++n) {
    if (ctx.shape.needs_container && !cluster_.Node(n).container_runtime) ++without_runtime;
    std::string_view cause = cluster_.StaticCause(n, ctx.shape);
    if (cause.empty()) {
      any_static_ok = true;
      const std::uint32_t free = cluster_.FreeEligible(n, ctx.shape);
      free_total += free;
      largest = std::max<std::int64_t>(largest, free);
      cause = cluster_.DynamicCause(n, ctx.shape, free);
      if (cause.empty()) cause = model::kCauseTooFewGpus;  // fits alone, not with its gang
    }
    auto it = std::find_if(tally.begin(), tally.end(),
                           [cause](const auto& t) { return t.first.data() == cause.data(); });
    if (it == tally.end()) {
      tally.emplace_back(cause, 1);
    } else {
      ++it->second;
    }
  }
  for (const auto& [cause, count] : tally) r.counts[std::string(cause)] += count;
  Set(r, "nodes", static_cast<std::int64_t>(cluster_.size()));
  Set(r, "gpus_per_replica", res.gpus);
  if (res.gpu_share_millis > 0) Set(r, model::kSliceMgpu, res.gpu_share_millis);
  if (res.gpu_share_bytes > 0) {
    Set(r, model::kSliceBytes, static_cast<std::int64_t>(res.gpu_share_bytes));
  }
  Set(r, "replicas", ctx.shape.replicas);
  if (without_runtime > 0) Set(r, model::kNodesWithoutContainerRuntime, without_runtime);
  if (placed_before_failure > 0) Set(r, model::kCauseGang, placed_before_failure);
  std::int64_t need = std::int64_t{res.gpus} * ctx.shape.replicas;
  // Fragmentation only when GPUs are what is missing, not CPU or memory.
  bool host_short = r.counts.contains(std::string(model::kCauseCpu)) ||
                    r.counts.contains(std::string(model::kCauseMemory));
  if (any_static_ok && need > 0 && free_total >= need && !host_short) {
    r.code = model::ReasonCode::kFragmented;
    Set(r, model::kFreeGpus, free_total);
    Set(r, model::kNeededGpus, need);
    Set(r, model::kLargestFree, largest);
    if (!ctx.shape.topology.one_node) {
      // The same GPUs in smaller replicas.
      for (std::int64_t g = std::min<std::int64_t>(res.gpus - 1, largest); g >= 1; --g) {
        if (need % g != 0) continue;
        JobShape smaller = ctx.shape;
        smaller.resources.gpus = static_cast<std::uint32_t>(g);
        smaller.replicas = static_cast<std::uint32_t>(need / g);
        std::size_t mark = cluster_.Mark();
        bool ok = cluster_.PlaceGang(smaller, nullptr).has_value();
        cluster_.Rollback(mark);
        if (ok) {
          Set(r, model::kWouldFitGpusPerReplica, g);
          break;
        }
      }
    }
    return r;
  }
  AddHints(ctx, r);
  return r;
}

}  // namespace berth::sched
