// Builders the unit tests share, so that every test's node looks the same
// and a change to the model's node is made here once.
#pragma once

#include <cstdint>
#include <string>

#include "model/node.h"
#include "sched/snapshot.h"

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

// The scheduler's view of a ready node `name` with `gpus` free, healthy
// H100-80GB GPUs ("<name>-<index>"), 64 cores and 512 GiB free.
inline sched::NodeView ReadyH100View(std::string name, std::uint32_t gpus) {
  sched::NodeView n;
  n.name = std::move(name);
  n.ready = true;
  n.cpu_millis_free = 64'000;
  n.memory_bytes_free = 512ULL << 30;
  for (std::uint32_t i = 0; i < gpus; ++i) {
    n.gpus.push_back({i, n.name + "-" + std::to_string(i), "H100-80GB", 80ULL << 30, true, true});
  }
  return n;
}

}  // namespace berth::tests
