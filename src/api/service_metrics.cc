#include "api/service_metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "meter/metrics.h"

namespace berth::server {
namespace {

MetricLabels ServiceMetricLabels(const ServiceMetricsView& s) {
  return {{"tenant", s.tenant}, {"service", s.service}};
}

// The gateway's cumulative buckets (le in ms, last +Inf) as a histogram in
// seconds: per-bucket counts, as MetricsWriter::Histogram takes them.
HistogramData ServiceLatencySeconds(const gateway::RouteLatencyHistogram& h) {
  HistogramData out;
  out.bounds.clear();
  out.counts.clear();
  std::int64_t below = 0;
  for (const auto& b : h.buckets) {
    if (std::isinf(b.le_ms)) break;
    out.bounds.push_back(b.le_ms / 1000.0);
    out.counts.push_back(static_cast<std::uint64_t>(std::max<std::int64_t>(b.count - below, 0)));
    below = std::max(below, b.count);
  }
  out.counts.push_back(static_cast<std::uint64_t>(std::max<std::int64_t>(h.count - below, 0)));
  out.sum = static_cast<double>(h.sum_ms) / 1000.0;
  out.count = static_cast<std::uint64_t>(std::max<std::int64_t>(h.count, 0));
  return out;
}

}  // namespace

std::string RenderServiceMetrics(const std::vector<ServiceMetricsView>& services) {
  MetricsWriter w;
  w.Family("berth_service_replicas", "gauge",
           "Replicas of each inference service: desired, ready (of the current spec, passing "
           "readiness), not_ready (running, not passing readiness), starting, stopping.");
  for (const auto& s : services) {
    const ReplicaCounts& n = s.replicas;
    for (const auto& [state, v] :
         {std::pair{"desired", s.desired}, std::pair{"ready", n.ready},
          std::pair{"not_ready", n.not_ready}, std::pair{"starting", n.starting},
          std::pair{"stopping", n.stopping}}) {
      w.Sample("berth_service_replicas",
               {{"tenant", s.tenant}, {"service", s.service}, {"state", state}},
               static_cast<double>(v));
    }
  }

  // A gauge family over the services that have a value for it.
  auto gauge = [&](std::string_view name, std::string_view help, auto value_of) {
    bool announced = false;
    for (const auto& s : services) {
      const std::optional<double> v = value_of(s);
      if (!v) continue;
      if (!announced) w.Family(name, "gauge", help);
      announced = true;
      w.Sample(name, ServiceMetricLabels(s), *v);
    }
  };
  gauge("berth_service_requests_in_flight",
        "Requests of each service at its replicas now, as the gateway counted them at the "
        "service controller's last round.",
        [](const ServiceMetricsView& s) -> std::optional<double> {
          if (!s.traffic) return std::nullopt;
          return static_cast<double>(s.traffic->current);
        });
  gauge("berth_service_requests_queued",
        "Requests of each service queued at the gateway because every ready replica is at its "
        "connection limit, at the service controller's last round.",
        [](const ServiceMetricsView& s) -> std::optional<double> {
          if (!s.traffic) return std::nullopt;
          return static_cast<double>(s.traffic->queued);
        });
  gauge("berth_service_requests_held",
        "Requests of each service held at the gateway because no replica is ready (a scale "
        "from zero), at the service controller's last round.",
        [](const ServiceMetricsView& s) -> std::optional<double> {
          if (!s.traffic) return std::nullopt;
          return static_cast<double>(s.traffic->held_now);
        });

  bool announced = false;
  for (const auto& s : services) {
    if (!s.latency) continue;
    if (!announced) {
      w.Family("berth_service_request_duration_seconds", "histogram",
               "Requests of each service through the gateway by their duration (first request "
               "byte to last response byte, a hold at zero included), since berthd started.");
    }
    announced = true;
    w.Histogram("berth_service_request_duration_seconds", ServiceMetricLabels(s),
                ServiceLatencySeconds(*s.latency));
  }
  announced = false;
  for (const auto& s : services) {
    if (!s.latency) continue;
    if (!announced) {
      w.Family("berth_service_responses_total", "counter",
               "Responses of each service through the gateway by status class, since berthd "
               "started.");
    }
    announced = true;
    for (const auto& [code, n] :
         {std::pair{"2xx", s.latency->responses_2xx}, std::pair{"4xx", s.latency->responses_4xx},
          std::pair{"5xx", s.latency->responses_5xx}}) {
      w.Sample("berth_service_responses_total",
               {{"tenant", s.tenant}, {"service", s.service}, {"code", code}},
               static_cast<double>(n));
    }
  }

  gauge("berth_service_cold_start_seconds",
        "Each service's last scale from zero: seconds from the request held at the gateway to "
        "a ready replica in its route.",
        [](const ServiceMetricsView& s) -> std::optional<double> {
          if (!s.last_cold_start_ms) return std::nullopt;
          return static_cast<double>(*s.last_cold_start_ms) / 1000.0;
        });
  return w.Take();
}

}  // namespace berth::server
