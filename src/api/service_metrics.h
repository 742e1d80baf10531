// GET /metrics' inference-service families (docs/metrics.md, "Services"):
// each service's replicas, and what the gateway measured of its requests.
// Rendering is a pure function of a ServiceMetricsView per service, so it
// is tested on fabricated input; Api::ServiceReplicaCounts gathers the
// views from the store, the service controller's last rounds and the
// gateway's cumulative latency histograms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/service_controller.h"
#include "gateway/latency.h"
#include "gateway/stats.h"

namespace berth::server {

// One service as a scrape sees it. The gateway's parts are absent without
// a gateway (and, for the histogram and cold start, until there is one).
struct ServiceMetricsView {
  std::string tenant;
  std::string service;
  std::uint32_t desired = 0;  // the last round's, else the spec's minimum
  ReplicaCounts replicas{};
  std::optional<gateway::RouteStats> traffic{};             // the last round's counters
  std::optional<gateway::RouteLatencyHistogram> latency{};  // since berthd started
  std::optional<std::int64_t> last_cold_start_ms{};         // its duration
};

// The families, each announced once with its samples together, services in
// the given order. berth_service_replicas is always announced (every state
// for every service); a gateway family only when some service has samples
// for it.
std::string RenderServiceMetrics(const std::vector<ServiceMetricsView>& services);

}  // namespace berth::server
