// The seam between the agent and the GPUs it runs work on. NVML (real cards,
// loaded at run time) and the simulated inventory (declared in a cluster YAML
// file) are two implementations of this one interface; the rest of the agent
// never knows which one it has.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/node.h"

namespace berth::agent {

struct Discovery {
  std::vector<model::Gpu> gpus;
  std::string driver_version;  // empty when not known
  std::string cuda_version;
};

class GpuProvider {
 public:
  virtual ~GpuProvider() = default;
  // "nvml" or "simulated": reported as NodeInfo.gpu_provider.
  virtual std::string Name() const = 0;
  // The GPUs on this node now, with their health. Called at start and again
  // before each registration, so health changes reach berthd.
  virtual Result<Discovery> Discover() = 0;
};

}  // namespace berth::agent
