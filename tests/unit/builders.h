// Builders the unit tests share, so that every test's node looks the same
// and a change to the model's node is made here once.
#pragma once

#include <cstdint>
#include <string>

#include "model/node.h"

namespace berth::tests {

// Node `name` with `cpus` cores and `gpus` H100-80GB GPUs, indices 0..gpus-1
// and UUIDs "uuid-<index>".
inline model::NodeInfo H100Node(std::uint32_t gpus, std::string name = "n1",
                                std::uint32_t cpus = 8) {
  model::NodeInfo n;
  n.name = std::move(name);
  n.cpus = cpus;
  for (std::uint32_t i = 0; i < gpus; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = "uuid-" + std::to_string(i);
    g.model = "H100-80GB";
    g.memory_bytes = 80ULL << 30;
    n.gpus.push_back(g);
  }
  return n;
}

}  // namespace berth::tests
