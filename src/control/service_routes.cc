#include "control/service_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace berth::server {

std::string ReplicaServerId(std::int64_t job_id) {
  return fmt::format("job-{}", job_id);
}

std::optional<std::int64_t> ReplicaOfServer(std::string_view server_id) {
  if (!server_id.starts_with("job-")) return std::nullopt;
  const std::string_view digits = server_id.substr(4);
  std::int64_t id = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size() || id <= 0) return std::nullopt;
  return id;
}

gateway::Route RouteOf(const store::ServiceRecord& service,
                       const std::vector<RoutedReplica>& replicas,
                       const std::map<std::string, RouteNode>& nodes, const GatewayApi& api) {
  gateway::Route route;
  route.tenant = service.tenant;
  route.service = service.name;
  route.hold_timeout_ms = kServiceHoldTimeoutMs;
  if (service.spec.access == model::ServiceAccess::kTenant) {
    route.auth_url =
        fmt::format("{}/v1/services/{}/{}/access", api.url, service.tenant, service.name);
    route.auth_address = api.address;
  }
  for (const RoutedReplica& r : replicas) {
    if (!r.ready || r.stopping || r.port == 0 || r.port > 65535) continue;
    auto node = nodes.find(r.node);
    if (node == nodes.end() || !node->second.ready || node->second.address.empty()) continue;
    route.backends.push_back(
        {ReplicaServerId(r.job_id), node->second.address, static_cast<int>(r.port), 100, false});
  }
  // One order whatever the store returned: the gateway's plan is stable.
  std::sort(
      route.backends.begin(), route.backends.end(),
      [](const gateway::RouteBackend& a, const gateway::RouteBackend& b) { return a.id < b.id; });
  return route;
}

bool GatewayMeasures(model::AutoscaleSignal signal) {
  return signal != model::AutoscaleSignal::kMetric;
}

sched::AutoscaleSample SampleOf(const gateway::RouteStats& stats,
                                const gateway::RouteLatency* latency, model::AutoscaleSignal signal,
                                RouteCounters& last, TimeMs now) {
  sched::AutoscaleSample s;
  s.time_ms = now;
  const std::int64_t waiting =
      std::max<std::int64_t>(stats.queued, 0) + std::max<std::int64_t>(stats.held_now, 0);
  s.in_flight = std::max<std::int64_t>(stats.current, 0) + waiting;
  // Requests that arrived since the last sample: routed to a replica, or
  // held at zero (a held request is counted once more when it is routed;
  // the idle clock only needs to know one arrived).
  auto delta = [](std::int64_t now_total, std::int64_t before) {
    return now_total >= before ? now_total - before : std::max<std::int64_t>(now_total, 0);
  };
  const std::int64_t routed = last.seen ? delta(stats.total, last.total) : 0;
  const std::int64_t held = last.seen ? delta(stats.held_total, last.held_total) : 0;
  s.requests = routed + held;
  switch (signal) {
    case model::AutoscaleSignal::kConcurrency:
      s.value_milli = s.in_flight * 1000;
      break;
    case model::AutoscaleSignal::kRps: {
      const std::int64_t period = last.seen ? now - last.at_ms : 0;
      s.value_milli = period > 0 ? routed * 1000 * 1000 / period : 0;
      break;
    }
    case model::AutoscaleSignal::kQueueDepth:
      s.value_milli = waiting * 1000;
      break;
    case model::AutoscaleSignal::kP95Latency:
      // No request logged: no latency to speak of (0, as an idle service's).
      s.value_milli = latency != nullptr && latency->requests > 0
                          ? static_cast<std::int64_t>(std::llround(latency->p95_ms * 1000))
                          : 0;
      break;
    case model::AutoscaleSignal::kMetric:
      s.value_milli = 0;  // not measured here (GatewayMeasures)
      break;
  }
  last.total = stats.total;
  last.held_total = stats.held_total;
  last.at_ms = now;
  last.seen = true;
  return s;
}

}  // namespace berth::server
