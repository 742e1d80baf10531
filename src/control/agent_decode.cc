#include "control/agent_decode.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

namespace berth::server {

bool IsNodeAddress(std::string_view address) {
  if (address.empty() || address.size() >= INET6_ADDRSTRLEN) return false;
  const std::string text(address);
  std::array<unsigned char, sizeof(in6_addr)> buf{};
  return ::inet_pton(AF_INET, text.c_str(), buf.data()) == 1 ||
         ::inet_pton(AF_INET6, text.c_str(), buf.data()) == 1;
}

std::string AddressOfPeer(std::string_view peer) {
  std::string_view host;
  if (peer.starts_with("ipv4:")) {
    host = peer.substr(5);
    host = host.substr(0, host.rfind(':'));
  } else if (peer.starts_with("ipv6:")) {
    host = peer.substr(5);
    const auto open = host.find('[');
    const auto close = host.find(']');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
      return {};
    }
    host = host.substr(open + 1, close - open - 1);
    // The address of an IPv4 client of a dual-stack socket.
    if (host.starts_with("::ffff:") && IsNodeAddress(host.substr(7)) &&
        host.substr(7).find('.') != std::string_view::npos) {
      host = host.substr(7);
    }
  } else {
    // A unix socket or berthd's own in-process agent: this host.
    return "127.0.0.1";
  }
  // A link-local address's zone ("fe80::1%eth0") is not usable by another host.
  if (host.find('%') != std::string_view::npos || !IsNodeAddress(host)) return {};
  return std::string(host);
}

Status CheckNodeInventory(const model::NodeInfo& node) {
  if (node.name.empty()) return InvalidField("node.name", "an agent must name its node");
  if (!node.address.empty() && !IsNodeAddress(node.address)) {
    return InvalidField("node.address",
                        fmt::format("'{}' is not an IPv4 or IPv6 address; give berth-agent "
                                    "--advertise-address an IP literal (no host name), or leave "
                                    "it out and berthd uses the address the agent connects from",
                                    node.address.substr(0, 64)));
  }
  if (node.cpus > kMaxNodeCpus) {
    return InvalidField("node.cpus", fmt::format("{} CPUs is more than a node may declare ({})",
                                                 node.cpus, kMaxNodeCpus));
  }
  if (node.memory_bytes > kMaxNodeMemoryBytes) {
    return InvalidField("node.memory_bytes",
                        fmt::format("{} bytes is more than a node may declare (1 PiB, {})",
                                    node.memory_bytes, kMaxNodeMemoryBytes));
  }
  if (node.gpus.size() > kMaxNodeGpus) {
    return InvalidField("node.gpus", fmt::format("{} GPUs is more than a node may declare ({})",
                                                 node.gpus.size(), kMaxNodeGpus));
  }
  BERTH_RETURN_IF_ERROR(CheckContainerRuntime(node.container_runtime, "node.container_runtime"));
  std::set<std::uint32_t> seen;
  for (std::size_t i = 0; i < node.gpus.size(); ++i) {
    const model::Gpu& g = node.gpus[i];
    if (!seen.insert(g.index).second) {
      return InvalidField(fmt::format("node.gpus[{}].index", i),
                          fmt::format("GPU index {} is declared twice", g.index));
    }
    if (g.memory_bytes > kMaxGpuMemoryBytes) {
      return InvalidField(fmt::format("node.gpus[{}].memory_bytes", i),
                          fmt::format("{} bytes is more than a GPU may declare (1 PiB, {})",
                                      g.memory_bytes, kMaxGpuMemoryBytes));
    }
  }
  return Ok();
}

Status CheckContainerRuntime(std::string_view runtime, std::string_view field) {
  if (runtime.empty() || runtime == "podman") return Ok();
  return InvalidField(std::string(field),
                      fmt::format("container runtime '{}' is not one berth knows; an agent "
                                  "reports \"podman\" or nothing",
                                  runtime));
}

Result<std::string> ContainerRuntimeFromProto(const berth::v1::ContainerRuntimeChanged& m) {
  BERTH_RETURN_IF_ERROR(
      CheckContainerRuntime(m.container_runtime(), "container_runtime.container_runtime"));
  return m.container_runtime();
}

store::RunExit ExitFromProto(const berth::v1::RunExited& m) {
  store::RunExit e;
  e.run_id = m.run_id();
  e.exit_code = m.exit_code();
  e.signal = m.signal();
  if (m.started_at_ms() != 0) e.started_at_ms = m.started_at_ms();
  e.ended_at_ms = m.ended_at_ms();
  // The agent sends the name berthd ordered the stop with (or its own:
  // max_runtime, fenced); one this berthd does not know is kUnknown.
  e.stopped_for = model::ParseStopCause(m.stopped_for()).value_or(model::StopCause::kUnknown);
  e.start_error = m.start_error();
  if (e.stopped_for != model::StopCause::kNone) e.clean_stop = m.clean_stop();
  if (m.last_checkpoint_ms() > 0) e.last_checkpoint_ms = m.last_checkpoint_ms();
  e.never_started = m.never_started();
  e.oom_kills = m.oom_kills();
  e.memory_peak_bytes = m.memory_peak_bytes();
  e.memory_limit_bytes = m.memory_limit_bytes();
  if (m.identity_refused()) e.failure_class = "run_identity";
  return e;
}

model::GpuSample SampleFromProto(const std::string& node, const berth::v1::GpuSample& p) {
  model::GpuSample s;
  s.at_ms = p.at_ms();
  s.node = node;
  s.gpu = p.gpu();
  s.uuid = p.uuid();
  s.util_pct = std::min(p.util_pct(), 100U);
  s.mem_util_pct = std::min(p.mem_util_pct(), 100U);
  s.memory_used_bytes = p.memory_used_bytes();
  s.memory_total_bytes = p.memory_total_bytes();
  s.temperature_c = p.temperature_c();
  s.power_mw = p.power_mw();
  s.ecc_sbe_total = p.ecc_sbe_total();
  s.ecc_dbe_total = p.ecc_dbe_total();
  s.last_xid = p.last_xid();
  s.run_ids.assign(p.run_ids().begin(), p.run_ids().end());
  return s;
}

}  // namespace berth::server
