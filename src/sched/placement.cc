#include "sched/placement.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>

namespace berth::sched {
namespace {

bool Tolerates(const std::vector<model::Toleration>& tolerations, const model::Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(), [&](const model::Toleration& t) {
    return t.key == taint.key && (t.value.empty() || t.value == taint.value) &&
           (t.effect.empty() || t.effect == taint.effect);
  });
}

bool Matches(const std::map<std::string, std::string>& labels,
             const std::map<std::string, std::string>& selector) {
  return std::all_of(selector.begin(), selector.end(), [&](const auto& kv) {
    auto it = labels.find(kv.first);
    return it != labels.end() && it->second == kv.second;
  });
}

}  // namespace

namespace {

bool ByName(const NodeView& a, const NodeView& b) {
  return a.name < b.name;
}
bool ByIndex(const GpuView& a, const GpuView& b) {
  return a.index < b.index;
}

// The share (milli-GPUs) a new slice may take of GPU `g` (see SliceFits):
// a healthy sharing GPU, free or holding slices, less what its slices hold.
std::uint32_t NewSliceRoom(const GpuView& g) {
  if (!g.sharing || !g.healthy || (!g.free && g.shared_millis == 0) || g.shared_millis >= 1000) {
    return 0;
  }
  return 1000 - g.shared_millis;
}

}  // namespace

// Snapshots come sorted (by name, GPUs by index): checking is part of the
// pass that indexes them; sorting 10,000 names again every cycle is not, and
// nor is copying them.
Cluster::Cluster(const std::vector<NodeView>& nodes) : base_(&nodes) {
  if (!Index()) {
    owned_ = nodes;
    Sort();
    Index();
  }
}

Cluster::Cluster(std::vector<NodeView>&& nodes) : owned_(std::move(nodes)), base_(&owned_) {
  if (!Index()) {
    Sort();
    Index();
  }
}

void Cluster::Sort() {
  if (!std::is_sorted(owned_.begin(), owned_.end(), ByName)) {
    std::sort(owned_.begin(), owned_.end(), ByName);
  }
  for (auto& n : owned_) {
    if (!std::is_sorted(n.gpus.begin(), n.gpus.end(), ByIndex)) {
      std::sort(n.gpus.begin(), n.gpus.end(), ByIndex);
    }
  }
  base_ = &owned_;
}

NodeView& Cluster::Mutable(std::size_t n) {
  if (own_[n] == 0) {
    copies_.push_back((*base_)[n]);
    own_[n] = static_cast<std::uint32_t>(copies_.size());
  }
  return copies_[own_[n] - 1];
}

bool Cluster::Index() {
  const std::vector<NodeView>& nodes = *base_;
  // An open-addressed table of node positions, at most half full: one
  // allocation, where a hash map allocated (and freed) a node per name.
  std::size_t slots = 2;
  while (slots < 2 * nodes.size()) slots *= 2;
  index_.assign(slots, Slot{});
  // One pass over every GPU: the sorted model list is known only at its
  // end, so GPUs get model ids in the order models are first seen, which
  // are renumbered after it. Neighbouring GPUs are mostly of one model: one
  // name comparison per GPU, and a search of the models seen so far per
  // change of model (80,000 GPUs a cycle at 10,000 nodes).
  std::vector<const std::string*> seen;  // by first-seen id
  const std::string* last = nullptr;
  std::size_t last_id = 0;
  std::size_t most = 0;
  max_gpu_memory_ = 0;
  max_healthy_ = 0;
  own_.assign(nodes.size(), 0);
  free_.assign(1, std::vector<std::uint32_t>(nodes.size(), 0));
  model_of_.clear();
  index_of_.clear();
  memory_of_.clear();
  first_gpu_.clear();
  first_gpu_.reserve(nodes.size() + 1);
  has_sharing_.assign(nodes.size(), false);
  healthy_.assign(nodes.size(), 0);
  bool sharing_seen = false;
  bool sharing_uniform = true;
  sharing_memory_ = 0;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const NodeView& node = nodes[n];
    if (n > 0 && ByName(node, nodes[n - 1])) return false;
    const std::size_t hash = std::hash<std::string_view>{}(node.name);
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    std::size_t at = hash & (slots - 1);
    // The first of equal names keeps the slot.
    while (index_[at].node != 0 &&
           (index_[at].tag != tag || nodes[index_[at].node - 1].name != node.name)) {
      at = (at + 1) & (slots - 1);
    }
    if (index_[at].node == 0) index_[at] = {static_cast<std::uint32_t>(n + 1), tag};
    first_gpu_.push_back(model_of_.size());
    std::uint32_t healthy = 0;
    for (std::size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuView& g = node.gpus[i];
      if (i > 0 && ByIndex(g, node.gpus[i - 1])) return false;
      if (last == nullptr || *last != g.model) {
        auto it = std::find_if(seen.begin(), seen.end(),
                               [&](const std::string* m) { return *m == g.model; });
        if (it == seen.end()) {
          it = seen.insert(seen.end(), &g.model);
          free_.emplace_back(nodes.size(), 0);
        }
        last_id = static_cast<std::size_t>(it - seen.begin());
        last = &g.model;
      }
      model_of_.push_back(last_id);
      index_of_.push_back(g.index);
      memory_of_.push_back(g.memory_bytes);
      if (g.healthy) {
        ++healthy;
        if (g.free) {
          ++free_[0][n];
          ++free_[last_id + 1][n];
        }
      }
      if (g.sharing) {
        has_sharing_[n] = true;
        if (sharing_seen && g.memory_bytes != sharing_memory_) sharing_uniform = false;
        sharing_seen = true;
        sharing_memory_ = g.memory_bytes;
      }
      max_gpu_memory_ = std::max(max_gpu_memory_, g.memory_bytes);
    }
    healthy_[n] = healthy;
    if (node.ready && !node.cordoned) max_healthy_ = std::max(max_healthy_, healthy);
    most = std::max(most, node.gpus.size());
  }
  first_gpu_.push_back(model_of_.size());
  if (!sharing_uniform) sharing_memory_ = 0;
  slice_room_.assign(nodes.size(), 0);
  partial_ = NodeSet(nodes.size());
  pristine_ = NodeSet(nodes.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) RefreshSliceRoom(n);
  // Renumber the models by name: sorted_id[first-seen id].
  std::vector<std::size_t> order(seen.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return *seen[a] < *seen[b]; });
  std::vector<std::size_t> sorted_id(seen.size());
  models_.clear();
  for (std::size_t k = 0; k < order.size(); ++k) {
    sorted_id[order[k]] = k;
    models_.push_back(*seen[order[k]]);
  }
  if (!std::is_sorted(order.begin(), order.end())) {  // seen out of name order
    std::vector<std::vector<std::uint32_t>> free{free_[0]};
    for (std::size_t id : order) free.push_back(free_[id + 1]);
    free_ = free;
  }
  for (auto& m : model_of_) m = sorted_id[m];
  by_free_.assign(free_.size(), std::vector<NodeSet>(most + 1, NodeSet(nodes.size())));
  for (std::size_t c = 0; c < free_.size(); ++c) {
    for (std::size_t n = 0; n < nodes.size(); ++n) by_free_[c][free_[c][n]].insert(n);
  }
  return true;
}

