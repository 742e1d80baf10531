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
  std::map<std::string, std::int64_t> causes;
  for (std::size_t n = 0; n < cluster.size(); ++n) {
    const std::string_view cause = cluster.StaticCause(n, shape);
    if (cause.empty()) {
      ++layer.could_take;
    } else {
      ++causes[std::string(cause)];
    }
  }
  layer.excluded.assign(causes.begin(), causes.end());
  std::stable_sort(layer.excluded.begin(), layer.excluded.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return layer;
}

}  // namespace berth::sched
