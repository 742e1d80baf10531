// The seam between the agent and the GPUs it runs work on. NVML (real cards,
// loaded at run time) and the simulated inventory (declared in a cluster YAML
// file) are two implementations of this one interface; the rest of the agent
// never knows which one it has.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/node.h"
#include "model/telemetry.h"

namespace berth::agent {

struct Discovery {
  std::vector<model::Gpu> gpus;
  std::string driver_version;  // empty when not known
  std::string cuda_version;
};

// A run holding (part of) one GPU, as the agent knows it from the run's
// StartRun order: what telemetry attributes a GPU's reading to and, for the
// simulated provider, what it derives the reading from. A run on several
// GPUs is one occupant per GPU.
struct GpuOccupant {
  std::uint32_t gpu = 0;  // node-local index
  std::string run_id;
  TimeMs started_at_ms = 0;  // when the job's process started (unix ms)
  model::LoadProfile load{};
  // A slice of the GPU (resources.gpu_share); both 0: the whole GPU.
  std::uint32_t gpu_share_millis = 0;
  std::uint64_t gpu_share_bytes = 0;
};

class GpuProvider {
 public:
  virtual ~GpuProvider() = default;
  // "nvml" or "simulated": reported as NodeInfo.gpu_provider.
  virtual std::string Name() const = 0;
  // The GPUs on this node now, with their health. Called at start and again
  // before each registration, so health changes reach berthd.
  virtual Result<Discovery> Discover() = 0;
  // One reading per GPU of the node at `now` (unix ms), in index order, with
  // the run ids of the occupants on each GPU (node is left empty: berthd
  // fills it in). Called at the agent's telemetry interval, on the same
  // thread as Discover().
  virtual Result<std::vector<model::GpuSample>> Sample(std::span<const GpuOccupant> occupants,
                                                       TimeMs now) = 0;
};

}  // namespace berth::agent
