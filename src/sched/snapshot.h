// What one scheduling cycle sees: an immutable copy of the cluster (nodes,
// their GPUs and what is free) and the jobs waiting to be placed. Built by
// the control loop from the store; the scheduler never reads anything else.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/job.h"
#include "model/node.h"

namespace berth::sched {

struct GpuView {
  std::uint32_t index = 0;
  std::string uuid;
  std::string model;
  std::uint64_t memory_bytes = 0;
  bool healthy = true;
  bool free = true;  // no run holds it
};

struct NodeView {
  std::string name;
  bool ready = false;
  std::map<std::string, std::string> labels;
  std::vector<model::Taint> taints;
  std::vector<GpuView> gpus;  // sorted by index
  std::uint64_t cpu_millis_free = 0;
  std::uint64_t memory_bytes_free = 0;
};

struct PendingJob {
  std::int64_t id = 0;
  std::string tenant;
  std::string queue;
  model::Priority priority = model::Priority::kNormal;
  TimeMs submitted_at_ms = 0;
  std::uint32_t replicas = 1;
  model::Resources resources;  // per replica
};

struct Snapshot {
  TimeMs now_ms = 0;
  std::vector<NodeView> nodes;      // sorted by name
  std::vector<PendingJob> pending;  // any order; the scheduler orders them
};

}  // namespace berth::sched
