// The simulated GPU provider: reports the GPUs a NodeInfo declares (usually
// one node of a cluster file, see sim_cluster.h) as if NVML had found them.
// Jobs still run as real processes; only the GPUs are imaginary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string_view>
#include <vector>

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
  // Readings derived from the occupants' load profiles (docs/jobs.md,
  // "Simulated load"): per GPU, utilization is the sum over its occupants of
  // ProfileUtilization at the run's age (a slice adds share_millis/1000 of
  // it), capped at 100, plus a deterministic jitter of +-2 (a hash of the
  // UUID and the second; none on 0). Memory used is each occupant's
  // memory_pct of the GPU's (or the slice's) memory, summed. From the
  // utilization: mem_util_pct = 60% of it, temperature 30 + util/2 C, power
  // 60 W + util% of (board power - 60 W). ECC counters are 0; last_xid is
  // the "Xid NN" of the GPU's last injected fault.
  Result<std::vector<model::GpuSample>> Sample(std::span<const GpuOccupant> occupants,
                                               TimeMs now) override;

 private:
  // The faults file's faults now; an unreadable file counts as none. Keeps
  // last_xid_ up to date.
  Result<std::map<std::uint32_t, std::string>> ReadFaults();

  model::NodeInfo node_;
  std::filesystem::path faults_file_;
  std::map<std::uint32_t, std::uint32_t> last_xid_;  // GPU index -> last Xid seen
};

// The Xid number in a health detail such as "Xid 79: GPU has fallen off the
// bus"; 0 when there is none.
std::uint32_t XidOf(std::string_view detail);

// A GPU model's board power in watts, for simulated power readings: H100 700,
// A100 400, L40S 350, anything else 300.
std::uint32_t SimulatedBoardPowerWatts(std::string_view model);

// The GPU faults a faults file declares: index -> detail. Errors name the
// line.
Result<std::map<std::uint32_t, std::string>> ReadSimulatedFaults(std::string_view text);

// The node an agent simulates when given no cluster file: this host's name,
// CPUs and memory, label berth.dev/simulated=true, and eight H100-80GB GPUs
// (80Gi each) on one NVSwitch island; driver "sim", CUDA "12.4".
model::NodeInfo DefaultSimulatedNode();

}  // namespace berth::agent
