#include "agent/sim_provider.h"

#include "agent/host.h"
#include "agent/sim_cluster.h"

namespace berth::agent {

Result<Discovery> SimulatedProvider::Discover() {
  return Discovery{node_.gpus, node_.driver_version, node_.cuda_version};
}

model::NodeInfo DefaultSimulatedNode() {
  model::NodeInfo node;
  node.name = HostName();
  node.hostname = node.name;
  node.labels["berth.dev/simulated"] = "true";
  node.cpus = HostCpuCount();
  node.memory_bytes = HostMemoryBytes();
  node.driver_version = "sim";
  node.cuda_version = "12.4";
  node.gpu_provider = "simulated";
  // One island of all eight: an NVSwitch baseboard, where every pair talks.
  node.gpus = SimulatedGpus(node.name, "H100-80GB", 80ULL << 30, 8, {{0, 1, 2, 3, 4, 5, 6, 7}});
  return node;
}

}  // namespace berth::agent
