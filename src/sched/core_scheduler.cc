#include "sched/core_scheduler.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "sched/cycle.h"
#include "sched/running_memo.h"

namespace berth::sched {
namespace {

std::int32_t DefaultValue(model::Priority p) {
  switch (p) {
    case model::Priority::kLow:
      return 0;
    case model::Priority::kNormal:
      return 100;
    case model::Priority::kHigh:
      return 200;
    case model::Priority::kCritical:
      return 300;
  }
  return 100;
}

// Whether `node` is in `pool` (its labels match every selector label).
bool HeadroomPoolHas(const model::Pool& pool, const NodeView& node) {
  return std::all_of(pool.selector.begin(), pool.selector.end(), [&](const auto& kv) {
    auto it = node.labels.find(kv.first);
    return it != node.labels.end() && it->second == kv.second;
  });
}

// Sibling order for a leaf, root first: (below guarantee?, fair share, name).
using OrderKey = std::vector<std::tuple<int, std::int64_t, std::string_view>>;

}  // namespace

std::string_view EvictionCauseName(EvictionCause cause) {
  switch (cause) {
    case EvictionCause::kReclaim:
      return "reclaim";
    case EvictionCause::kPreempt:
      return "preempt";
    case EvictionCause::kMove:
      return "move";
  }
  return "reclaim";
}

std::int32_t PriorityValue(const model::Policy& policy, model::Priority p) {
  const auto* c = policy.FindPriorityClass(model::PriorityName(p));
  return c != nullptr ? c->value : DefaultValue(p);
}

bool EffectivePreemptible(const model::Policy& policy, const model::QueuePolicy* queue,
                          model::Priority p, const std::optional<bool>& requested) {
  if (requested) return *requested;
  const auto* c = policy.FindPriorityClass(model::PriorityName(p));
  if (c != nullptr && !c->preemptible) return false;
  return queue == nullptr || queue->preemptible_by_default;
}

// A running job's queue, as the constructor's pass looks it up: once per
// distinct (tenant, queue).
struct Cycle::RunningQueue {
  std::optional<std::size_t> leaf;
  UsageSum* used = nullptr;
  std::vector<std::size_t>* jobs = nullptr;                // its entry in running_by_leaf_
  std::array<std::int8_t, 4> preemptible{-1, -1, -1, -1};  // by priority, when not asked
};

// What the constructor's pass over the running jobs carries from one job to
// the next.
struct Cycle::RunningPass {
  std::map<std::pair<std::string_view, std::string_view>, RunningQueue> queues;
  std::map<std::optional<std::size_t>, UsageSum> used;  // per leaf, until it enters the book
  std::array<std::optional<std::int32_t>, 4> priority_of{};
  RunningQueue* q = nullptr;  // the last job's queue, and its tenant and name
  std::string_view q_tenant;
  std::string_view q_queue;
  std::vector<std::optional<std::size_t>> at;  // node of each replica of the job
  // The memo, when the caller keeps one and no other cycle holds it; its
  // entries count only on a cluster of the layout they were resolved on.
  RunningMemo* memo = nullptr;
  std::unique_lock<std::mutex> memo_lock;
  bool layout_kept = false;
  std::vector<RunningMemo::Entry> kept;  // the memo for the next cycle
  // The walk along the memo's entries: where it is, and the last job's id.
  std::size_t cursor = 0;
  std::int64_t last_id = 0;
};

Cycle::Cycle(const Snapshot& s, const CoreOptions& options)
    : s_(s), cluster_(s.nodes), book_(s.policy, cluster_, s.decayed_usage) {
  cluster_.SetFgdExactNodes(options.fgd_exact_nodes);
  cluster_.SetDemand(s.demand);
  // One pass over the running jobs. What they count against quota is summed
  // per queue before it enters the book (the same sums as job by job, with
  // no map per job); lookups that depend only on a job's queue and priority
  // are made once per distinct value, not once per job, and consecutive jobs
  // of one queue (the usual case) skip even the lookup of their queue.
  running_queue_.reserve(s.running.size());
  running_priority_.reserve(s.running.size());
  running_preemptible_.reserve(s.running.size());
  running_usage_.resize(s.running.size());
  running_nodes_.resize(s.running.size());
  unlimited_on_ = IdsByNode(cluster_.size());
  unlimited_on_.Reserve(s.running.size());
  RunningPass pass;
  OpenMemo(pass);
  // Each running job's replicas, and their GPU lists, are allocations of
  // their own, scattered over the heap: at 30,000 running jobs, waiting for
  // them to load was most of this pass. They are asked for ahead of use,
  // the replicas kPrefetch jobs ahead and the GPU lists half as far.
  constexpr std::size_t kPrefetch = 16;
  for (std::size_t i = 0; i < s.running.size(); ++i) {
    // (Not with a memo of this layout: most jobs' replicas are then not read.)
    if (!pass.layout_kept && i + kPrefetch < s.running.size()) {
      __builtin_prefetch(s.running[i + kPrefetch].replicas.data());
    }
    if (!pass.layout_kept && i + kPrefetch / 2 < s.running.size()) {
      const auto& ahead = s.running[i + kPrefetch / 2].replicas;
      if (!ahead.empty()) __builtin_prefetch(ahead.front().gpu_indices.data());
    }
    FileRunning(pass, i);
  }
  for (const auto& [leaf, sum] : pass.used) {
    Usage usage;
    sum.Into(usage);
    book_.AddRunning(leaf, usage);
  }
  SaveMemo(pass);
  evicted_.assign(s.running.size(), false);
  for (const auto& pool : s.policy.pools) {
    if (pool.inference_headroom_gpus > 0) headroom_pools_.push_back(&pool);
  }
  if (!headroom_pools_.empty()) {
    in_headroom_pool_.assign(cluster_.size(), 0);
    for (std::size_t n = 0; n < cluster_.size(); ++n) {
      for (const model::Pool* pool : headroom_pools_) {
        if (HeadroomPoolHas(*pool, cluster_.Node(n))) in_headroom_pool_[n] = 1;
      }
    }
  }
}

bool Cycle::RunningInference(std::size_t i) const {
  const RunningJob& r = s_.running[i];
  return !r.service.empty() && running_queue_[i] &&
         book_.queue(*running_queue_[i]).kind == "inference";
}

std::string Cycle::HeadroomPoolOf(std::size_t i) const {
  for (const model::Pool* pool : headroom_pools_) {
    for (std::size_t n : RunningNodes(i)) {
      if (HeadroomPoolHas(*pool, cluster_.Node(n))) return pool->name;
    }
  }
  return {};
}

void Cycle::HeadroomMask(JobCtx& c) const {
  if (headroom_pools_.empty() || c.preemptible || c.inference) return;
  const auto& res = c.shape.resources;
  // What the gang adds to a pool's taken GPUs, at most: a slice may open a
  // fresh GPU.
  const std::int64_t need =
      std::int64_t{res.gpus > 0 ? res.gpus : (model::IsSlice(res) ? 1U : 0U)} * c.shape.replicas;
  if (need == 0) return;
  std::vector<char> mask;
  for (const model::Pool* pool : headroom_pools_) {
    std::int64_t usable = 0;
    std::int64_t taken = 0;
    std::vector<std::size_t> nodes;
    for (std::size_t n = 0; n < cluster_.size(); ++n) {
      if (in_headroom_pool_[n] == 0) continue;
      const NodeView& node = cluster_.Node(n);
      if (!HeadroomPoolHas(*pool, node)) continue;
      nodes.push_back(n);
      if (!node.ready || node.cordoned) continue;
      for (const GpuView& g : node.gpus) {
        if (!g.healthy) continue;
        ++usable;
        if (!g.free || g.shared_millis > 0) ++taken;
      }
    }
    if (usable - pool->inference_headroom_gpus - taken >= need) continue;
    if (mask.empty()) mask.assign(cluster_.size(), 0);
    for (std::size_t n : nodes) mask[n] = 1;
    if (c.headroom_pool.empty()) c.headroom_pool = pool->name;
  }
  if (mask.empty()) return;
  headroom_masks_.push_back(std::move(mask));
  c.shape.headroom_full = &headroom_masks_.back();
}

void Cycle::MarkOccupiedHeadroom() {
  occupied_headroom_.assign(cluster_.size(), 0);
  for (const model::Pool* pool : headroom_pools_) {
    std::int64_t usable = 0;
    std::vector<std::size_t> nodes;
    std::vector<char> in_pool(cluster_.size(), 0);
    for (std::size_t n = 0; n < cluster_.size(); ++n) {
      if (in_headroom_pool_[n] == 0) continue;
      const NodeView& node = cluster_.Node(n);
      if (!HeadroomPoolHas(*pool, node)) continue;
      nodes.push_back(n);
      in_pool[n] = 1;
      if (!node.ready || node.cordoned) continue;
      for (const GpuView& g : node.gpus) usable += g.healthy ? 1 : 0;
    }
    // GPUs the pool's jobs that are not inference replicas hold (a slice
    // counts as its GPU), evictions already planned this cycle left out.
    std::int64_t training = 0;
    for (std::size_t i = 0; i < s_.running.size(); ++i) {
      if (evicted_[i] || RunningInference(i)) continue;
      const RunningJob& r = s_.running[i];
      for (const auto& rp : r.replicas) {
        auto n = NodeIndex(rp.node);
        if (!n || in_pool[*n] == 0) continue;
        training += r.resources.gpus > 0 ? r.resources.gpus
                                         : static_cast<std::int64_t>(rp.gpu_indices.size());
      }
    }
    if (training <= usable - pool->inference_headroom_gpus) continue;
    for (std::size_t n : nodes) occupied_headroom_[n] = 1;
  }
}

bool Cycle::PlaceByHeadroom(const JobCtx& ctx) {
  if (headroom_pools_.empty() || !ctx.inference) return false;
  // Only where jobs that are not inference replicas hold a pool's headroom,
  // and then at once: they took it on preemptible terms, so the reclaim
  // grace that protects lenders' work does not hold the replica back (each
  // victim still gets its own stop grace to checkpoint).
  MarkOccupiedHeadroom();
  if (std::none_of(occupied_headroom_.begin(), occupied_headroom_.end(),
                   [](char c) { return c != 0; })) {
    return false;
  }
  const GraceWait kept_grace = grace_;
  const Relief kept_relief = relief_[0];
  headroom_reclaim_ = true;
  const bool placed = PlaceWithVictims(ctx, EvictionCause::kReclaim);
  headroom_reclaim_ = false;
  if (placed) return true;
  grace_ = kept_grace;
  relief_[0] = kept_relief;
  return false;
}

void Cycle::OpenMemo(RunningPass& pass) {
  if (s_.memo != nullptr) {
    pass.memo_lock = std::unique_lock(s_.memo->mu_, std::try_to_lock);
    if (pass.memo_lock.owns_lock()) pass.memo = s_.memo.get();
  }
  pass.layout_kept =
      pass.memo != nullptr && pass.memo->saved_ && cluster_.HasLayout(pass.memo->layout_);
  if (pass.memo != nullptr) pass.kept.reserve(s_.running.size());
}

void Cycle::FileRunning(RunningPass& pass, std::size_t i) {
  const RunningJob& r = s_.running[i];
  RunningQueue& q = QueueOf(pass, r);
  running_queue_.push_back(q.leaf);
  if (q.jobs != nullptr) q.jobs->push_back(i);
  // A one-replica job the memo holds under the same run key: its node and
  // usage as resolved before, without reading its replicas.
  const bool memoable = pass.memo != nullptr && r.run_key != 0 && r.replicas.size() == 1;
  const RunningMemo::Entry* hit = memoable && pass.layout_kept ? MemoEntry(pass, r) : nullptr;
  if (hit != nullptr) {
    ++pass.memo->hits_;
    if (hit->has_gpus && hit->node != RunningMemo::kNoNode && !EndKnown(r)) {
      unlimited_on_.Add(hit->node, r.id);
    }
    q.used->Add(cluster_, hit->usage);
    pass.kept.push_back(*hit);
  } else {
    ResolveRunning(pass, q, i, memoable);
  }
  running_priority_.push_back(RunningPriority(pass, r));
  running_preemptible_.push_back(RunningPreemptible(q, r));
}

Cycle::RunningQueue& Cycle::QueueOf(RunningPass& pass, const RunningJob& r) {
  if (pass.q == nullptr || r.tenant != pass.q_tenant || r.queue != pass.q_queue) {
    auto [it, fresh] = pass.queues.try_emplace({r.tenant, r.queue});
    pass.q = &it->second;
    pass.q_tenant = r.tenant;
    pass.q_queue = r.queue;
    if (fresh) {
      pass.q->leaf = book_.Find(r.tenant + "/" + r.queue);
      pass.q->used = &pass.used[pass.q->leaf];
      if (pass.q->leaf) pass.q->jobs = &running_by_leaf_[*pass.q->leaf];
    }
  }
  return *pass.q;
}

const RunningMemo::Entry* Cycle::MemoEntry(RunningPass& pass, const RunningJob& r) {
  // Both lists ascend by id (as a kept snapshot's do): one walk along.
  const auto& entries = pass.memo->entries_;
  if (r.id < pass.last_id) pass.cursor = 0;
  pass.last_id = r.id;
  while (pass.cursor < entries.size() && entries[pass.cursor].id < r.id) ++pass.cursor;
  if (pass.cursor < entries.size() && entries[pass.cursor].id == r.id &&
      entries[pass.cursor].run_key == r.run_key) {
    return &entries[pass.cursor];
  }
  return nullptr;
}

void Cycle::ResolveRunning(RunningPass& pass, RunningQueue& q, std::size_t i, bool memoable) {
  const RunningJob& r = s_.running[i];
  // Nodes are looked up for jobs holding GPUs: their usage and ETA
  // blockers need them. A job without GPUs has its nodes found if
  // eviction or consolidation asks (RunningNodes).
  const bool has_gpus = std::any_of(r.replicas.begin(), r.replicas.end(),
                                    [](const auto& rp) { return !rp.gpu_indices.empty(); });
  auto& at = pass.at;
  at.clear();
  if (has_gpus && r.replicas.size() == 1) {
    // One replica, the usual case: its node list (RunningNodes) is that
    // node, built if asked; no list allocated per job every cycle.
    at.push_back(NodeIndex(r.replicas.front().node));
    if (at.front() && !EndKnown(r)) unlimited_on_.Add(*at.front(), r.id);
  } else if (has_gpus) {
    std::vector<std::size_t> nodes;
    for (const auto& rp : r.replicas) {
      at.push_back(NodeIndex(rp.node));
      const auto& n = at.back();
      if (!n || std::find(nodes.begin(), nodes.end(), *n) != nodes.end()) continue;
      nodes.push_back(*n);
      if (!EndKnown(r) && !rp.gpu_indices.empty()) unlimited_on_.Add(*n, r.id);
    }
    running_nodes_[i] = std::move(nodes);
  } else {
    at.resize(r.replicas.size());
  }
  std::optional<UsageFootprint> footprint;
  if (memoable) {
    UsageSum alone;
    alone.Add(cluster_, r.resources, r.replicas, at);
    footprint = alone.Footprint();
  }
  if (footprint) {
    ++pass.memo->misses_;
    q.used->Add(cluster_, *footprint);
    const auto node = at.front() ? static_cast<std::uint32_t>(*at.front()) : RunningMemo::kNoNode;
    pass.kept.push_back({r.id, r.run_key, node, has_gpus, *footprint});
  } else {
    q.used->Add(cluster_, r.resources, r.replicas, at);
  }
}

std::int32_t Cycle::RunningPriority(RunningPass& pass, const RunningJob& r) const {
  const auto p = static_cast<std::size_t>(r.priority);
  if (p < pass.priority_of.size()) {
    if (!pass.priority_of[p]) pass.priority_of[p] = PriorityValue(s_.policy, r.priority);
    return *pass.priority_of[p];
  }
  return PriorityValue(s_.policy, r.priority);
}

bool Cycle::RunningPreemptible(RunningQueue& q, const RunningJob& r) const {
  if (!q.leaf) return false;
  const auto p = static_cast<std::size_t>(r.priority);
  if (r.preemptible || p >= q.preemptible.size()) {
    return EffectivePreemptible(s_.policy, &book_.queue(*q.leaf), r.priority, r.preemptible);
  }
  if (q.preemptible[p] < 0) {
    q.preemptible[p] =
        EffectivePreemptible(s_.policy, &book_.queue(*q.leaf), r.priority, r.preemptible) ? 1 : 0;
  }
  return q.preemptible[p] == 1;
}

void Cycle::SaveMemo(RunningPass& pass) {
  if (pass.memo == nullptr) return;
  auto by_id = [](const RunningMemo::Entry& a, const RunningMemo::Entry& b) { return a.id < b.id; };
  if (!std::is_sorted(pass.kept.begin(), pass.kept.end(), by_id)) {
    std::stable_sort(pass.kept.begin(), pass.kept.end(), by_id);
  }
  pass.memo->entries_ = std::move(pass.kept);
  if (!pass.layout_kept) {
    cluster_.SaveLayout(pass.memo->layout_);
    pass.memo->saved_ = true;
  }
}

const std::vector<std::size_t>& Cycle::RunningNodes(std::size_t i) const {
  auto& nodes = running_nodes_[i];
  if (!nodes) {
    nodes.emplace();
    for (const auto& rp : s_.running[i].replicas) {
      auto n = NodeIndex(rp.node);
      if (!n || std::find(nodes->begin(), nodes->end(), *n) != nodes->end()) continue;
      nodes->push_back(*n);
    }
  }
  return *nodes;
}

const Usage& Cycle::RunningUsage(std::size_t i) {
  if (!running_usage_[i]) {
    running_usage_[i] = UsageOf(cluster_, s_.running[i].resources, s_.running[i].replicas);
  }
  return *running_usage_[i];
}

std::optional<std::size_t> Cycle::NodeIndex(std::string_view name) const {
  return cluster_.Find(name);
}

JobCtx Cycle::Resolve(const PendingJob& job) const {
  JobCtx c;
  c.job = &job;
  c.path = job.tenant + "/" + job.queue;
  c.leaf = book_.Find(c.path);
  const model::QueuePolicy* qp = c.leaf ? &book_.queue(*c.leaf) : nullptr;
  c.priority = PriorityValue(s_.policy, job.priority);
  c.preemptible = EffectivePreemptible(s_.policy, qp, job.priority, job.preemptible);
  c.shape.replicas = job.replicas;
  c.shape.resources = job.resources;
  c.shape.node_selector = job.node_selector;
  c.shape.tolerations = job.tolerations;
  c.shape.topology = job.topology;
  c.shape.needs_container = !job.image.empty();
  // A memory slice's share depends on the card it lands on; until then it
  // counts as its share of the largest card, the least it can be, so the
  // up-front check never refuses what a placement would admit (the check
  // after placement counts the card it got).
  std::int64_t slice = job.resources.gpu_share_millis;
  if (slice == 0 && job.resources.gpu_share_bytes > 0 && cluster_.MaxGpuMemory() > 0) {
    slice = std::max<std::int64_t>(
        1,
        static_cast<std::int64_t>(model::SliceOf(job.resources, cluster_.MaxGpuMemory()).millis));
  }
  c.requested_mgpu = (std::int64_t{job.resources.gpus} * 1000 + slice) * job.replicas;
  if (c.leaf) {
    const auto& allowed = book_.Pools(*c.leaf);
    if (!job.pool.empty()) {
      const model::Pool* p = s_.policy.FindPool(job.pool);
      bool ok = p != nullptr && (allowed.empty() || std::find(allowed.begin(), allowed.end(),
                                                              job.pool) != allowed.end());
      if (ok) {
        c.shape.pools.push_back(p);
      } else {
        c.shape.pool_forbidden = true;
      }
    } else {
      for (const auto& name : allowed) {
        if (const auto* p = s_.policy.FindPool(name)) c.shape.pools.push_back(p);
      }
    }
  }
  c.inference = !job.service.empty() && qp != nullptr && qp->kind == "inference";
  HeadroomMask(c);
  return c;
}

void Cycle::Commit(const JobCtx& ctx, std::vector<ReplicaPlacement> replicas, const Usage& delta,
                   const std::vector<std::size_t>& victims, EvictionCause cause) {
  Placement p{ctx.job->id, std::move(replicas), {}};
  for (std::size_t v : victims) {
    const RunningJob& r = s_.running[v];
    evicted_[v] = true;
    Eviction e;
    e.job_id = r.id;
    e.by_job = ctx.job->id;
    e.by_queue = ctx.path;
    e.cause = cause;
    e.work_lost_ms = WorkLostMs(r);
    e.reason.code = cause == EvictionCause::kReclaim ? model::ReasonCode::kReclaimed
                                                     : model::ReasonCode::kPreempted;
    e.reason.counts[std::string(model::kByJob)] = ctx.job->id;
    e.reason.counts[std::string(model::kWorkLostMs)] = e.work_lost_ms;
    e.reason.detail = ctx.path;
    if (headroom_reclaim_ && cause == EvictionCause::kReclaim) {
      e.reason.code = model::ReasonCode::kHeadroomReclaimed;
      e.reason.detail = ctx.job->service + " " + HeadroomPoolOf(v);
    }
    plan_.evictions.push_back(std::move(e));
    p.after_evicting.push_back(r.id);
    if (!EndKnown(r)) {
      for (std::size_t n : RunningNodes(v)) unlimited_on_.Erase(n, r.id);
    }
  }
  book_.Add(*ctx.leaf, delta);
  if (auto over = book_.OverGuarantee(*ctx.leaf)) {
    p.borrowed = Placement::Borrowed{over->queue, over->used, over->guaranteed};
  }
  const TimeMs end = ExpectedEndOf(*ctx.job);
  Started st{end,
             end != kNever && end != EndOf(*ctx.job),
             plan_.placements.size(),
             ctx.shape.resources,
             ctx.job->id,
             {}};
  for (const auto& rp : p.replicas) {
    auto n = NodeIndex(rp.node);
    if (!n || std::find(st.nodes.begin(), st.nodes.end(), *n) != st.nodes.end()) continue;
    st.nodes.push_back(*n);
    if (end == kNever && !rp.gpu_indices.empty()) unlimited_on_.Add(*n, ctx.job->id);
  }
  started_.push_back(std::move(st));
  plan_.placements.push_back(std::move(p));
}

Usage Cycle::RequestOf(const JobCtx& ctx) {
  Usage estimate;
  const auto& res = ctx.shape.resources;
  if (ctx.requested_mgpu > 0) estimate[kGpusKey] = ctx.requested_mgpu;
  if (res.cpu_millis > 0) {
    estimate[{model::ResourceKind::kCpu, ""}] = std::int64_t{res.cpu_millis} * ctx.shape.replicas;
  }
  if (res.memory_bytes > 0) {
    estimate[{model::ResourceKind::kMemory, ""}] =
        static_cast<std::int64_t>(res.memory_bytes) * ctx.shape.replicas;
  }
  return estimate;
}

bool Cycle::PlaceNow(const JobCtx& ctx, std::optional<QuotaRefusal>& refusal,
                     std::uint32_t& placed_before) {
  // Quota first, on what the job asks for whatever GPUs it gets (GPUs of
  // any model, CPU, RAM), so a job past its limit says so even when the
  // cluster is full; per-model and GPU-memory quota need the placement.
  refusal = book_.Check(*ctx.leaf, RequestOf(ctx), ctx.preemptible);
  if (refusal) return false;
  std::size_t mark = cluster_.Mark();
  HideReserved(EndOf(*ctx.job));
  auto placed = cluster_.PlaceGang(ctx.shape, &placed_before);
  if (placed) {
    UnhideReserved();
    Usage delta = UsageOf(cluster_, ctx.shape.resources, *placed);
    refusal = book_.Check(*ctx.leaf, delta, ctx.preemptible);
    if (!refusal) {
      Commit(ctx, std::move(*placed), delta, {}, EvictionCause::kReclaim);
      return true;
    }
  }
  cluster_.Rollback(mark);
  if (!placed || !refusal || refusal->key.kind != model::ResourceKind::kGpus ||
      refusal->key.gpu_model.empty() || !ctx.shape.resources.gpu_model.empty()) {
    return false;
  }
  // Packing chose a model the queue's `gpus/MODEL` quota refuses; a job
  // that takes any model may still fit another one within quota. Each
  // other model is tried as if the job had asked for it; the first refusal
  // stays the answer if none fits.
  const std::string refused = refusal->key.gpu_model;
  for (const auto& other : cluster_.Models()) {
    if (other == refused) continue;
    JobShape alt = ctx.shape;
    alt.resources.gpu_model = other;
    HideReserved(EndOf(*ctx.job));
    auto again = cluster_.PlaceGang(alt, nullptr);
    if (again) {
      UnhideReserved();
      Usage delta = UsageOf(cluster_, alt.resources, *again);
      if (!book_.Check(*ctx.leaf, delta, ctx.preemptible)) {
        refusal.reset();
        Commit(ctx, std::move(*again), delta, {}, EvictionCause::kReclaim);
        return true;
      }
    }
    cluster_.Rollback(mark);
  }
  return false;
}

Cycle::Outcome Cycle::Decide(const JobCtx& ctx, model::Reason& why) {
  if (!ctx.leaf) {
    why = {model::ReasonCode::kQueueUnknown, {}, ctx.path};
    return Outcome::kRefused;
  }
  if (cluster_.empty()) {
    why = {model::ReasonCode::kNoNodes, {}, {}};
    return Outcome::kWaiting;
  }
  bool feasible = false;
  for (std::size_t n = 0; n < cluster_.size() && !feasible; ++n) {
    // A node kept as inference headroom may take the job later.
    const auto cause = cluster_.StaticCause(n, ctx.shape);
    feasible = cause.empty() || cause == model::kCauseInferenceHeadroom;
  }
  if (!feasible) {  // no node could ever take it: say why, and do not block the queue
    why = ExplainNoFit(ctx, 0);
    return Outcome::kRefused;
  }
  std::optional<QuotaRefusal> refusal;
  std::uint32_t placed_before = 0;
  if (PlaceNow(ctx, refusal, placed_before)) return Outcome::kPlaced;
  // Least disruptive first: take back what this queue lent, then preempt
  // lower-priority work of its own queue.
  relief_[0] = {};
  relief_[1] = {};
  move_relief_ = {};
  grace_ = {};
  // Moving jobs that checkpoint costs them a restart but nobody their place,
  // so it comes before taking GPUs from anyone.
  if (!refusal && PlaceByMoving(ctx)) return Outcome::kPlaced;
  const bool may_reclaim = book_.WithinGuarantee(*ctx.leaf, ctx.requested_mgpu);
  if (!refusal && may_reclaim && PlaceByReclaim(ctx)) return Outcome::kPlaced;
  // An inference replica takes back a pool's inference headroom.
  if (!refusal && PlaceByHeadroom(ctx)) return Outcome::kPlaced;
  if (PlaceWithVictims(ctx, EvictionCause::kPreempt)) return Outcome::kPlaced;
  if (refusal) {
    why = ExplainQuota(*refusal);
    return Outcome::kRefused;
  }
  why = ExplainWaiting(ctx, placed_before);
  if (ctx.shape.headroom_full != nullptr && why.detail.empty()) {
    // Would it run now but for the headroom? Then the reason names the pool.
    JobShape free_shape = ctx.shape;
    free_shape.headroom_full = nullptr;
    const std::size_t mark = cluster_.Mark();
    HideReserved(EndOf(*ctx.job));
    const bool fits = cluster_.PlaceGang(free_shape, nullptr).has_value();
    cluster_.Rollback(mark);
    if (fits) why.detail = "headroom_pool=" + ctx.headroom_pool;
  }
  AddRelief(may_reclaim, why);
  AddGrace(why);
  return Outcome::kWaiting;
}

std::int64_t Cycle::ShortFirstRank(const PendingJob& job) const {
  const std::int64_t bound = s_.policy.short_first_max_wait_ms;
  if (bound <= 0) return 0;  // off: submit order
  // Waited past the bound: back to submit order, ahead of the rest.
  if (s_.now_ms - job.submitted_at_ms > bound) return -1;
  // A declared max runtime wins over a prediction; neither: after every
  // job with one (in submit order among themselves).
  const std::int64_t runtime =
      job.max_runtime_ms > 0 ? job.max_runtime_ms : job.predicted.runtime_ms;
  if (runtime <= 0) return INT64_MAX;
  const std::int64_t per = job.resources.gpus > 0 ? std::int64_t{job.resources.gpus} * 1000
                                                  : std::int64_t{job.resources.gpu_share_millis};
  // GPU time in milli-GPU-seconds: runtime (ms) x mgpu / 1000, kept exact
  // and below overflow (a rank of INT64_MAX - 1 is "very long").
  const std::int64_t seconds = runtime / 1000 + 1;
  const std::int64_t mgpu = std::max<std::int64_t>(1, per * job.replicas);
  if (seconds > (INT64_MAX - 1) / mgpu) return INT64_MAX - 1;
  return seconds * mgpu;
}

std::vector<std::pair<std::size_t, Cycle::Leaf>> Cycle::OpenLeaves() {
  // Leaf queues with their waiting jobs in order: priority, then (with
  // short-first on) shortest predicted GPU time unless starved, submit
  // time, id.
  // A job is resolved in full only when it is decided: most of 100,000 wait
  // behind their queue's head, and need no more than their order and size.
  plan_.pending.reserve(s_.pending.size());
  std::map<std::size_t, std::vector<Queued>> leaves;
  std::string path;
  for (const auto& job : s_.pending) {
    path.assign(job.tenant).append("/").append(job.queue);
    auto leaf = book_.Find(path);
    if (!leaf) {
      model::Reason why{model::ReasonCode::kQueueUnknown, {}, path};
      plan_.pending.push_back({job.id, std::move(why)});
      continue;
    }
    leaves[*leaf].push_back({&job, PriorityValue(s_.policy, job.priority), ShortFirstRank(job)});
  }
  std::vector<std::pair<std::size_t, Leaf>> open;
  for (auto& [leaf, jobs] : leaves) {
    // Short-first needs a prediction to stand on: a queue none of whose
    // waiting jobs has one (no history yet, or every job declares a max
    // runtime) keeps submit order, as before predictions existed.
    if (std::none_of(jobs.begin(), jobs.end(), [](const Queued& q) {
          return q.job->max_runtime_ms <= 0 && q.job->predicted.known();
        })) {
      for (auto& q : jobs) q.rank = 0;
    }
    std::sort(jobs.begin(), jobs.end(), [](const Queued& a, const Queued& b) {
      return std::tuple(-a.priority, a.rank, a.job->submitted_at_ms, a.job->id) <
             std::tuple(-b.priority, b.rank, b.job->submitted_at_ms, b.job->id);
    });
    open.emplace_back(leaf, Leaf{std::move(jobs)});
  }
  return open;
}

void Cycle::AddImage(const PendingJob& job, model::Reason& why) {
  if (why.code != model::ReasonCode::kNoNodeFits || !why.detail.empty() ||
      !why.counts.contains(model::kNodesWithoutContainerRuntime)) {
    return;
  }
  why.detail = std::string(model::kImageDetailPrefix) + job.image;
}

void Cycle::Finish(Leaf& l, const JobCtx& c, model::Reason why) {
  AddImage(*c.job, why);
  why.counts[std::string(model::kPosition)] = l.waiting + 1;
  why.counts[std::string(model::kAheadJobs)] = l.waiting;
  why.counts[std::string(model::kAheadGpus)] = l.waiting_gpus;
  AddQueueNumbers(c, why);
  AddPrediction(*c.job, why);
  ++l.waiting;
  l.waiting_gpus += c.requested_mgpu / 1000;
  plan_.pending.push_back({c.job->id, std::move(why)});
}

void Cycle::DecideHead(std::size_t leaf, Leaf& l) {
  const JobCtx c = Resolve(*l.jobs[l.next++].job);
  model::Reason why;
  Outcome o = Decide(c, why);
  if (o == Outcome::kPlaced) return;
  // Its estimated start: a replay of the releases when it waits for GPUs,
  // a reservation while the cap allows, else why none is known.
  Eta eta;
  // What the job is told: `eta`, or within a grace a predicted start that
  // comes first. The jobs behind it hear the same.
  Eta told;
  bool reserved = false;
  if (o == Outcome::kWaiting) {
    eta = Estimate(c);
    // Within its reclaim grace it starts by the grace's end at the latest,
    // where the reclaim it found would place it: those whole GPUs are held
    // for it meanwhile, so that borrowers ending there free them for it. (A
    // slice is not: the slices beside it on a card are freed by no end a
    // reservation can count on.)
    bool by_grace = false;
    // A predicted estimate is no bound: the grace's end is. But it is the
    // likelier start when it comes first (borrowers expected to end before
    // the grace does): the job is told that one, and the grace's GPUs are
    // held all the same.
    Eta predicted_first;
    if (grace_.waiting &&
        (!eta.known || eta.basis == model::EtaBasis::kPredicted || grace_.at < eta.start_ms)) {
      if (eta.known && eta.start_ms < grace_.at) predicted_first = std::move(eta);
      eta = Eta{true, grace_.at, grace_.replicas};
      eta.basis = model::EtaBasis::kGrace;
      by_grace = true;
    }
    // GPUs are reserved only on ends that berthd enforces (declared max
    // runtimes, a grace's end): a prediction may be wrong by hours, and
    // nothing would stop the job it trusted (docs/scheduling.md).
    reserved = eta.known && eta.basis != model::EtaBasis::kPredicted &&
               s_.policy.backfill.enabled &&
               std::ssize(plan_.reservations) < s_.policy.backfill.max_reservations &&
               !(by_grace && model::IsSlice(c.shape.resources));
    if (reserved) Reserve(c, eta);
    told = predicted_first.known ? std::move(predicted_first) : eta;
    if (!reserved) Expect(c, told);
    AddEta(told, reserved, why);
  } else if (why.code != model::ReasonCode::kQueueUnknown) {
    eta.unknown = why.code == model::ReasonCode::kOverQuota ||
                          why.code == model::ReasonCode::kNotPreemptibleOverGuarantee
                      ? model::EtaUnknown::kQuota
                      : model::EtaUnknown::kInfeasible;
    AddEta(eta, false, why);
  }
  Finish(l, c, std::move(why));
  // The head waits for capacity: jobs behind it wait too, so that smaller
  // ones do not starve it.
  if (o == Outcome::kWaiting && l.next < l.jobs.size()) {
    ExplainBehind(leaf, l, c, told, eta, reserved);
  }
}

void Cycle::ExplainBehind(std::size_t leaf, Leaf& l, const JobCtx& head, const Eta& told,
                          const Eta& eta, bool reserved) {
  // Nothing changes while they are explained: one set of queue numbers, and
  // every reason has the same keys, so the map is built once and copied,
  // with the per-job numbers set in place (cheaper than inserting by new
  // strings at 100,000 jobs).
  const QuotaRefusal numbers = book_.Numbers(leaf, 0);
  model::Reason tmpl{model::ReasonCode::kBehindInQueue, {{"blocked_by", head.job->id}}, {}};
  for (auto key : {model::kPosition, model::kAheadJobs, model::kAheadGpus}) {
    tmpl.counts[std::string(key)] = 0;
  }
  if (told.known) {
    tmpl.counts[std::string(model::kNotBeforeMs)] = told.start_ms;
    tmpl.counts[std::string(model::kNotBeforeInMs)] = told.start_ms - s_.now_ms;
  }
  AddQueueNumbers(Resolve(*l.jobs[l.next].job), tmpl, &numbers);
  // A job's own prediction: in the template when the first job behind has
  // one (jobs of one queue mostly agree), set in place; a job that differs
  // from the template gets the keys added or removed.
  const PendingJob& first_behind = *l.jobs[l.next].job;
  const bool tmpl_predicted = first_behind.max_runtime_ms <= 0 && first_behind.predicted.known();
  if (tmpl_predicted) {
    for (auto key :
         {model::kPredictedRuntimeMs, model::kPredictedBasis, model::kPredictedSamples}) {
      tmpl.counts[std::string(key)] = 0;
    }
  }
  auto at = [&tmpl](std::string_view key) {
    return std::distance(tmpl.counts.begin(), tmpl.counts.find(key));
  };
  auto slot = [](model::Reason& r, std::ptrdiff_t d) {
    return &std::next(r.counts.begin(), d)->second;
  };
  const std::ptrdiff_t pos = at(model::kPosition), jobs = at(model::kAheadJobs),
                       gpus = at(model::kAheadGpus), req = at(model::kQueueRequested);
  const std::ptrdiff_t pred_ms = tmpl_predicted ? at(model::kPredictedRuntimeMs) : 0,
                       pred_basis = tmpl_predicted ? at(model::kPredictedBasis) : 0,
                       pred_samples = tmpl_predicted ? at(model::kPredictedSamples) : 0;
  const std::size_t first_candidate = candidates_.size();
  // What the head could never use, if anything: jobs behind it may run
  // there now (tried with the backfill, once every head has had its turn).
  std::optional<std::size_t> ahead;
  if (const HeadCapacity& cap = CapacityOf(head); cap.any) {
    ahead = heads_.size();
    heads_.push_back(head);
    head_capacity_of_.push_back(&cap);
  }
  while (l.next < l.jobs.size()) {
    const PendingJob& behind = *l.jobs[l.next++].job;
    if (behind.resources.gpus > cluster_.MaxHealthyGpus()) {
      // It could never run, whatever the head does: its own reason says so
      // instead of "behind", and it holds no place in line.
      model::Reason own;
      Decide(Resolve(behind), own);
      AddImage(behind, own);
      own.counts[std::string(model::kEtaUnknown)] =
          static_cast<std::int64_t>(model::EtaUnknown::kInfeasible);
      plan_.pending.push_back({behind.id, std::move(own)});
      continue;
    }
    const std::int64_t gang_gpus = std::int64_t{behind.resources.gpus} * behind.replicas;
    model::Reason b = tmpl;
    *slot(b, pos) = l.waiting + 1;
    *slot(b, jobs) = l.waiting;
    *slot(b, gpus) = l.waiting_gpus;
    *slot(b, req) = gang_gpus * 1000;  // as JobCtx::requested_mgpu
    ++l.waiting;
    l.waiting_gpus += gang_gpus;
    const bool predicted = behind.max_runtime_ms <= 0 && behind.predicted.known();
    if (predicted && tmpl_predicted) {
      *slot(b, pred_ms) = behind.predicted.runtime_ms;
      *slot(b, pred_basis) = static_cast<std::int64_t>(behind.predicted.basis);
      *slot(b, pred_samples) = behind.predicted.samples;
    } else if (predicted) {
      AddPrediction(behind, b);
    } else if (tmpl_predicted) {
      for (auto key :
           {model::kPredictedRuntimeMs, model::kPredictedBasis, model::kPredictedSamples}) {
        b.counts.erase(b.counts.find(key));
      }
    }
    // Backfill: it may run before its head on what the head could use only
    // if it surely ends before the head's reserved start; on what the head
    // could never use, it may run in any case. Tried once every head has
    // had its turn.
    if (reserved && EndOf(behind) <= eta.start_ms) {
      candidates_.push_back({&behind, plan_.pending.size(), 0, true, 0});
    } else if (ahead) {
      candidates_.push_back({&behind, plan_.pending.size(), 0, false, *ahead});
    }
    plan_.pending.push_back({behind.id, std::move(b)});
  }
  for (std::size_t k = first_candidate; k < candidates_.size(); ++k) {
    candidates_[k].block_end = plan_.pending.size();
  }
}

void Cycle::KeepReclaimSince() {
  // A job that once needed a reclaim keeps that time until it starts,
  // whatever holds it back now: a later need does not start a new grace.
  std::vector<std::pair<std::int64_t, TimeMs>> since;
  for (const auto& job : s_.pending) {
    if (job.reclaim_since_ms > 0) since.emplace_back(job.id, job.reclaim_since_ms);
  }
  if (since.empty()) return;
  std::sort(since.begin(), since.end());
  auto it = since.begin();
  const std::string key(model::kReclaimSinceMs);
  for (auto& d : plan_.pending) {
    while (it != since.end() && it->first < d.job_id) ++it;
    if (it == since.end()) break;
    if (it->first == d.job_id) d.reason.counts.try_emplace(key, it->second);
  }
}

void Cycle::SortPendingById() {
  // Sorting (id, position) pairs and moving each decision once is cheaper
  // than swapping 100,000 reasons about in the sort.
  std::vector<std::pair<std::int64_t, std::size_t>> order;
  order.reserve(plan_.pending.size());
  for (std::size_t k = 0; k < plan_.pending.size(); ++k) {
    if (k < dropped_.size() && dropped_[k]) continue;  // backfilled
    order.emplace_back(plan_.pending[k].job_id, k);
  }
  std::sort(order.begin(), order.end());
  std::vector<PendingDecision> sorted;
  sorted.reserve(order.size());
  for (auto [id, k] : order) sorted.push_back(std::move(plan_.pending[k]));
  plan_.pending = std::move(sorted);
}

Plan Cycle::Run() {
  std::vector<std::pair<std::size_t, Leaf>> open = OpenLeaves();
  auto order_key = [&](std::size_t leaf) {
    OrderKey key;
    auto chain = book_.Chain(leaf);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      auto [below, share] = book_.FairKey(*it);
      key.emplace_back(below, share, book_.queue(*it).path);
    }
    return key;
  };
  // The leaf whose path through the queue tree is least served goes next.
  // Keys change only for leaves under a queue whose usage changed.
  std::map<std::size_t, std::vector<std::size_t>> under;  // queue -> open leaves below it
  for (std::size_t i = 0; i < open.size(); ++i) {
    for (std::size_t a : book_.Chain(open[i].first)) under[a].push_back(i);
  }
  std::vector<OrderKey> keys(open.size());
  // Open leaves by (key, index); the set holds indices only, so a key is
  // not copied per insert. keys[i] changes only while i is out of the set.
  auto by_key = [&keys](std::size_t a, std::size_t b) {
    return std::tie(keys[a], a) < std::tie(keys[b], b);
  };
  std::set<std::size_t, decltype(by_key)> ready(by_key);
  book_.TakeChanged();
  for (std::size_t i = 0; i < open.size(); ++i) {
    keys[i] = order_key(open[i].first);
    ready.insert(i);
  }
  while (!ready.empty()) {
    std::size_t i = *ready.begin();
    ready.erase(ready.begin());
    Leaf& l = open[i].second;
    DecideHead(open[i].first, l);
    std::set<std::size_t> dirty;
    for (std::size_t q : book_.TakeChanged()) {
      for (std::size_t leaf : under[q]) dirty.insert(leaf);
    }
    for (std::size_t d : dirty) {
      if (d == i) continue;
      if (ready.erase(d) == 0) continue;  // finished
      keys[d] = order_key(open[d].first);
      ready.insert(d);
    }
    if (l.next < l.jobs.size()) {
      keys[i] = order_key(open[i].first);
      ready.insert(i);
    }
  }
  Backfill();
  SortPendingById();  // the plan's decisions by job id
  KeepReclaimSince();
  return std::move(plan_);
}

Plan CoreScheduler::Schedule(const Snapshot& snapshot) const {
  // Evictions only ever make room for a waiting job: with none waiting the
  // plan is empty, and building the cycle's cluster and quota book from
  // every node and running job would only be thrown away.
  if (snapshot.pending.empty()) return {};
  return Cycle(snapshot, options_).Run();
}

}  // namespace berth::sched
