#include "sched/fifo_scheduler.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

namespace berth::sched {
namespace {

using model::Reason;
using model::ReasonCode;

// Why one node cannot take one replica now; empty when it can.
std::string_view RejectCause(const NodeView& node, const model::Resources& r,
                             bool needs_container) {
  if (!node.ready) return model::kCauseNotReady;
  if (node.cordoned) return model::kCauseCordoned;
  if (needs_container && !node.container_runtime) return model::kCauseNoContainerRuntime;
  // Job specs carry no tolerations yet, so a NoSchedule taint keeps every
  // job off the node (the scheduling core adds tolerations).
  for (const auto& t : node.taints) {
    if (t.effect == "NoSchedule") return model::kCauseTaint;
  }
  if (r.gpus > 0) {
    std::uint32_t model_match = 0;
    std::uint32_t memory_match = 0;
    std::uint32_t free_match = 0;
    for (const auto& g : node.gpus) {
      if (!r.gpu_model.empty() && g.model != r.gpu_model) continue;
      ++model_match;
      if (g.memory_bytes < r.gpu_memory_bytes) continue;
      ++memory_match;
      if (g.healthy && g.free) ++free_match;
    }
    if (model_match == 0) return model::kCauseGpuModel;
    if (memory_match == 0) return model::kCauseGpuMemory;
    if (free_match < r.gpus) return model::kCauseTooFewGpus;
  }
  if (r.cpu_millis > node.cpu_millis_free) return model::kCauseCpu;
  if (r.memory_bytes > node.memory_bytes_free) return model::kCauseMemory;
  return {};
}

// Takes `r` from `node` (which must fit) and returns the GPU indices taken.
std::vector<std::uint32_t> Take(NodeView& node, const model::Resources& r) {
  std::vector<std::uint32_t> taken;
  for (auto& g : node.gpus) {
    if (taken.size() == r.gpus) break;
    if (!g.free || !g.healthy) continue;
    if (!r.gpu_model.empty() && g.model != r.gpu_model) continue;
    if (g.memory_bytes < r.gpu_memory_bytes) continue;
    g.free = false;
    taken.push_back(g.index);
  }
  node.cpu_millis_free -= r.cpu_millis;
  node.memory_bytes_free -= r.memory_bytes;
  return taken;
}

// Tries to place every replica of `job` on `nodes` (first fit). On success
// `nodes` holds the allocation; on failure it is left untouched and the
// reason says why the first unplaceable replica did not fit.
bool PlaceGang(const PendingJob& job, std::vector<NodeView>& nodes, Placement& out, Reason& why) {
  std::vector<NodeView> trial = nodes;
  out = Placement{job.id, {}};
  for (std::uint32_t replica = 0; replica < job.replicas; ++replica) {
    bool placed = false;
    Reason miss{ReasonCode::kNoNodeFits, {}, {}};
    for (auto& node : trial) {
      auto cause = RejectCause(node, job.resources, !job.image.empty());
      if (cause.empty()) {
        out.replicas.push_back({replica, node.name, Take(node, job.resources)});
        placed = true;
        break;
      }
      ++miss.counts[std::string(cause)];
    }
    if (!placed) {
      // A later replica failing where the first fitted means the gang as a
      // whole is too big for what is free, not that no node fits one replica.
      if (replica > 0) miss.counts[std::string(model::kCauseGang)] = replica;
      miss.counts["nodes"] = static_cast<std::int64_t>(nodes.size());
      miss.counts["gpus_per_replica"] = job.resources.gpus;
      miss.counts["replicas"] = job.replicas;
      why = std::move(miss);
      return false;
    }
  }
  nodes = std::move(trial);
  return true;
}

}  // namespace

Plan FifoScheduler::Schedule(const Snapshot& snapshot) const {
  Plan plan;
  std::vector<NodeView> nodes = snapshot.nodes;
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeView& a, const NodeView& b) { return a.name < b.name; });

  // Queues are independent FIFOs, visited in name order for determinism.
  std::map<std::pair<std::string, std::string>, std::vector<const PendingJob*>> queues;
  for (const auto& job : snapshot.pending) queues[{job.tenant, job.queue}].push_back(&job);

  for (auto& [key, jobs] : queues) {
    std::sort(jobs.begin(), jobs.end(), [](const PendingJob* a, const PendingJob* b) {
      return std::tie(a->submitted_at_ms, a->id) < std::tie(b->submitted_at_ms, b->id);
    });
    const PendingJob* blocker = nullptr;
    std::int64_t position = 0;
    for (const PendingJob* job : jobs) {
      if (blocker != nullptr) {
        ++position;
        plan.pending.push_back(
            {job->id, Reason{ReasonCode::kBehindInQueue,
                             {{"blocked_by", blocker->id}, {"position", position}},
                             {}}});
        continue;
      }
      if (nodes.empty()) {
        plan.pending.push_back({job->id, Reason{ReasonCode::kNoNodes, {}, {}}});
        blocker = job;
        continue;
      }
      Placement placement;
      Reason why;
      if (PlaceGang(*job, nodes, placement, why)) {
        plan.placements.push_back(std::move(placement));
      } else {
        plan.pending.push_back({job->id, std::move(why)});
        blocker = job;
      }
    }
  }
  return plan;
}

}  // namespace berth::sched
