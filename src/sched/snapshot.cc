#include "sched/snapshot.h"

#include <algorithm>

namespace berth::sched {

void HoldGpus(std::vector<NodeView>& nodes, const model::Resources& per_replica,
              const std::vector<ReplicaPlacement>& replicas, bool take) {
  const bool slice = model::IsSlice(per_replica);
  for (const auto& rp : replicas) {
    for (auto& n : nodes) {
      if (n.name != rp.node) continue;
      for (auto& g : n.gpus) {
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
}

}  // namespace berth::sched
