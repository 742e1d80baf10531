#include "sched/snapshot.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

namespace berth::sched {
namespace {

// Snapshots keep nodes sorted by name: a binary search finds the node; a
// list built in another order (a test's) falls back to a scan.
NodeView* FindNode(std::vector<NodeView>& nodes, const std::string& name) {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), name,
                             [](const NodeView& v, const std::string& n) { return v.name < n; });
  if (it != nodes.end() && it->name == name) return &*it;
  auto scan =
      std::find_if(nodes.begin(), nodes.end(), [&](const NodeView& v) { return v.name == name; });
  return scan == nodes.end() ? nullptr : &*scan;
}

}  // namespace

NodeView NodeViewOf(const model::NodeInfo& info, bool ready) {
  NodeView v;
  v.name = info.name;
  v.ready = ready;
  v.labels = info.labels;
  v.taints = info.taints;
  v.cpu_millis_free = std::uint64_t{info.cpus} * 1000;
  v.memory_bytes_free = info.memory_bytes;
  v.container_runtime = info.container_runtime == "podman";
  for (const auto& g : info.gpus) {
    GpuView gv;
    gv.index = g.index;
    gv.uuid = g.uuid;
    gv.model = g.model;
    gv.memory_bytes = g.memory_bytes;
    gv.healthy = g.health == model::Health::kHealthy;
    gv.nvlink_island = g.nvlink_island;
    gv.sharing = g.sharing;
    v.gpus.push_back(std::move(gv));
  }
  std::sort(v.gpus.begin(), v.gpus.end(),
            [](const GpuView& a, const GpuView& b) { return a.index < b.index; });
  return v;
}

void HoldGpus(std::vector<NodeView>& nodes, const model::Resources& per_replica,
              const std::vector<ReplicaPlacement>& replicas, bool take) {
  const bool slice = model::IsSlice(per_replica);
  for (const auto& rp : replicas) {
    NodeView* n = FindNode(nodes, rp.node);
    if (n == nullptr) continue;
    for (auto& g : n->gpus) {
      if (std::find(rp.gpu_indices.begin(), rp.gpu_indices.end(), g.index) ==
          rp.gpu_indices.end()) {
        continue;
      }
      if (!slice) {
        g.free = !take;
        continue;
      }
      const model::GpuSlice s = model::SliceOf(per_replica, g.memory_bytes);
      if (take) {
        g.shared_millis += s.millis;
        g.shared_bytes += s.bytes;
      } else {
        g.shared_millis -= std::min(g.shared_millis, s.millis);
        g.shared_bytes -= std::min(g.shared_bytes, s.bytes);
      }
      g.free = g.shared_millis == 0;
    }
  }
}

std::vector<DemandShape> DemandOf(const std::vector<PendingJob>& pending,
                                  const std::vector<RunningJob>& running, std::size_t max_pending) {
  // (gpus, model, share millis, share bytes, CPU, memory) -> replicas
  using Key = std::tuple<std::uint32_t, std::string_view, std::uint32_t, std::uint64_t,
                         std::uint64_t, std::uint64_t>;
  std::map<Key, std::int64_t> count;
  auto add = [&count](const model::Resources& r, std::uint32_t replicas) {
    if (model::IsSlice(r)) {
      count[{1, r.gpu_model, r.gpu_share_millis, r.gpu_share_bytes, r.cpu_millis,
             r.memory_bytes}] += replicas;
    } else if (r.gpus > 0) {
      count[{r.gpus, r.gpu_model, 0, 0, r.cpu_millis, r.memory_bytes}] += replicas;
    }
  };
  for (std::size_t i = 0; i < pending.size() && i < max_pending; ++i) {
    add(pending[i].resources, pending[i].replicas);
  }
  for (const auto& r : running) {
    add(r.resources, static_cast<std::uint32_t>(r.replicas.size()));
  }
  std::vector<DemandShape> out;
  out.reserve(count.size());
  for (const auto& [key, n] : count) {
    const auto& [gpus, gpu_model, millis, bytes, cpu, memory] = key;
    out.push_back({gpus, std::string(gpu_model), n, millis, bytes, cpu, memory});
  }
  return out;
}

PendingJob PendingJobOf(const RunningJob& r) {
  PendingJob p;
  p.id = r.id;
  p.tenant = r.tenant;
  p.queue = r.queue;
  p.priority = r.priority;
  p.submitted_at_ms = r.submitted_at_ms;
  p.replicas = static_cast<std::uint32_t>(std::max<std::size_t>(1, r.replicas.size()));
  p.resources = r.resources;
  p.preemptible = r.preemptible;
  p.node_selector = r.node_selector;
  p.tolerations = r.tolerations;
  p.pool = r.pool;
  p.topology = r.topology;
  p.max_runtime_ms = r.max_runtime_ms;
  p.predicted = r.predicted;
  p.service = r.service;
  p.image = r.image;
  return p;
}

RunningJob RunningJobOf(const PendingJob& p, std::vector<ReplicaPlacement> replicas,
                        TimeMs started_at_ms) {
  RunningJob r;
  r.id = p.id;
  r.tenant = p.tenant;
  r.queue = p.queue;
  r.priority = p.priority;
  r.preemptible = p.preemptible;
  r.started_at_ms = started_at_ms;
  r.resources = p.resources;
  r.replicas = std::move(replicas);
  r.max_runtime_ms = p.max_runtime_ms;
  r.submitted_at_ms = p.submitted_at_ms;
  r.node_selector = p.node_selector;
  r.tolerations = p.tolerations;
  r.pool = p.pool;
  r.topology = p.topology;
  r.predicted = p.predicted;
  r.service = p.service;
  r.image = p.image;
  return r;
}

}  // namespace berth::sched
