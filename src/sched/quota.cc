#include "sched/quota.h"

#include <algorithm>
#include <limits>

#include "common/checked.h"

// Every sum here (over replicas, jobs, queues, nodes) saturates instead of
// overflowing: the per-job amounts are bounded at parse time (model/job.h),
// but nothing bounds how many jobs, queues or nodes there are, and node
// inventory comes from agents. A clamped sum still compares as "more than
// any quota", and usage never goes below zero.
namespace berth::sched {
namespace {

constexpr std::int64_t kPpm = 1'000'000;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

void AddTo(std::int64_t& sum, std::int64_t v) {
  sum = SaturatingAdd(sum, v);
}
const model::ResourceKey kCpuKey{model::ResourceKind::kCpu, ""};
const model::ResourceKey kMemoryKey{model::ResourceKind::kMemory, ""};
const model::ResourceKey kGpuMemoryKey{model::ResourceKind::kGpuMemory, ""};

std::int64_t Get(const Usage& u, const model::ResourceKey& key) {
  auto it = u.find(key);
  return it == u.end() ? 0 : it->second;
}

}  // namespace

Usage UsageOf(const Cluster& cluster, const model::Resources& r,
              const std::vector<ReplicaPlacement>& replicas) {
  std::vector<std::optional<std::size_t>> nodes;
  nodes.reserve(replicas.size());
  for (const auto& rp : replicas) {
    nodes.push_back(rp.gpu_indices.empty() ? std::nullopt : cluster.Find(rp.node));
  }
  UsageSum sum;
  sum.Add(cluster, r, replicas, nodes);
  Usage u;
  sum.Into(u);
  return u;
}

void UsageSum::Add(const Cluster& cluster, const model::Resources& r,
                   const std::vector<ReplicaPlacement>& replicas,
                   const std::vector<std::optional<std::size_t>>& nodes) {
  cluster_ = &cluster;
  for (std::size_t k = 0; k < replicas.size(); ++k) {
    const ReplicaPlacement& rp = replicas[k];
    const std::optional<std::size_t>& n = nodes[k];
    for (std::uint32_t idx : rp.gpu_indices) {
      const std::optional<std::size_t> slot = n ? cluster.GpuSlot(*n, idx) : std::nullopt;
      const std::uint64_t memory = slot ? cluster.MemoryAt(*slot) : 0;
      // A slice counts its share in milli-GPUs and its memory in bytes
      // (model::SliceOf); a whole GPU counts 1000 and all its memory.
      std::int64_t mgpu = 1000;
      std::int64_t bytes = SaturatingCast<std::int64_t>(memory);
      if (model::IsSlice(r)) {
        model::GpuSlice s = model::SliceOf(r, memory);
        mgpu = s.millis;
        bytes = SaturatingCast<std::int64_t>(s.bytes);
      }
      any_gpu_ = true;
      AddTo(mgpu_, mgpu);
      AddTo(gpu_bytes_, bytes);
      // Counted under its model too, when it has one: the GPU's, else the
      // one the job asked for.
      if (slot) {
        const std::size_t id = cluster.ModelIdAt(*slot);
        if (id >= by_model_.size()) by_model_.resize(id + 1);
        if (!by_model_[id]) by_model_[id] = 0;
        AddTo(*by_model_[id], mgpu);
        continue;
      }
      if (r.gpu_model.empty()) continue;
      auto it = std::find_if(named_.begin(), named_.end(),
                             [&](const auto& m) { return m.first == r.gpu_model; });
      if (it == named_.end()) {
        named_.emplace_back(r.gpu_model, mgpu);
      } else {
        AddTo(it->second, mgpu);
      }
    }
  }
  if (!replicas.empty()) {
    const auto count = static_cast<std::int64_t>(replicas.size());
    any_replica_ = true;
    AddTo(cpu_, SaturatingMul(std::int64_t{r.cpu_millis}, count));
    AddTo(memory_, SaturatingMul(SaturatingCast<std::int64_t>(r.memory_bytes), count));
  }
}

void UsageSum::Add(const Cluster& cluster, const UsageFootprint& f) {
  cluster_ = &cluster;
  if (f.any_gpu) any_gpu_ = true;
  if (f.any_replica) any_replica_ = true;
  AddTo(mgpu_, f.mgpu);
  AddTo(gpu_bytes_, f.gpu_bytes);
  AddTo(cpu_, f.cpu);
  AddTo(memory_, f.memory);
  if (f.model >= 0) {
    const auto id = static_cast<std::size_t>(f.model);
    if (id >= by_model_.size()) by_model_.resize(id + 1);
    if (!by_model_[id]) by_model_[id] = 0;
    AddTo(*by_model_[id], f.model_mgpu);
  }
}

std::optional<UsageFootprint> UsageSum::Footprint() const {
  if (!named_.empty()) return std::nullopt;
  UsageFootprint f;
  f.mgpu = mgpu_;
  f.gpu_bytes = gpu_bytes_;
  f.cpu = cpu_;
  f.memory = memory_;
  f.any_gpu = any_gpu_;
  f.any_replica = any_replica_;
  for (std::size_t id = 0; id < by_model_.size(); ++id) {
    if (!by_model_[id]) continue;
    if (f.model >= 0) return std::nullopt;
    f.model = static_cast<std::int32_t>(id);
    f.model_mgpu = *by_model_[id];
  }
  return f;
}

void UsageSum::Into(Usage& u) const {
  if (any_gpu_) {
    AddTo(u[kGpusKey], mgpu_);
    AddTo(u[kGpuMemoryKey], gpu_bytes_);
    for (std::size_t id = 0; id < by_model_.size(); ++id) {
      const std::string& model = cluster_->Models()[id];
      if (by_model_[id] && !model.empty()) {
        AddTo(u[{model::ResourceKind::kGpus, model}], *by_model_[id]);
      }
    }
    for (const auto& [model, mgpu] : named_) AddTo(u[{model::ResourceKind::kGpus, model}], mgpu);
  }
  if (any_replica_) {
    AddTo(u[kCpuKey], cpu_);
    AddTo(u[kMemoryKey], memory_);
  }
}

QuotaBook::QuotaBook(const model::Policy& policy, const Cluster& cluster,
                     const std::vector<RunningJob>& running,
                     const std::map<std::string, std::int64_t>& decayed_usage)
    : QuotaBook(policy, cluster, decayed_usage) {
  for (const auto& job : running) {
    AddRunning(Find(job.tenant + "/" + job.queue), UsageOf(cluster, job.resources, job.replicas));
  }
}

void QuotaBook::AddRunning(std::optional<std::size_t> leaf, const Usage& usage) {
  AddTo(capacity_[kCpuKey], Get(usage, kCpuKey));
  AddTo(capacity_[kMemoryKey], Get(usage, kMemoryKey));
  if (leaf) Add(*leaf, usage);
}

QuotaBook::QuotaBook(const model::Policy& policy, const Cluster& cluster,
                     const std::map<std::string, std::int64_t>& decayed_usage) {
  half_life_s_ = std::max<std::int64_t>(1, policy.usage_half_life_ms / 1000);
  for (const auto& q : policy.queues) {
    Entry e;
    e.policy = &q;
    if (!q.parent.empty()) {
      if (auto it = index_.find(q.parent); it != index_.end()) e.parent = it->second;
    }
    index_.emplace(q.path, queues_.size());
    queues_.push_back(std::move(e));
  }
  fair_cache_.resize(queues_.size());
  for (std::size_t t = 0; t < queues_.size(); ++t) {
    if (queues_[t].parent) continue;
    for (const auto& [key, quota] : queues_[t].policy->quota) {
      if (quota.lending_limit > 0) lenders_[key].push_back(t);
    }
  }
  for (const auto& [path, usage] : decayed_usage) {
    auto q = Find(path);
    if (!q) continue;
    for (std::size_t a : Chain(*q)) AddTo(queues_[a].decayed, std::max<std::int64_t>(0, usage));
  }
  // Summed in locals and entered once per key (the same keys and sums as
  // entering every GPU: 80,000 map updates a cycle at 10,000 nodes).
  bool any_node = false;
  bool any_gpu = false;
  std::int64_t gpus = 0;
  std::int64_t gpu_memory = 0;
  std::int64_t cpu = 0;
  std::int64_t memory = 0;
  std::map<std::string_view, std::int64_t> by_model;
  auto model_sum = by_model.end();
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    const NodeView& n = cluster.Node(i);
    if (!n.ready || n.cordoned) continue;
    any_node = true;
    for (const auto& g : n.gpus) {
      if (!g.healthy) continue;
      any_gpu = true;
      AddTo(gpus, 1000);
      if (model_sum == by_model.end() || model_sum->first != g.model) {
        model_sum = by_model.try_emplace(g.model, 0).first;
      }
      AddTo(model_sum->second, 1000);
      AddTo(gpu_memory, SaturatingCast<std::int64_t>(g.memory_bytes));
    }
    AddTo(cpu, SaturatingCast<std::int64_t>(n.cpu_millis_free));
    AddTo(memory, SaturatingCast<std::int64_t>(n.memory_bytes_free));
  }
  if (any_gpu) {
    AddTo(capacity_[kGpusKey], gpus);
    // A GPU without a model name counts twice under kGpusKey, as it always has.
    for (const auto& [m, v] : by_model) {
      AddTo(capacity_[{model::ResourceKind::kGpus, std::string(m)}], v);
    }
    AddTo(capacity_[kGpuMemoryKey], gpu_memory);
  }
  if (any_node) {
    AddTo(capacity_[kCpuKey], cpu);
    AddTo(capacity_[kMemoryKey], memory);
  }
}

