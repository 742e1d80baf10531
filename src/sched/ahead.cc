// Running ahead of a blocked head. A queue's head that waits for capacity
// holds the jobs behind it back (BehindInQueue) so that small jobs cannot
// starve it; but nodes and GPUs the head could never use (another GPU model,
// too little GPU memory, a pool, selector or taint that rules the node out,
// too few GPUs on the node, whole cards for a head that asks for a slice;
// never health, which may come back)
// are no capacity it waits for. A job behind it may run there now: it takes
// nothing the head's placement, estimate or reservation could ever count on,
// its quota is checked so that the head's own room in its queue's quota is
// kept, and on a node the head could use it never takes CPU or memory the
// head asks for. Jobs that would take anything the head could use keep the
// backfill rule (backfill.cc).
#include <algorithm>

#include "sched/cycle.h"

namespace berth::sched {
namespace {

// Whether a replica of `head` could ever use GPU `g` (health aside: an
// unhealthy GPU is used by nobody).
bool HeadCouldUse(const GpuView& g, const model::Resources& head) {
  if (!head.gpu_model.empty() && g.model != head.gpu_model) return false;
  if (g.memory_bytes < head.gpu_memory_bytes) return false;
  if (model::IsSlice(head)) {
    return g.sharing && model::SliceOf(head, g.memory_bytes).bytes <= g.memory_bytes;
  }
  return head.gpus > 0;
}

// Why the head could never use GPU `g` (a node cause of model::Reason).
std::string_view GpuCause(const GpuView& g, const model::Resources& head) {
  if (!head.gpu_model.empty() && g.model != head.gpu_model) return model::kCauseGpuModel;
  if (g.memory_bytes < head.gpu_memory_bytes) return model::kCauseGpuMemory;
  if (model::IsSlice(head) && !g.sharing) return model::kCauseNotSharing;
  return model::kCauseGpuMemory;  // a slice larger than the card
}

}  // namespace

const Cycle::HeadCapacity& Cycle::CapacityOf(const JobCtx& head) {
  std::string key = ExplainKey(head, 0);
  if (auto it = head_capacity_.find(key); it != head_capacity_.end()) return it->second;
  const std::vector<char>& usable = UsableNodes(head);
  HeadCapacity cap;
  cap.strict.assign(cluster_.size(), 0);
  const auto& r = head.shape.resources;
  // Which GPUs a head could use varies within a node only when it names a
  // model or a memory minimum, or asks for a slice; a head that asks for no
  // GPUs is given no GPUs of its nodes to share (CPU and memory are what it
  // waits for there).
  const bool per_gpu =
      model::IsSlice(r) || (r.gpus > 0 && ((!r.gpu_model.empty() && cluster_.Models().size() > 1) ||
                                           r.gpu_memory_bytes > 0));
  for (std::size_t n = 0; n < cluster_.size(); ++n) {
    const NodeView& node = cluster_.Node(n);
    // Health comes and goes, and so does what a topology constraint finds
    // among healthy GPUs: a node ruled out only by them may serve the head
    // later, so it is not the head's to give away.
    if (usable[n] == 0) {
      const std::string_view why = cluster_.StaticCause(n, head.shape);
      if (why == model::kCauseUnhealthy || why == model::kCauseTopology) continue;
      cap.strict[n] = 1;
      if (node.ready && !node.cordoned) cap.any = true;
      continue;
    }
    if (per_gpu && std::any_of(node.gpus.begin(), node.gpus.end(), [&](const GpuView& g) {
          return g.healthy && !HeadCouldUse(g, r);
        })) {
      cap.both.push_back(n);
      cap.any = true;
    }
  }
  cap.shared = cap.strict;
  for (std::size_t n : cap.both) cap.shared[n] = 1;
  return head_capacity_.emplace(std::move(key), std::move(cap)).first->second;
}

bool Cycle::PlaceAhead(const JobCtx& ctx, const JobCtx& head, const HeadCapacity& cap) {
  const std::size_t leaf = *ctx.leaf;
  if (book_.Check(leaf, RequestOf(ctx), ctx.preemptible)) return false;
  // On a node the head could use, the job may take only GPUs the head could
  // never use, and no CPU or memory of a kind the head asks for.
  const auto& hr = head.shape.resources;
  const auto& jr = ctx.shape.resources;
  const bool host_conflict =
      (hr.cpu_millis > 0 && jr.cpu_millis > 0) || (hr.memory_bytes > 0 && jr.memory_bytes > 0);
  JobShape shape = ctx.shape;
  shape.only_nodes = host_conflict ? &cap.strict : &cap.shared;
  const std::size_t mark = cluster_.Mark();
  HideReserved(EndOf(*ctx.job));
  // The head's GPUs on nodes it shares with the job are taken for the try:
  // free ones marked in use, sharing ones holding slices filled.
  std::vector<GpuKey> taken;
  std::vector<std::pair<GpuKey, std::uint32_t>> filled;
  if (!host_conflict) {
    for (std::size_t n : cap.both) {
      const auto& gpus = cluster_.Node(n).gpus;
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        const GpuView& g = gpus[i];
        if (!HeadCouldUse(g, hr)) continue;
        if (g.free) {
          taken.emplace_back(n, i);
        } else if (g.sharing && g.shared_millis > 0 && g.shared_millis < 1000) {
          filled.emplace_back(GpuKey{n, i}, g.shared_millis);
        }
      }
    }
    for (const auto& [n, i] : taken) cluster_.SetGpuFree(n, i, false);
    for (const auto& [gpu, millis] : filled)
      cluster_.SetGpuSharedMillis(gpu.first, gpu.second, 1000);
  }
  auto placed = cluster_.PlaceGang(shape, nullptr);
  if (!placed) {
    hidden_.clear();
    hidden_shared_.clear();
    cluster_.Rollback(mark);
    return false;
  }
  UnhideReserved();
  for (const auto& [n, i] : taken) cluster_.SetGpuFree(n, i, true);
  for (const auto& [gpu, millis] : filled) {
    cluster_.SetGpuSharedMillis(gpu.first, gpu.second, millis);
  }
  Usage delta = UsageOf(cluster_, jr, *placed);
  // Its quota admits it, and still admits the head as it did: the head's
  // room in its queue is not what the job takes, nor is its right to
  // reclaim (a queue within its guarantee).
  bool ok = !book_.Check(leaf, delta, ctx.preemptible);
  if (ok) {
    Usage head_ask = RequestOf(head);
    if (!hr.gpu_model.empty() && head.requested_mgpu > 0) {
      head_ask[{model::ResourceKind::kGpus, hr.gpu_model}] = head.requested_mgpu;
    }
    Usage both = delta;
    for (const auto& [k, v] : head_ask) both[k] += v;
    ok = book_.Check(*head.leaf, head_ask, head.preemptible) ||
         !book_.Check(leaf, both, head.preemptible);
    if (ok && book_.WithinGuarantee(*head.leaf, head.requested_mgpu)) {
      ok = book_.WithinGuarantee(leaf, head.requested_mgpu + ctx.requested_mgpu);
    }
  }
  if (!ok) {
    cluster_.Rollback(mark);
    return false;
  }
  Placement::AheadOf why{head.job->id, {}};
  std::vector<std::size_t> seen;
  for (const auto& rp : *placed) {
    auto n = NodeIndex(rp.node);
    if (!n || std::find(seen.begin(), seen.end(), *n) != seen.end()) continue;
    seen.push_back(*n);
    std::string_view cause;
    if (cap.strict[*n] != 0) {
      cause = cluster_.StaticCause(*n, head.shape);
    } else if (const GpuView* g =
                   rp.gpu_indices.empty() ? nullptr : cluster_.Gpu(*n, rp.gpu_indices.front())) {
      cause = GpuCause(*g, hr);
    }
    if (!cause.empty()) ++why.causes[std::string(cause)];
  }
  Commit(ctx, std::move(*placed), delta, {}, EvictionCause::kReclaim);
  plan_.placements.back().ahead_of = std::move(why);
  return true;
}

}  // namespace berth::sched
