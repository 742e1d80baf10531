#include "agent/sim_provider.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include "agent/host.h"
#include "agent/sim_cluster.h"

namespace berth::agent {

Result<std::map<std::uint32_t, std::string>> ReadSimulatedFaults(std::string_view text) {
  std::map<std::uint32_t, std::string> faults;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) {
      line.remove_prefix(1);
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
      line.remove_suffix(1);
    }
    if (line.empty()) continue;
    std::uint32_t index = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), index);
    if (ec != std::errc{} || (ptr != line.data() + line.size() && *ptr != ' ' && *ptr != '\t')) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("faults file line {}: start with a GPU index, e.g. "
                              "\"3 Xid 79: GPU has fallen off the bus\"",
                              line_no));
    }
    std::string_view detail = line.substr(static_cast<std::size_t>(ptr - line.data()));
    while (!detail.empty() && std::isspace(static_cast<unsigned char>(detail.front()))) {
      detail.remove_prefix(1);
    }
    faults[index] = detail.empty() ? "injected fault" : std::string(detail);
  }
  return faults;
}

Result<Discovery> SimulatedProvider::Discover() {
  Discovery d{node_.gpus, node_.driver_version, node_.cuda_version};
  if (faults_file_.empty()) return d;
  std::ifstream in(faults_file_);
  if (!in) return d;  // no faults injected
  std::stringstream text;
  text << in.rdbuf();
  auto faults = ReadSimulatedFaults(text.str());
  if (!faults) {
    return Fail(faults.error().code,
                fmt::format("{}: {}", faults_file_.string(), faults.error().message));
  }
  for (auto& gpu : d.gpus) {
    if (auto it = faults->find(gpu.index); it != faults->end()) {
      gpu.health = model::Health::kUnhealthy;
      gpu.health_detail = it->second;
    }
  }
  return d;
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