std::optional<std::size_t> QuotaBook::Find(std::string_view path) const {
  auto it = index_.find(path);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::size_t> QuotaBook::Chain(std::size_t q) const {
  std::vector<std::size_t> out{q};
  while (queues_[out.back()].parent) out.push_back(*queues_[out.back()].parent);
  return out;
}

const std::vector<std::string>& QuotaBook::Pools(std::size_t q) const {
  for (std::size_t a : Chain(q)) {
    if (!queues_[a].policy->pools.empty()) return queues_[a].policy->pools;
  }
  return queues_[q].policy->pools;
}

std::string QuotaBook::PoolsOwner(std::size_t q) const {
  for (std::size_t a : Chain(q)) {
    if (!queues_[a].policy->pools.empty()) return queues_[a].policy->path;
  }
  return {};
}

void QuotaBook::Add(std::size_t leaf, const Usage& delta) {
  for (std::size_t a : Chain(leaf)) {
    for (const auto& [k, v] : delta) AddTo(queues_[a].used[k], v);
    fair_cache_[a].reset();
    changed_.push_back(a);
  }
  for (const auto& [k, v] : delta) AddTo(total_used_[k], v);
}

void QuotaBook::Remove(std::size_t leaf, const Usage& delta) {
  // Never below zero: after a sum saturated, removing its parts must not
  // leave a queue with negative usage (and a fair share ahead of all).
  auto take = [](std::int64_t& used, std::int64_t v) {
    used = std::max<std::int64_t>(0, SaturatingSub(used, v));
  };
  for (std::size_t a : Chain(leaf)) {
    for (const auto& [k, v] : delta) take(queues_[a].used[k], v);
    fair_cache_[a].reset();
    changed_.push_back(a);
  }
  for (const auto& [k, v] : delta) take(total_used_[k], v);
}

std::int64_t QuotaBook::Used(std::size_t q, const model::ResourceKey& key) const {
  return Get(queues_[q].used, key);
}

std::int64_t QuotaBook::Guaranteed(std::size_t q, const model::ResourceKey& key) const {
  auto it = queues_[q].policy->quota.find(key);
  return it == queues_[q].policy->quota.end() ? 0 : it->second.guaranteed;
}

std::int64_t QuotaBook::Capacity(const model::ResourceKey& key) const {
  return Get(capacity_, key);
}

std::int64_t QuotaBook::TotalUsed(const model::ResourceKey& key) const {
  return Get(total_used_, key);
}

std::int64_t QuotaBook::UnlentElsewhere(std::size_t leaf, const model::ResourceKey& key) const {
  auto lenders = lenders_.find(key);
  if (lenders == lenders_.end()) return 0;
  std::size_t top = Chain(leaf).back();
  std::int64_t sum = 0;
  for (std::size_t t : lenders->second) {
    if (t == top) continue;
    AddTo(sum,
          std::max<std::int64_t>(0, queues_[t].policy->quota.at(key).lending_limit - Used(t, key)));
  }
  return sum;
}

std::int64_t QuotaBook::FreeToBorrow(std::size_t leaf, const model::ResourceKey& key) const {
  const std::int64_t free = SaturatingSub(Capacity(key), TotalUsed(key));
  return std::max<std::int64_t>(0, SaturatingSub(free, UnlentElsewhere(leaf, key)));
}

std::int64_t QuotaBook::Headroom(std::size_t leaf, const model::ResourceKey& key) const {
  std::int64_t room = kMax;
  for (std::size_t a : Chain(leaf)) {
    const auto& qp = *queues_[a].policy;
    auto it = qp.quota.find(key);
    if (it == qp.quota.end()) continue;
    std::int64_t limit = qp.over_quota != model::OverQuota::kBorrow ? it->second.guaranteed
                         : it->second.borrow_limit
                             ? SaturatingAdd(it->second.guaranteed, *it->second.borrow_limit)
                             : kMax;
    if (limit != kMax) room = std::min(room, SaturatingSub(limit, Used(a, key)));
  }
  return std::max<std::int64_t>(0, room);
}

std::optional<QuotaRefusal> QuotaBook::Check(std::size_t leaf, const Usage& delta,
                                             bool preemptible) const {
  for (std::size_t a : Chain(leaf)) {
    const auto& qp = *queues_[a].policy;
    for (const auto& [key, quota] : qp.quota) {
      std::int64_t d = Get(delta, key);
      if (d <= 0) continue;
      std::int64_t after = SaturatingAdd(Used(a, key), d);
      if (after <= quota.guaranteed) continue;
      bool refuse =
          !preemptible || qp.over_quota != model::OverQuota::kBorrow ||
          (quota.borrow_limit && after > SaturatingAdd(quota.guaranteed, *quota.borrow_limit));
      if (refuse) {
        QuotaRefusal r;
        r.not_preemptible = !preemptible;
        r.queue = qp.path;
        r.key = key;
        r.requested = d;
        r.used = Used(a, key);
        r.guaranteed = quota.guaranteed;
        r.borrow_limit = quota.borrow_limit;
        if (qp.over_quota != model::OverQuota::kBorrow) r.borrow_limit = 0;
        r.borrowable_now = std::min(Headroom(leaf, key), FreeToBorrow(leaf, key));
        return r;
      }
    }
  }
  // Borrowing past the tenant's guarantee must leave other tenants' unlent
  // guarantee (lending_limit) free.
  std::size_t top = Chain(leaf).back();
  for (const auto& [key, d] : delta) {
    if (d <= 0 || SaturatingAdd(Used(top, key), d) <= Guaranteed(top, key)) continue;
    std::int64_t unlent = UnlentElsewhere(leaf, key);
    if (unlent == 0) continue;
    std::int64_t free_after = SaturatingSub(SaturatingSub(Capacity(key), TotalUsed(key)), d);
    if (free_after >= unlent) continue;
    QuotaRefusal r = Numbers(leaf, d);
    r.key = key;
    r.requested = d;
    return r;
  }
  return std::nullopt;
}

bool QuotaBook::WithinGuarantee(std::size_t leaf, std::int64_t gpus_mgpu) const {
  bool declared = false;
  for (std::size_t a : Chain(leaf)) {
    auto it = queues_[a].policy->quota.find(kGpusKey);
    if (it == queues_[a].policy->quota.end()) continue;
    declared = true;
    if (SaturatingAdd(Used(a, kGpusKey), gpus_mgpu) > it->second.guaranteed) return false;
  }
  return declared;
}

bool QuotaBook::Borrowing(std::size_t q) const {
  return Used(q, kGpusKey) > Guaranteed(q, kGpusKey);
}

std::optional<QuotaRefusal> QuotaBook::OverGuarantee(std::size_t leaf) const {
  for (std::size_t a : Chain(leaf)) {
    auto it = queues_[a].policy->quota.find(kGpusKey);
    if (it == queues_[a].policy->quota.end()) continue;
    if (Used(a, kGpusKey) <= it->second.guaranteed) continue;
    QuotaRefusal r;
    r.queue = queues_[a].policy->path;
    r.key = kGpusKey;
    r.used = Used(a, kGpusKey);
    r.guaranteed = it->second.guaranteed;
    r.borrow_limit = it->second.borrow_limit;
    return r;
  }
  return std::nullopt;
}

QuotaRefusal QuotaBook::Numbers(std::size_t leaf, std::int64_t requested_mgpu) const {
  std::size_t at = leaf;
  for (std::size_t a : Chain(leaf)) {
    if (queues_[a].policy->quota.contains(kGpusKey)) {
      at = a;
      break;
    }
  }
  const auto& qp = *queues_[at].policy;
  QuotaRefusal r;
  r.queue = qp.path;
  r.key = kGpusKey;
  r.requested = requested_mgpu;
  r.used = Used(at, kGpusKey);
  if (auto it = qp.quota.find(kGpusKey); it != qp.quota.end()) {
    r.guaranteed = it->second.guaranteed;
    r.borrow_limit = it->second.borrow_limit;
  }
  if (qp.over_quota != model::OverQuota::kBorrow) r.borrow_limit = 0;
  r.borrowable_now = std::min(Headroom(leaf, kGpusKey), FreeToBorrow(leaf, kGpusKey));
  return r;
}

std::vector<std::size_t> QuotaBook::TakeChanged() {
  std::vector<std::size_t> out;
  out.swap(changed_);
  return out;
}

std::pair<int, std::int64_t> QuotaBook::FairKey(std::size_t q) const {
  if (fair_cache_[q]) return *fair_cache_[q];
  std::int64_t g = Guaranteed(q, kGpusKey);
  int below = (g > 0 && Used(q, kGpusKey) < g) ? 0 : 1;
  std::int64_t dominant = 0;
  for (const auto& key : {kGpusKey, kCpuKey, kMemoryKey}) {
    std::int64_t cap = Capacity(key);
    if (cap <= 0) continue;
    std::int64_t over = std::max<std::int64_t>(0, Used(q, key) - Guaranteed(q, key));
    // over <= cap in practice; divide first where a product could overflow.
    std::int64_t ppm = over > kMax / kPpm ? SaturatingMul(over / cap, kPpm) : over * kPpm / cap;
    dominant = std::max(dominant, ppm);
  }
  std::int64_t cap_gpus = Capacity(kGpusKey);
  std::int64_t history = 0;
  if (cap_gpus > 0) {
    std::int64_t avg = std::min<std::int64_t>(queues_[q].decayed / half_life_s_,
                                              std::numeric_limits<std::int64_t>::max() / kPpm);
    history = avg * kPpm / cap_gpus;
  }
  std::int64_t weight = 1;
  if (auto it = queues_[q].policy->quota.find(kGpusKey); it != queues_[q].policy->quota.end()) {
    weight = std::max<std::int64_t>(1, it->second.weight);
  }
  fair_cache_[q] = std::pair{below, SaturatingAdd(dominant, history) / weight};
  return *fair_cache_[q];
}

}  // namespace berth::sched