void Cluster::SetFree(std::size_t n, std::size_t i, bool free) {
  GpuView& g = Mutable(n).gpus[i];
  if (g.healthy && g.free != free) {
    for (std::size_t c : {std::size_t{0}, model_of_[first_gpu_[n] + i] + 1}) {
      by_free_[c][free_[c][n]].erase(n);
      if (free) {
        ++free_[c][n];
      } else {
        --free_[c][n];
      }
      by_free_[c][free_[c][n]].insert(n);
    }
  }
  g.free = free;
  RefreshSliceRoom(n);
}

void Cluster::RefreshSliceRoom(std::size_t n) {
  if (!has_sharing_[n]) return;
  std::uint32_t most = 0;
  bool partial = false;
  for (const GpuView& g : Node(n).gpus) {
    const std::uint32_t room = NewSliceRoom(g);
    if (room == 0) continue;
    most = std::max(most, room);
    partial = partial || g.shared_millis > 0 || g.shared_bytes > 0;
  }
  slice_room_[n] = most;
  if (partial) {
    partial_.insert(n);
  } else {
    partial_.erase(n);
  }
  if (most > 0 && !partial) {
    pristine_.insert(n);
  } else {
    pristine_.erase(n);
  }
}

std::uint64_t Cluster::FreeGpus() const {
  std::uint64_t total = 0;
  for (std::size_t k = 1; k < by_free_[0].size(); ++k) total += k * by_free_[0][k].size();
  return total;
}

