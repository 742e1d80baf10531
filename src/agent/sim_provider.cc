#include "agent/sim_provider.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include "agent/host.h"
#include "agent/sim_cluster.h"
#include "model/job.h"

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

std::uint32_t XidOf(std::string_view detail) {
  auto at = detail.find("Xid ");
  if (at == std::string_view::npos) return 0;
  detail.remove_prefix(at + 4);
  std::uint32_t xid = 0;
  auto [ptr, ec] = std::from_chars(detail.data(), detail.data() + detail.size(), xid);
  return ec == std::errc{} ? xid : 0;
}

std::uint32_t SimulatedBoardPowerWatts(std::string_view model) {
  if (model.starts_with("H100")) return 700;
  if (model.starts_with("A100")) return 400;
  if (model.starts_with("L40S")) return 350;
  return 300;
}

Result<std::map<std::uint32_t, std::string>> SimulatedProvider::ReadFaults() {
  std::map<std::uint32_t, std::string> none;
  if (faults_file_.empty()) return none;
  std::ifstream in(faults_file_);
  if (!in) return none;  // no faults injected
  std::stringstream text;
  text << in.rdbuf();
  auto faults = ReadSimulatedFaults(text.str());
  if (!faults) {
    return Fail(faults.error().code,
                fmt::format("{}: {}", faults_file_.string(), faults.error().message));
  }
  for (const auto& [index, detail] : *faults) {
    if (auto xid = XidOf(detail); xid != 0) last_xid_[index] = xid;
  }
  return faults;
}

namespace {

// FNV-1a: the same jitter for the same GPU and second on every build.
std::uint64_t Fnv1a(std::string_view s, std::uint64_t h = 14695981039346656037ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::uint32_t Jittered(std::uint32_t util, const std::string& uuid, TimeMs now) {
  if (util == 0) return 0;
  const std::string second = std::to_string(now / 1000);
  const auto jitter = static_cast<std::int64_t>(Fnv1a(second, Fnv1a(uuid)) % 5) - 2;
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(util + jitter, 0, 100));
}

}  // namespace

Result<std::vector<model::GpuSample>> SimulatedProvider::Sample(
    std::span<const GpuOccupant> occupants, TimeMs now) {
  auto faults = ReadFaults();
  if (!faults) return std::unexpected(faults.error());
  std::vector<model::GpuSample> out;
  out.reserve(node_.gpus.size());
  for (const auto& gpu : node_.gpus) {
    model::GpuSample s;
    s.at_ms = now;
    s.gpu = gpu.index;
    s.uuid = gpu.uuid;
    s.memory_total_bytes = gpu.memory_bytes;
    std::uint64_t util = 0;
    for (const auto& o : occupants) {
      if (o.gpu != gpu.index) continue;
      s.run_ids.push_back(o.run_id);
      const std::uint32_t profile = model::ProfileUtilization(o.load, now - o.started_at_ms);
      std::uint64_t memory = gpu.memory_bytes;
      if (o.gpu_share_millis > 0 || o.gpu_share_bytes > 0) {
        // berthd sends what the slice holds; derive whichever half is 0.
        model::Resources r;
        r.gpu_share_millis = o.gpu_share_millis;
        r.gpu_share_bytes = o.gpu_share_millis > 0 ? 0 : o.gpu_share_bytes;
        const model::GpuSlice slice = model::SliceOf(r, gpu.memory_bytes);
        util += std::uint64_t{profile} * slice.millis / 1000;
        memory = std::min(o.gpu_share_bytes > 0 ? o.gpu_share_bytes : slice.bytes, memory);
      } else {
        util += profile;
      }
      s.memory_used_bytes +=
          memory / 100 * o.load.memory_pct + memory % 100 * o.load.memory_pct / 100;
    }
    s.memory_used_bytes = std::min(s.memory_used_bytes, s.memory_total_bytes);
    s.util_pct =
        Jittered(static_cast<std::uint32_t>(std::min<std::uint64_t>(util, 100)), gpu.uuid, now);
    s.mem_util_pct = s.util_pct * 6 / 10;
    s.temperature_c = 30 + static_cast<std::int32_t>(s.util_pct / 2);
    const std::uint32_t board_mw = SimulatedBoardPowerWatts(gpu.model) * 1000;
    s.power_mw = 60'000 + s.util_pct * (board_mw - 60'000) / 100;
    if (auto it = last_xid_.find(gpu.index); it != last_xid_.end()) s.last_xid = it->second;
    out.push_back(std::move(s));
  }
  return out;
}

Result<Discovery> SimulatedProvider::Discover() {
  Discovery d{node_.gpus, node_.driver_version, node_.cuda_version};
  auto faults = ReadFaults();
  if (!faults) return std::unexpected(faults.error());
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
