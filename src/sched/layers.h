// The node layer of a waiting job's explanation when its reason is about
// something else (behind its queue's head, over quota, over budget): of the
// nodes, how many could ever take one of its replicas, and what rules the
// others out, each a static node cause of model::Reason (not ready,
// cordoned, outside its pools, selector, taint, GPU model, GPU memory, too
// few GPUs in total, unhealthy, topology). What is free now is left out: it
// is the cycle's to say, and will have changed by the job's turn. Pure and
// cheap (one pass over the nodes): the API computes it when `why` is asked.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/policy.h"
#include "sched/snapshot.h"

namespace berth::sched {

struct NodeLayer {
  std::int64_t nodes = 0;
  std::int64_t could_take = 0;
  // Cause -> nodes it rules out, the cause ruling out the most first (ties
  // by name): what would have to change least comes last.
  std::vector<std::pair<std::string, std::int64_t>> excluded;
};

// `nodes` as a snapshot has them; the job's pools from its own `pool` or its
// queue's (`policy`), as a cycle resolves them.
NodeLayer NodeLayerOf(const std::vector<NodeView>& nodes, const model::Policy& policy,
                      const PendingJob& job);

}  // namespace berth::sched
