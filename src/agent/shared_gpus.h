// Which GPUs of a node the operator puts in sharing mode: "all", or a list
// of node-local indices. Written as `--shared-gpus all|0,1` for berth-agent
// and `shared_gpus: all | [0, 1]` in a simulated cluster (docs/inventory.md).
// GPUs in sharing mode take slices (resources.gpu_share) of several jobs.
#pragma once

#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/node.h"

namespace berth::agent {

struct SharedGpus {
  bool all = false;
  std::set<std::uint32_t> indices;
  bool empty() const { return !all && indices.empty(); }
};

// Parses "all", "" (none) or "0,1,3"; an error names what is wrong.
Result<SharedGpus> ParseSharedGpus(std::string_view text);

// Marks the GPUs `shared` selects; an index the node lacks is an error.
Status MarkShared(const SharedGpus& shared, std::vector<model::Gpu>& gpus);

}  // namespace berth::agent
