// The node layer of a waiting job's explanation when its reason is about
// something else (behind its queue's head, over quota, over budget): of the
// nodes, how many could ever take one of its replicas, and what rules the
// others out (every cause of each node, and how many nodes each cause
// alone keeps out), each a static node cause of model::Reason (not ready,
// cordoned, outside its pools, selector, taint, GPU model, GPU memory, too
// few GPUs in total, unhealthy, topology). What is free now is left out: it
// is the cycle's to say, and will have changed by the job's turn. Pure and
// cheap (one pass over the nodes): the API computes it when `why` is asked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/policy.h"
#include "sched/snapshot.h"

namespace berth::sched {

struct NodeLayer {
  std::int64_t nodes = 0;
  std::int64_t could_take = 0;
  // Cause -> nodes it rules out (a node may have several causes: each
  // counts it), ranked by what would have to change least: the cause whose
  // lifting alone opens the most nodes (`alone`) first, then the one ruling
  // out the most, then by name.
  std::vector<std::pair<std::string, std::int64_t>> excluded;
  // Cause -> nodes it alone rules out: the nodes where it is the only cause,
  // which lifting that one cause would let take a replica. Every cause of
  // `excluded` is here, 0 when it never stands alone.
  std::map<std::string, std::int64_t, std::less<>> alone;
};

// `nodes` as a snapshot has them; the job's pools from its own `pool` or its
// queue's (`policy`), as a cycle resolves them.
NodeLayer NodeLayerOf(const std::vector<NodeView>& nodes, const model::Policy& policy,
                      const PendingJob& job);

}  // namespace berth::sched
