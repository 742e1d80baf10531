// The simulated GPU provider: reports the GPUs a NodeInfo declares (usually
// one node of a cluster file, see sim_cluster.h) as if NVML had found them.
// Jobs still run as real processes; only the GPUs are imaginary.
#pragma once

#include "agent/gpu_provider.h"
#include "model/node.h"

namespace berth::agent {

class SimulatedProvider final : public GpuProvider {
 public:
  explicit SimulatedProvider(model::NodeInfo node) : node_(std::move(node)) {}
  std::string Name() const override { return "simulated"; }
  Result<Discovery> Discover() override;

 private:
  model::NodeInfo node_;
};

// The node an agent simulates when given no cluster file: this host's name,
// CPUs and memory, label berth.dev/simulated=true, and eight H100-80GB GPUs
// (80Gi each) on one NVSwitch island; driver "sim", CUDA "12.4".
model::NodeInfo DefaultSimulatedNode();

}  // namespace berth::agent