void Cluster::ForNodesBelow(const model::Resources& r, std::uint32_t below,
                            const std::function<bool(std::size_t, std::uint32_t)>& fn) const {
  if (below == 0) return;
  if (auto c = ClassOf(r)) {
    const auto& buckets = by_free_[*c];
    for (std::size_t f = std::min<std::size_t>(below, buckets.size()); f-- > 0;) {
      for (std::size_t n : buckets[f]) {
        if (!fn(n, static_cast<std::uint32_t>(f))) return;
      }
    }
    return;
  }
  // A memory minimum: counts are not kept per class; count each node.
  JobShape shape;
  shape.resources = r;
  std::vector<std::pair<std::uint32_t, std::size_t>> order;
  for (std::size_t n = 0; n < size(); ++n) {
    std::uint32_t free = FreeEligible(n, shape);
    if (free < below) order.emplace_back(free, n);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (auto [free, n] : order) {
    if (!fn(n, free)) return;
  }
}

std::optional<std::size_t> Cluster::ClassOf(const model::Resources& r) const {
  if (r.gpu_memory_bytes != 0 || model::IsSlice(r)) return std::nullopt;
  if (r.gpu_model.empty()) return 0;
  auto it = std::lower_bound(models_.begin(), models_.end(), r.gpu_model);
  if (it == models_.end() || *it != r.gpu_model) return std::nullopt;
  return static_cast<std::size_t>(it - models_.begin()) + 1;
}

std::optional<std::size_t> Cluster::Find(std::string_view name) const {
  const std::size_t mask = index_.size() - 1;
  const std::size_t hash = std::hash<std::string_view>{}(name);
  const auto tag = static_cast<std::uint32_t>(hash >> 32);
  for (std::size_t at = hash & mask; index_[at].node != 0; at = (at + 1) & mask) {
    const std::size_t n = index_[at].node - 1;
    if (index_[at].tag == tag && (*base_)[n].name == name) return n;
  }
  return std::nullopt;
}

const GpuView* Cluster::Gpu(std::size_t n, std::uint32_t index) const {
  const std::optional<std::size_t> slot = GpuSlot(n, index);
  return slot ? &Node(n).gpus[*slot - first_gpu_[n]] : nullptr;
}

bool Cluster::HasLayout(const ClusterLayout& layout) const {
  if (layout.names.size() != size() || layout.first_gpu != first_gpu_ ||
      layout.gpu_index != index_of_ || layout.gpu_memory != memory_of_ ||
      layout.gpu_model != model_of_ || layout.models != models_) {
    return false;
  }
  for (std::size_t n = 0; n < size(); ++n) {
    if (layout.names[n] != (*base_)[n].name) return false;
  }
  return true;
}

void Cluster::SaveLayout(ClusterLayout& layout) const {
  layout.names.clear();
  layout.names.reserve(size());
  for (std::size_t n = 0; n < size(); ++n) layout.names.push_back((*base_)[n].name);
  layout.first_gpu = first_gpu_;
  layout.gpu_index = index_of_;
  layout.gpu_memory = memory_of_;
  layout.gpu_model = model_of_;
  layout.models = models_;
}

std::optional<std::size_t> Cluster::GpuSlot(std::size_t n, std::uint32_t index) const {
  // GPUs are sorted by index and mostly numbered from 0: the GPU at that
  // position, when no earlier one can share its index, is the first match
  // without a scan; else a scan of the node's.
  const std::size_t first = first_gpu_[n];
  const std::size_t count = first_gpu_[n + 1] - first;
  if (index < count && index_of_[first + index] == index &&
      (index == 0 || index_of_[first + index - 1] < index)) {
    return first + index;
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (index_of_[first + i] == index) return first + i;
  }
  return std::nullopt;
}

bool Cluster::Eligible(const GpuView& g, const model::Resources& r) const {
  return (r.gpu_model.empty() || g.model == r.gpu_model) && g.memory_bytes >= r.gpu_memory_bytes;
}

bool Cluster::SliceFits(const GpuView& g, const model::Resources& r) const {
  if (!g.sharing || !g.healthy || !Eligible(g, r) || (!g.free && g.shared_millis == 0)) {
    return false;
  }
  model::GpuSlice s = model::SliceOf(r, g.memory_bytes);
  return g.shared_millis + s.millis <= 1000 && s.bytes <= g.memory_bytes - g.shared_bytes;
}

std::optional<std::size_t> Cluster::ChooseSlice(
    std::size_t n, const model::Resources& r, std::pair<std::uint64_t, std::uint64_t>* key) const {
  const NodeView& node = Node(n);
  std::optional<std::size_t> best;
  std::pair<std::uint64_t, std::uint64_t> best_key{};
  for (std::size_t i = 0; i < node.gpus.size(); ++i) {
    const GpuView& g = node.gpus[i];
    if (!SliceFits(g, r)) continue;
    // Shared GPUs first, tightest fit (share left, then memory left); a
    // fresh GPU ranks after every shared one.
    model::GpuSlice s = model::SliceOf(r, g.memory_bytes);
    std::pair<std::uint64_t, std::uint64_t> k{
        g.shared_millis > 0 ? 1000 - g.shared_millis - s.millis : 1001,
        g.memory_bytes - g.shared_bytes - s.bytes};
    if (!best || k < best_key) {
      best = i;
      best_key = k;
    }
  }
  if (best && key != nullptr) *key = best_key;
  return best;
}

std::string_view Cluster::StaticSliceCause(std::size_t n, const model::Resources& r) const {
  bool model_match = false;
  bool sharing = false;
  bool fits = false;
  for (const auto& g : Node(n).gpus) {
    if (!r.gpu_model.empty() && g.model != r.gpu_model) continue;
    model_match = true;
    if (!g.sharing) continue;
    sharing = true;
    model::GpuSlice s = model::SliceOf(r, g.memory_bytes);
    if (g.memory_bytes < r.gpu_memory_bytes || s.bytes > g.memory_bytes) continue;
    fits = true;
    if (g.healthy) return {};
  }
  if (!model_match) return model::kCauseGpuModel;
  if (!sharing) return model::kCauseNotSharing;
  if (!fits) return model::kCauseGpuMemory;
  return model::kCauseUnhealthy;
}

std::string_view Cluster::StaticCause(std::size_t n, const JobShape& job) const {
  const NodeView& node = Node(n);
  if (!node.ready) return model::kCauseNotReady;
  if (node.cordoned) return model::kCauseCordoned;
  if (job.pool_forbidden) return model::kCausePool;
  if (job.only_nodes != nullptr && (*job.only_nodes)[n] == 0) return kCauseHeadCapacity;
  if (job.headroom_full != nullptr && (*job.headroom_full)[n] != 0) {
    return model::kCauseInferenceHeadroom;
  }
  if (!job.pools.empty() &&
      std::none_of(job.pools.begin(), job.pools.end(),
                   [&](const model::Pool* p) { return Matches(node.labels, p->selector); })) {
    return model::kCausePool;
  }
  if (!Matches(node.labels, job.node_selector)) return model::kCauseSelector;
  for (const auto& t : node.taints) {
    if (t.effect == "NoSchedule" && !Tolerates(job.tolerations, t)) return model::kCauseTaint;
  }
  if (job.needs_container && !node.container_runtime) return model::kCauseNoContainerRuntime;
  return StaticDeviceCause(n, job, job.resources);
}

std::string_view Cluster::StaticDeviceCause(std::size_t n, const JobShape& job,
                                            const model::Resources& r) const {
  const NodeView& node = Node(n);
  if (model::IsSlice(r)) return StaticSliceCause(n, r);
  if (r.gpus > 0) {
    std::uint32_t model_match = 0;
    std::uint32_t memory_match = 0;
    std::uint32_t healthy = 0;
    if (r.gpu_model.empty() && r.gpu_memory_bytes == 0) {  // the common case, without a scan
      model_match = memory_match = static_cast<std::uint32_t>(node.gpus.size());
      healthy = healthy_[n];
    } else {
      for (const auto& g : node.gpus) {
        if (!r.gpu_model.empty() && g.model != r.gpu_model) continue;
        ++model_match;
        if (g.memory_bytes < r.gpu_memory_bytes) continue;
        ++memory_match;
        if (g.healthy) ++healthy;
      }
    }
    if (model_match == 0) return model::kCauseGpuModel;
    if (memory_match == 0) return model::kCauseGpuMemory;
    if (healthy < r.gpus) {
      return memory_match >= r.gpus ? model::kCauseUnhealthy : model::kCauseTooFewGpusInTotal;
    }
    std::uint64_t need = r.gpus;
    if (job.topology.one_node) need *= job.replicas;
    if (healthy < need) return model::kCauseTopology;
    if (job.topology.nvlink_island == model::NvlinkIsland::kRequire) {
      std::map<std::uint32_t, std::uint32_t> islands;  // healthy usable GPUs per island
      for (const auto& g : node.gpus) {
        if (g.healthy && Eligible(g, r)) ++islands[g.nvlink_island];
      }
      std::uint64_t fits = 0;  // replicas that fit inside islands
      for (auto [id, count] : islands) fits += count / r.gpus;
      if (fits == 0 || (job.topology.one_node && fits < job.replicas)) {
        return model::kCauseTopology;
      }
    }
  }
  return {};
}

void Cluster::StaticCauses(std::size_t n, const JobShape& job,
                           std::vector<std::string_view>& out) const {
  out.clear();
  const NodeView& node = Node(n);
  if (!node.ready) out.push_back(model::kCauseNotReady);
  if (node.cordoned) out.push_back(model::kCauseCordoned);
  if (job.pool_forbidden ||
      (!job.pools.empty() &&
       std::none_of(job.pools.begin(), job.pools.end(),
                    [&](const model::Pool* p) { return Matches(node.labels, p->selector); }))) {
    out.push_back(model::kCausePool);
  }
  if (job.only_nodes != nullptr && (*job.only_nodes)[n] == 0) out.push_back(kCauseHeadCapacity);
  if (job.headroom_full != nullptr && (*job.headroom_full)[n] != 0) {
    out.push_back(model::kCauseInferenceHeadroom);
  }
  if (!Matches(node.labels, job.node_selector)) out.push_back(model::kCauseSelector);
  if (std::any_of(node.taints.begin(), node.taints.end(), [&](const model::Taint& t) {
        return t.effect == "NoSchedule" && !Tolerates(job.tolerations, t);
      })) {
    out.push_back(model::kCauseTaint);
  }
  if (job.needs_container && !node.container_runtime) {
    out.push_back(model::kCauseNoContainerRuntime);
  }
  // The devices' causes are a cascade (no GPU of the model, then none with
  // the memory, ...): each one found is lifted from the job's request and
  // the cascade asked again, so that a node short of both the model and the
  // memory names both. The others (too few GPUs, unhealthy, topology) are
  // about the node as it is and end the cascade.
  model::Resources r = job.resources;
  for (;;) {
    const std::string_view c = StaticDeviceCause(n, job, r);
    if (c.empty()) break;
    out.push_back(c);
    if (c == model::kCauseGpuModel && !r.gpu_model.empty()) {
      r.gpu_model.clear();
    } else if (c == model::kCauseGpuMemory && r.gpu_memory_bytes > 0) {
      r.gpu_memory_bytes = 0;
    } else {
      break;
    }
  }
}

std::uint32_t Cluster::FreeEligible(std::size_t n, const JobShape& job) const {
  if (auto c = ClassOf(job.resources)) return free_[*c][n];
  std::uint32_t free = 0;
  bool slice = model::IsSlice(job.resources);
  for (const auto& g : Node(n).gpus) {
    if (slice ? SliceFits(g, job.resources) : g.free && g.healthy && Eligible(g, job.resources)) {
      ++free;
    }
  }
  return free;
}

std::optional<std::vector<std::size_t>> Cluster::ChooseGpus(std::size_t n,
                                                            const JobShape& job) const {
  const NodeView& node = Node(n);
  const auto& r = job.resources;
  if (r.cpu_millis > node.cpu_millis_free || r.memory_bytes > node.memory_bytes_free) {
    return std::nullopt;
  }
  std::vector<std::size_t> out;
  if (model::IsSlice(r)) {
    auto i = ChooseSlice(n, r, nullptr);
    if (!i) return std::nullopt;
    out.push_back(*i);
    return out;
  }
  if (r.gpus == 0) return out;
  // Free eligible GPUs by island, in index order.
  std::map<std::uint32_t, std::vector<std::size_t>> islands;
  std::size_t total = 0;
  for (std::size_t i = 0; i < node.gpus.size(); ++i) {
    const auto& g = node.gpus[i];
    if (g.free && g.healthy && Eligible(g, r)) {
      islands[g.nvlink_island].push_back(i);
      ++total;
    }
  }
  if (total < r.gpus) return std::nullopt;
  if (has_sharing_[n]) {
    // Whole GPUs outside sharing mode first: sharing GPUs stay for slices.
    for (auto& [id, gpus] : islands) {
      std::stable_partition(gpus.begin(), gpus.end(),
                            [&](std::size_t i) { return !node.gpus[i].sharing; });
    }
  }
  // Best fit: the island with the fewest free GPUs that holds the replica,
  // which keeps whole islands free for larger jobs.
  const std::vector<std::size_t>* best = nullptr;
  for (const auto& [id, gpus] : islands) {
    if (gpus.size() >= r.gpus && (best == nullptr || gpus.size() < best->size())) best = &gpus;
  }
  if (best != nullptr) {
    out.assign(best->begin(), best->begin() + r.gpus);
  } else {
    if (job.topology.nvlink_island == model::NvlinkIsland::kRequire) return std::nullopt;
    // Span as few islands as possible: largest first.
    std::vector<const std::vector<std::size_t>*> order;
    for (const auto& [id, gpus] : islands) order.push_back(&gpus);
    std::stable_sort(order.begin(), order.end(),
                     [](const auto* a, const auto* b) { return a->size() > b->size(); });
    for (const auto* gpus : order) {
      for (std::size_t i : *gpus) {
        if (out.size() == r.gpus) break;
        out.push_back(i);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string_view Cluster::Cause(std::size_t n, const JobShape& job) const {
  if (auto c = StaticCause(n, job); !c.empty()) return c;
  const auto& r = job.resources;
  return DynamicCause(n, job, model::IsSlice(r) || r.gpus > 0 ? FreeEligible(n, job) : 0);
}

std::string_view Cluster::DynamicCause(std::size_t n, const JobShape& job,
                                       std::uint32_t free_eligible) const {
  const NodeView& node = Node(n);
  const auto& r = job.resources;
  if (model::IsSlice(r) && free_eligible == 0) return model::kCauseSharedFull;
  if (r.gpus > 0 && free_eligible < r.gpus) {
    if (has_sharing_[n]) {
      std::uint32_t held = 0;  // eligible GPUs that only slices keep from being free
      for (const auto& g : node.gpus) {
        if (g.healthy && g.shared_millis > 0 && Eligible(g, r)) ++held;
      }
      if (held > 0 && free_eligible + held >= r.gpus) return model::kCauseHeldBySlices;
    }
    return model::kCauseTooFewGpus;
  }
  if (r.cpu_millis > node.cpu_millis_free) return model::kCauseCpu;
  if (r.memory_bytes > node.memory_bytes_free) return model::kCauseMemory;
  if (!ChooseGpus(n, job)) return model::kCauseTopology;
  return {};
}

ReplicaPlacement Cluster::Take(std::size_t n, std::uint32_t replica, const JobShape& job,
                               const std::vector<std::size_t>& gpus) {
  NodeView& node = Mutable(n);
  ReplicaPlacement out{replica, node.name, {}};
  const auto& r = job.resources;
  for (std::size_t i : gpus) {
    LogGpu(n, i);
    if (model::IsSlice(r)) {
      GpuView& g = node.gpus[i];
      model::GpuSlice s = model::SliceOf(r, g.memory_bytes);
      g.shared_millis += s.millis;
      g.shared_bytes += s.bytes;
    }
    SetFree(n, i, false);
    out.gpu_indices.push_back(node.gpus[i].index);
  }
  Log({n, -1, false, -std::int64_t{r.cpu_millis}, -static_cast<std::int64_t>(r.memory_bytes)});
  node.cpu_millis_free -= r.cpu_millis;
  node.memory_bytes_free -= r.memory_bytes;
  return out;
}

bool Cluster::PlaceOneNode(const JobShape& job, std::vector<ReplicaPlacement>& out) {
  // Candidate nodes by packing score: fewest free eligible GPUs first.
  std::vector<std::pair<std::uint32_t, std::size_t>> order;
  for (std::size_t n = 0; n < size(); ++n) {
    if (StaticCause(n, job).empty()) order.emplace_back(FreeEligible(n, job), n);
  }
  std::sort(order.begin(), order.end());
  for (auto [free, n] : order) {
    if (free < std::uint64_t{job.resources.gpus} * job.replicas) continue;
    std::size_t mark = Mark();
    out.clear();
    for (std::uint32_t i = 0; i < job.replicas; ++i) {
      auto gpus = ChooseGpus(n, job);
      if (!gpus) break;
      out.push_back(Take(n, i, job, *gpus));
    }
    if (out.size() == job.replicas) return true;
    Rollback(mark);
  }
  out.clear();
  return false;
}

// Pack: the fitting node with the fewest free usable GPUs, then name; with
// nvlink_island: prefer, a node where the replica sits in one island comes
// first. Key (split, free), lowest wins, ties to the lower node index.
namespace {

// The milli-GPUs one slice of a demand shape needs of a card.
std::int64_t FgdNeed(std::uint32_t share_millis, std::uint64_t share_bytes,
                     std::uint64_t card_bytes) {
  if (share_millis > 0) return share_millis;
  model::Resources shape;
  shape.gpu_share_bytes = share_bytes;
  return model::SliceOf(shape, card_bytes).millis;
}

}  // namespace

void Cluster::SetDemand(const std::vector<DemandShape>& demand) {
  demand_.clear();
  bool names_model = false;
  bool slices = false;
  for (const auto& d : demand) {
    if (d.gpus == 0 || d.weight <= 0) continue;
    model::Resources r;
    r.gpus = d.gpus;
    r.gpu_model = d.gpu_model;
    auto c = ClassOf(r);
    if (!c) continue;  // a model no node has
    const bool slice = d.share_millis > 0 || d.share_bytes > 0;
    const std::uint32_t gpus = slice ? 1U : d.gpus;
    const std::uint32_t millis = slice ? d.share_millis : 0;
    const std::uint64_t bytes = slice && d.share_millis == 0 ? d.share_bytes : 0;
    auto it = std::find_if(demand_.begin(), demand_.end(), [&](const Demand& e) {
      return e.gpus == gpus && e.cls == *c && e.share_millis == millis && e.share_bytes == bytes;
    });
    if (it == demand_.end()) {
      // What one replica takes of the GPUs: its whole GPUs, or its share (a
      // share by memory: of the largest card, the least it can be).
      std::int64_t replica_millis = 1000 * std::int64_t{gpus};
      if (slice) {
        replica_millis = millis > 0 ? std::int64_t{millis} : FgdNeed(0, bytes, MaxGpuMemory());
      }
      it = demand_.insert(
          demand_.end(),
          {gpus, *c, 0, millis, bytes, {}, 1024, std::max<std::int64_t>(1, replica_millis)});
    }
    it->weight += d.weight;
    it->hosts.push_back({d.cpu_millis, d.memory_bytes, d.weight});
    names_model = names_model || *c != 0;
    slices = slices || slice;
  }
  model_aware_ = names_model && models_.size() > 1;
  fgd_ = slices;
  if (fgd_ && names_model) {
    std::vector<std::int64_t> gpus(models_.size() + 1, 0);
    for (std::size_t m : model_of_) ++gpus[m + 1];
    for (auto& d : demand_) {
      if (d.cls != 0 && gpus[d.cls] > 0) {
        d.scale = 1024 * static_cast<std::int64_t>(model_of_.size()) / gpus[d.cls];
      }
    }
  }
}

std::int64_t Cluster::RoomOf(const GpuView& g) const {
  if (!g.healthy) return 0;
  if (g.free) return 1000;
  if (g.sharing && g.shared_millis > 0) return 1000 - std::min<std::int64_t>(1000, g.shared_millis);
  return 0;
}

void Cluster::FgdPrepare(std::size_t n, const model::Resources& r, FgdBase& base) const {
  const NodeView& node = Node(n);
  const std::size_t first = first_gpu_[n];
  base.total = 0;
  for (const auto& g : node.gpus) base.total += RoomOf(g);
  base.usable.assign(demand_.size(), 0);
  base.kept_before.assign(demand_.size(), 0);
  const std::uint64_t cpu = node.cpu_millis_free;
  const std::uint64_t mem = node.memory_bytes_free;
  base.cpu_after = cpu - std::min<std::uint64_t>(cpu, r.cpu_millis);
  base.memory_after = mem - std::min(mem, r.memory_bytes);
  for (std::size_t k = 0; k < demand_.size(); ++k) {
    const Demand& d = demand_[k];
    if (d.share_millis == 0 && d.share_bytes == 0) {
      const std::int64_t ff = free_[d.cls][n];
      base.usable[k] = ff >= std::int64_t{d.gpus} ? 1000 * ff : 0;
      base.kept_before[k] = FgdKept(d, base.usable[k], cpu, mem);
      continue;
    }
    for (std::size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuView& g = node.gpus[i];
      if (!g.sharing || !g.healthy || (d.cls != 0 && model_of_[first + i] + 1 != d.cls)) continue;
      const std::int64_t room = RoomOf(g);
      if (room > 0 && room >= FgdNeed(d.share_millis, d.share_bytes, g.memory_bytes)) {
        base.usable[k] += room;
      }
    }
    base.kept_before[k] = FgdKept(d, base.usable[k], cpu, mem);
  }
}

std::int64_t Cluster::FgdKept(const Demand& d, std::int64_t usable, std::uint64_t cpu,
                              std::uint64_t memory) const {
  if (usable == 0) return 0;
  std::int64_t kept = 0;
  for (const auto& h : d.hosts) {
    // The replicas of this host shape the node's CPU and memory can hold.
    std::uint64_t replicas = std::numeric_limits<std::uint64_t>::max();
    if (h.cpu_millis > 0) replicas = cpu / h.cpu_millis;
    if (h.memory_bytes > 0) replicas = std::min(replicas, memory / h.memory_bytes);
    if (replicas == 0) continue;
    const auto most = static_cast<std::uint64_t>(usable / d.replica_millis) + 1;
    kept += h.weight * std::min(usable, static_cast<std::int64_t>(std::min(replicas, most)) *
                                            d.replica_millis);
  }
  return kept;
}

std::int64_t Cluster::FgdScore(std::size_t n, const std::vector<std::size_t>& gpus,
                               const model::Resources& r, const FgdBase& base) const {
  const NodeView& node = Node(n);
  const std::size_t first = first_gpu_[n];
  const bool slice = model::IsSlice(r);
  std::int64_t taken = 0;
  for (std::size_t i : gpus) {
    const GpuView& g = node.gpus[i];
    taken += slice ? std::int64_t{model::SliceOf(r, g.memory_bytes).millis} : RoomOf(g);
  }
  // A shape's fragment is the node's free capacity less what it can use
  // (nothing where the node lacks its CPU or memory), times the weight:
  // sum over its replicas of W * total - W_fit * usable.
  std::int64_t delta = 0;
  for (std::size_t k = 0; k < demand_.size(); ++k) {
    const Demand& d = demand_[k];
    auto of_class = [&](std::size_t i) { return d.cls == 0 || model_of_[first + i] + 1 == d.cls; };
    std::int64_t usable_after = base.usable[k];
    if (d.share_millis == 0 && d.share_bytes == 0) {
      // Whole GPUs: usable are the wholly free ones of its class, if enough.
      std::int64_t ff = free_[d.cls][n];
      for (std::size_t i : gpus) {
        const GpuView& g = node.gpus[i];
        if (g.free && g.healthy && of_class(i)) --ff;
      }
      usable_after = ff >= std::int64_t{d.gpus} ? 1000 * ff : 0;
    } else {
      // A slice: usable is the room of each sharing GPU of its class that
      // has room for it.
      for (std::size_t i : gpus) {
        const GpuView& g = node.gpus[i];
        if (!g.sharing || !g.healthy || !of_class(i)) continue;
        const std::int64_t need = FgdNeed(d.share_millis, d.share_bytes, g.memory_bytes);
        const std::int64_t room = RoomOf(g);
        const std::int64_t after =
            room - (slice ? std::int64_t{model::SliceOf(r, g.memory_bytes).millis} : room);
        usable_after += (after > 0 && after >= need ? after : 0) - (room >= need ? room : 0);
      }
    }
    delta += d.scale * (d.weight * (-taken) + base.kept_before[k] -
                        FgdKept(d, usable_after, base.cpu_after, base.memory_after));
  }
  return delta;
}

std::int64_t Cluster::FgdDelta(std::size_t n, const std::vector<std::size_t>& gpus,
                               const model::Resources& r) const {
  FgdBase base;
  FgdPrepare(n, r, base);
  return FgdScore(n, gpus, r, base);
}

std::int64_t Cluster::FragmentationDelta(std::size_t n,
                                         const std::vector<std::size_t>& gpus) const {
  const std::size_t base = first_gpu_[n];
  const auto total = static_cast<std::int64_t>(free_[0][n]);
  const std::int64_t total_after = total - static_cast<std::int64_t>(gpus.size());
  // The free GPUs a shape cannot use: all of them when too few are of a
  // model it may use, else those of other models.
  auto unusable = [](std::int64_t all, std::int64_t usable, std::uint32_t need) {
    return usable >= static_cast<std::int64_t>(need) ? all - usable : all;
  };
  std::int64_t delta = 0;
  for (const auto& d : demand_) {
    std::int64_t usable = total;
    std::int64_t taken = static_cast<std::int64_t>(gpus.size());
    if (d.cls != 0) {
      usable = free_[d.cls][n];
      taken = std::count_if(gpus.begin(), gpus.end(),
                            [&](std::size_t i) { return model_of_[base + i] + 1 == d.cls; });
    }
    delta += d.weight *
             (unusable(total_after, usable - taken, d.gpus) - unusable(total, usable, d.gpus));
  }
  return delta;
}

bool Cluster::SplitsPreferredIsland(std::size_t n, const JobShape& job,
                                    const std::vector<std::size_t>& gpus) const {
  if (job.topology.nvlink_island != model::NvlinkIsland::kPrefer || gpus.empty()) return false;
  const auto& g = Node(n).gpus;
  return std::any_of(gpus.begin(), gpus.end(), [&](std::size_t i) {
    return g[i].nvlink_island != g[gpus.front()].nvlink_island;
  });
}

std::optional<std::size_t> Cluster::BestNode(const JobShape& job,
                                             std::vector<std::size_t>& best_gpus) const {
  if (model::IsSlice(job.resources)) return BestSliceNode(job, best_gpus);
  std::optional<std::size_t> best;
  std::pair<bool, std::uint32_t> best_key{};
  // Returns true when `n` is a fit nothing later can beat.
  auto consider = [&](std::size_t n, std::uint32_t free) {
    if (!StaticCause(n, job).empty()) return false;
    auto gpus = ChooseGpus(n, job);
    if (!gpus) return false;
    const bool split = SplitsPreferredIsland(n, job, *gpus);
    std::pair<bool, std::uint32_t> key{split, free};
    if (best && key >= best_key) return false;
    best = n;
    best_key = key;
    best_gpus = std::move(*gpus);
    return !split;
  };
  const auto& r = job.resources;
  // The tightest fit among the nodes of count class `c`, walked by free
  // count (exact for a job of that class).
  auto tightest = [&](std::size_t c) {
    const auto& buckets = by_free_[c];
    for (std::size_t f = r.gpus; f < buckets.size(); ++f) {
      if (best && !best_key.first) break;
      for (std::size_t n : buckets[f]) {
        if (consider(n, static_cast<std::uint32_t>(f))) return;
      }
    }
  };
  if (auto c = ClassOf(r)) {
    if (fgd_) return FgdNode(job, *c, best_gpus);
    if (*c == 0 && model_aware_ && r.gpus > 0) {
      // Any model will do: the tightest fit of each model, then FGD's score
      // over those few (SetDemand).
      std::optional<std::size_t> pick;
      std::tuple<bool, std::int64_t, std::uint32_t> pick_key{};
      std::vector<std::size_t> pick_gpus;
      for (std::size_t m = 1; m < by_free_.size(); ++m) {
        best.reset();
        tightest(m);
        if (!best) continue;
        std::tuple<bool, std::int64_t, std::uint32_t> key{
            best_key.first, FragmentationDelta(*best, best_gpus), best_key.second};
        if (!pick || key < pick_key) {
          pick = best;
          pick_key = key;
          pick_gpus = best_gpus;
        }
      }
      if (pick) {
        best_gpus = std::move(pick_gpus);
        return pick;
      }
      best.reset();  // no node has enough of one model: any mix, as below
    }
    tightest(*c);
    return best;
  }
  for (std::size_t n = 0; n < size(); ++n) {
    std::uint32_t free = FreeEligible(n, job);
    if (free < r.gpus) continue;
    if (best && !best_key.first && free >= best_key.second) continue;  // cannot beat it
    if (consider(n, free) && free == r.gpus) break;  // an exact fit: nothing packs tighter
  }
  return best;
}

std::optional<std::size_t> Cluster::FgdNode(const JobShape& job, std::size_t c,
                                            std::vector<std::size_t>& best_gpus) const {
  const auto& r = job.resources;
  std::optional<std::size_t> best;
  std::tuple<bool, std::int64_t, std::uint32_t, std::size_t> best_key{};
  FgdBase base;
  // Scores node `n` if the replica fits it; false if it does not.
  auto score = [&](std::size_t n) {
    if (!StaticCause(n, job).empty()) return false;
    auto gpus = ChooseGpus(n, job);
    if (!gpus) return false;
    const bool split = SplitsPreferredIsland(n, job, *gpus);
    // Least fragmentation added, then the tighter fit, then the lower index.
    FgdPrepare(n, r, base);
    std::tuple<bool, std::int64_t, std::uint32_t, std::size_t> key{
        split, FgdScore(n, *gpus, r, base), free_[c][n], n};
    if (!best || key < best_key) {
      best = n;
      best_key = key;
      best_gpus = std::move(*gpus);
    }
    return true;
  };
  const bool bounded = size() > fgd_exact_nodes_;
  // Bounded (a large cluster): the first node that fits of each free count
  // of the job's class and, for a job free to use any model among several,
  // the tightest fit of each model (its fewest free GPUs of the model, then
  // index), so that FGD's scarcity weights choose the model.
  const auto& buckets = by_free_[c];
  std::vector<std::size_t> scored;
  for (std::size_t f = r.gpus; f < buckets.size(); ++f) {
    for (std::size_t n : buckets[f]) {
      if (score(n) && bounded) {
        scored.push_back(n);
        break;
      }
    }
  }
  if (bounded && c == 0 && models_.size() > 1) {
    for (std::size_t m = 1; m < by_free_.size(); ++m) {
      auto fits = [&](std::size_t n) {
        if (std::find(scored.begin(), scored.end(), n) != scored.end()) return true;
        return score(n);
      };
      bool found = false;
      for (std::size_t f = r.gpus; f < by_free_[m].size() && !found; ++f) {
        for (std::size_t n : by_free_[m][f]) {
          if (fits(n)) {
            found = true;
            break;
          }
        }
      }
    }
  }
  return best;
}

// A slice: the node whose best GPU fits tightest (see ChooseSlice); among
// fresh GPUs, the node with the fewest free GPUs, so whole nodes stay free.
std::optional<std::size_t> Cluster::BestSliceNode(const JobShape& job,
                                                  std::vector<std::size_t>& gpus) const {
  const auto& r = job.resources;
  std::optional<std::size_t> best;
  std::tuple<std::uint64_t, std::int64_t, std::uint64_t, std::uint32_t> best_key{};
  std::size_t best_gpu = 0;
  std::int64_t best_delta = 0;  // FGD's, when it scores
  FgdBase base;
  std::vector<std::size_t> one(1);
  // FGD: every GPU of node `n` with room for the slice, the least
  // fragmentation added first, then the tightest fit (ChooseSlice's order).
  auto score_node = [&](std::size_t n) {
    const NodeView& node = Node(n);
    bool prepared = false;
    for (std::size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuView& g = node.gpus[i];
      if (!SliceFits(g, r)) continue;
      const model::GpuSlice s = model::SliceOf(r, g.memory_bytes);
      std::tuple<std::uint64_t, std::int64_t, std::uint64_t, std::uint32_t> key{
          g.shared_millis > 0 ? 1000 - g.shared_millis - s.millis : 1001, 0,
          g.memory_bytes - g.shared_bytes - s.bytes, free_[0][n]};
      if (!prepared) FgdPrepare(n, r, base);
      prepared = true;
      one[0] = i;
      const std::int64_t delta = FgdScore(n, one, r, base);
      if (!best || delta < best_delta ||
          (delta == best_delta && std::tie(key, n) < std::tie(best_key, *best))) {
        best = n;
        best_key = key;
        best_delta = delta;
        best_gpu = i;
      }
    }
  };
  // Only nodes with a GPU that has room for the share are looked at
  // (slice_room_): on a full cluster a pass over every node per slice was
  // most of a cycle. The least room a GPU must have: the share, or for a
  // share by memory (its milli-GPUs depend on the card) any.
  const std::uint32_t need = r.gpu_share_millis > 0 ? r.gpu_share_millis : 1;
  // Whether node `n` may take the slice but for which GPU: room, CPU,
  // memory and the static filters.
  auto open = [&](std::size_t n) {
    if (slice_room_[n] < need) return false;
    const NodeView& node = Node(n);
    if (r.cpu_millis > node.cpu_millis_free || r.memory_bytes > node.memory_bytes_free) {
      return false;
    }
    return StaticCause(n, job).empty();
  };
  // A large cluster: FGD scores only the kFgdSliceCandidates nodes that fit
  // tightest (ChooseSlice's key, then free GPUs, then index); for a slice
  // free to use any of several models, that many for each model (of the
  // GPU the slice would take there), so that FGD's scarcity weights choose
  // the model.
  const bool bounded = fgd_ && size() > fgd_exact_nodes_;
  if (fgd_ && !bounded) {
    // Every node is scored; the order does not matter (ties go by key,
    // then index).
    for (const NodeSet* set : {&partial_, &pristine_}) {
      for (std::size_t n : *set) {
        if (open(n)) score_node(n);
      }
    }
    if (best) gpus.assign(1, best_gpu);
    return best;
  }
  using Candidate = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::size_t>;
  const bool per_model = bounded && r.gpu_model.empty() && models_.size() > 1;
  std::vector<std::vector<Candidate>> candidates(per_model ? models_.size() : 1);
  // Node `n`'s tightest GPU for the slice against the best so far (bounded:
  // into its model's candidates, the lowest keys); which list, or -1 if no
  // GPU of it fits. Either way the outcome is the least (key, index), in
  // any order.
  auto consider = [&](std::size_t n) -> int {
    std::pair<std::uint64_t, std::uint64_t> k;
    auto i = ChooseSlice(n, r, &k);
    if (!i) return -1;
    if (bounded) {
      const std::size_t list = per_model ? model_of_[first_gpu_[n] + *i] : 0;
      auto& into = candidates[list];
      Candidate c{k.first, k.second, free_[0][n], n};
      if (into.size() == kFgdSliceCandidates && c >= into.back()) return static_cast<int>(list);
      into.insert(std::upper_bound(into.begin(), into.end(), c), c);
      if (into.size() > kFgdSliceCandidates) into.pop_back();
      return static_cast<int>(list);
    }
    // A slice free to use any model that would open a fresh GPU opens it
    // where that leaves the shapes asked for the most room (SetDemand).
    const std::int64_t delta =
        model_aware_ && r.gpu_model.empty() && k.first > 1000 ? FragmentationDelta(n, {*i}) : 0;
    std::tuple<std::uint64_t, std::int64_t, std::uint64_t, std::uint32_t> key{
        k.first, delta, k.second, free_[0][n]};
    if (!best || std::tie(key, n) < std::tie(best_key, *best)) {
      best = n;
      best_key = key;
      best_gpu = *i;
    }
    return 0;
  };
  // First the nodes where a GPU holds slices: a slice that fits one ranks
  // before any fresh GPU (ChooseSlice's key 1001).
  for (std::size_t n : partial_) {
    if (open(n)) consider(n);
  }
  const bool settled = bounded ? std::all_of(candidates.begin(), candidates.end(),
                                             [](const std::vector<Candidate>& list) {
                                               return list.size() == kFgdSliceCandidates &&
                                                      std::get<0>(list.back()) <= 1000;
                                             })
                               : best && std::get<0>(best_key) <= 1000;
  if (!settled) {
    // The nodes whose GPUs with room hold no slices: a slice there takes a
    // fresh GPU. When every sharing GPU has the same memory, that leaves
    // the same memory on any node, so they rank by free GPUs, then index:
    // the by_free_ walk meets them in that order and stops at the first
    // (bounded: the first kFgdSliceCandidates of each list) that fits. Else (or when
    // the fresh GPU is chosen by FragmentationDelta) each is ranked.
    const bool by_delta = !bounded && model_aware_ && r.gpu_model.empty();
    if (sharing_memory_ != 0 && !by_delta) {
      std::vector<std::size_t> found(candidates.size(), 0);
      std::size_t lists_found = 0;  // lists with kFgdSliceCandidates found
      for (const NodeSet& free_count : by_free_[0]) {
        const bool more = free_count.ForEachAlsoIn(pristine_, [&](std::size_t n) {
          // A node of one model whose list has its candidates: any later
          // fresh node of that model ranks after them.
          if (per_model) {
            const auto from = model_of_.begin() + static_cast<std::ptrdiff_t>(first_gpu_[n]);
            const auto to = model_of_.begin() + static_cast<std::ptrdiff_t>(first_gpu_[n + 1]);
            if (from != to && std::all_of(from, to, [&](std::size_t m) { return m == *from; }) &&
                found[*from] >= kFgdSliceCandidates) {
              return true;
            }
          }
          if (!open(n)) return true;
          const int list = consider(n);
          if (list < 0) return true;
          if (++found[static_cast<std::size_t>(list)] == kFgdSliceCandidates) ++lists_found;
          return bounded && lists_found < candidates.size();
        });
        if (!more) break;
      }
    } else {
      for (std::size_t n : pristine_) {
        if (open(n)) consider(n);
      }
    }
  }
  for (const auto& list : candidates) {
    for (const auto& c : list) score_node(std::get<3>(c));
  }
  if (best) gpus.assign(1, best_gpu);
  return best;
}

std::optional<std::vector<ReplicaPlacement>> Cluster::PlaceGang(
    const JobShape& job, std::uint32_t* placed_before_failure) {
  std::size_t mark = Mark();
  std::vector<ReplicaPlacement> out;
  if (job.topology.one_node) {
    if (PlaceOneNode(job, out)) return out;
    if (placed_before_failure != nullptr) *placed_before_failure = 0;
    return std::nullopt;
  }
  for (std::uint32_t replica = 0; replica < job.replicas; ++replica) {
    std::vector<std::size_t> best_gpus;
    std::optional<std::size_t> best = BestNode(job, best_gpus);
    if (!best) {
      Rollback(mark);
      if (placed_before_failure != nullptr) *placed_before_failure = replica;
      return std::nullopt;
    }
    out.push_back(Take(*best, replica, job, best_gpus));
  }
  return out;
}

void Cluster::Release(const RunningJob& job) {
  for (const auto& rp : job.replicas) {
    auto n = Find(rp.node);
    if (!n) continue;
    NodeView& node = Mutable(*n);
    for (std::uint32_t idx : rp.gpu_indices) {
      for (std::size_t i = 0; i < node.gpus.size(); ++i) {
        GpuView& g = node.gpus[i];
        if (g.index != idx) continue;
        LogGpu(*n, i);
        if (model::IsSlice(job.resources)) {
          model::GpuSlice s = model::SliceOf(job.resources, g.memory_bytes);
          g.shared_millis -= std::min(g.shared_millis, s.millis);
          g.shared_bytes -= std::min(g.shared_bytes, s.bytes);
          SetFree(*n, i, g.shared_millis == 0);
        } else {
          SetFree(*n, i, true);
        }
      }
    }
    Log({*n, -1, false, std::int64_t{job.resources.cpu_millis},
         static_cast<std::int64_t>(job.resources.memory_bytes)});
    node.cpu_millis_free += job.resources.cpu_millis;
    node.memory_bytes_free += job.resources.memory_bytes;
  }
}

void Cluster::LogGpu(std::size_t n, std::size_t i) {
  const GpuView& g = Node(n).gpus[i];
  Undo u{n, static_cast<std::int32_t>(i), g.free, 0, 0};
  u.millis_before = g.shared_millis;
  u.bytes_before = g.shared_bytes;
  Log(u);
}

void Cluster::SetGpuFree(std::size_t n, std::size_t i, bool free) {
  LogGpu(n, i);
  SetFree(n, i, free);
}

void Cluster::SetGpuSharedMillis(std::size_t n, std::size_t i, std::uint32_t millis) {
  LogGpu(n, i);
  Mutable(n).gpus[i].shared_millis = millis;
  RefreshSliceRoom(n);
}

void Cluster::Log(Undo u) {
  u.state_before = state_;
  state_ = ++next_state_;
  log_.push_back(u);
}

void Cluster::Rollback(std::size_t mark) {
  while (log_.size() > mark) {
    const Undo& u = log_.back();
    state_ = u.state_before;
    NodeView& node = Mutable(u.node);
    if (u.gpu >= 0) {
      GpuView& g = node.gpus[static_cast<std::size_t>(u.gpu)];
      g.shared_millis = u.millis_before;
      g.shared_bytes = u.bytes_before;
      SetFree(u.node, static_cast<std::size_t>(u.gpu), u.was_free);
    } else {
      node.cpu_millis_free =
          static_cast<std::uint64_t>(static_cast<std::int64_t>(node.cpu_millis_free) - u.cpu_delta);
      node.memory_bytes_free = static_cast<std::uint64_t>(
          static_cast<std::int64_t>(node.memory_bytes_free) - u.mem_delta);
    }
    log_.pop_back();
  }
}

}  // namespace berth::sched
