// The simulated GPU provider: reports the GPUs a NodeInfo declares (usually
// one node of a cluster file, see sim_cluster.h) as if NVML had found them.
// Jobs still run as real processes; only the GPUs are imaginary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string_view>

#include "agent/gpu_provider.h"
#include "model/node.h"

namespace berth::agent {

// Faults are injected through `faults_file`, read at every discovery (the
// agent polls health every few seconds): one line per failed GPU,
//   <gpu index> <what NVML would report, e.g. "Xid 79: GPU has fallen off the bus">
// with '#' comments. The GPU reports unhealthy with that detail until its
// line is removed. No file: no faults.
class SimulatedProvider final : public GpuProvider {
 public:
  explicit SimulatedProvider(model::NodeInfo node, std::filesystem::path faults_file = {})
      : node_(std::move(node)), faults_file_(std::move(faults_file)) {}
  std::string Name() const override { return "simulated"; }
  Result<Discovery> Discover() override;

 private:
  model::NodeInfo node_;
  std::filesystem::path faults_file_;
};

// The GPU faults a faults file declares: index -> detail. Errors name the
// line.
Result<std::map<std::uint32_t, std::string>> ReadSimulatedFaults(std::string_view text);

// The node an agent simulates when given no cluster file: this host's name,
// CPUs and memory, label berth.dev/simulated=true, and eight H100-80GB GPUs
// (80Gi each) on one NVSwitch island; driver "sim", CUDA "12.4".
model::NodeInfo DefaultSimulatedNode();

}  // namespace berth::agent
