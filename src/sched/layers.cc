#include "sched/layers.h"

#include <algorithm>
#include <map>

#include "sched/placement.h"

namespace berth::sched {
namespace {

// The pools of the job's queue: its own `pools`, else its nearest
// ancestor's that lists some (QuotaBook::Pools).
std::vector<std::string> QueuePools(const model::Policy& policy, std::string path) {
  while (!path.empty()) {
    const model::QueuePolicy* q = policy.FindQueue(path);
    if (q == nullptr) return {};
    if (!q->pools.empty()) return q->pools;
    if (q->parent.empty()) return {};
    path = q->parent;
  }
  return {};
}

}  // namespace

NodeLayer NodeLayerOf(const std::vector<NodeView>& nodes, const model::Policy& policy,
                      const PendingJob& job) {
  JobShape shape;
  shape.replicas = job.replicas;
  shape.resources = job.resources;
  shape.node_selector = job.node_selector;
  shape.tolerations = job.tolerations;
  shape.topology = job.topology;
  shape.needs_container = !job.image.empty();
  const std::vector<std::string> allowed = QueuePools(policy, job.tenant + "/" + job.queue);
  if (!job.pool.empty()) {
    const model::Pool* p = policy.FindPool(job.pool);
    if (p != nullptr &&
        (allowed.empty() || std::find(allowed.begin(), allowed.end(), job.pool) != allowed.end())) {
      shape.pools.push_back(p);
    } else {
      shape.pool_forbidden = true;
    }
  } else {
    for (const auto& name : allowed) {
      if (const model::Pool* p = policy.FindPool(name)) shape.pools.push_back(p);
    }
  }
  const Cluster cluster(nodes);
  NodeLayer layer;
  layer.nodes = static_cast<std::int64_t>(cluster.size());
  std::map<std::string, std::int64_t, std::less<>> ruled_out;
  std::vector<std::string_view> found;  // one node's causes, reused
  for (std::size_t n = 0; n < cluster.size(); ++n) {
    cluster.StaticCauses(n, shape, found);
    if (found.empty()) {
      ++layer.could_take;
      continue;
    }
    for (std::string_view cause : found) {
      ++ruled_out.try_emplace(std::string(cause), 0).first->second;
      std::int64_t& alone = layer.alone.try_emplace(std::string(cause), 0).first->second;
      if (found.size() == 1) ++alone;
    }
  }
  layer.excluded.assign(ruled_out.begin(), ruled_out.end());
  // Least change first: the most nodes one change opens, then the most
  // nodes ruled out, then the cause's name.
  std::sort(layer.excluded.begin(), layer.excluded.end(), [&](const auto& a, const auto& b) {
    const std::int64_t alone_a = layer.alone.find(a.first)->second;
    const std::int64_t alone_b = layer.alone.find(b.first)->second;
    if (alone_a != alone_b) return alone_a > alone_b;
    if (a.second != b.second) return a.second > b.second;
    return a.first < b.first;
  });
  return layer;
}

}  // namespace berth::sched
