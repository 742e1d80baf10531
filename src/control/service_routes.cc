#include "control/service_routes.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <future>

#include "model/prometheus_text.h"

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
  route.hold_timeout_ms = service.spec.gateway.hold_timeout_ms;
  // A canary's weights split the requests as its step says under round
  // robin; leastconn would send a light load's every request to the
  // heavier side (each server idle, the heaviest always first).
  route.balance = service.spec.rollout.canary.empty() ? gateway::Balance::kLeastConn
                                                      : gateway::Balance::kRoundRobin;
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

namespace {

// One replica's metric: its sum, or why there is none.
Result<double> ScrapeOne(const std::string& address, std::uint32_t port,
                         const std::string& metric) {
  httplib::Client client(address, static_cast<int>(port));
  const auto secs = static_cast<time_t>(kMetricScrapeTimeoutMs / 1000);
  const auto usecs = static_cast<time_t>((kMetricScrapeTimeoutMs % 1000) * 1000);
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  client.set_write_timeout(secs, usecs);
  std::string body;
  bool too_big = false;
  auto res = client.Get("/metrics", [&](const char* data, std::size_t len) {
    if (body.size() + len > model::kMaxMetricsBytes) {
      too_big = true;
      return false;
    }
    body.append(data, len);
    return true;
  });
  if (too_big) {
    return Fail(Code::kResourceExhausted,
                fmt::format("/metrics is over {} bytes", model::kMaxMetricsBytes), "metrics");
  }
  if (!res) {
    return Fail(Code::kUnavailable,
                fmt::format("GET /metrics: {}", httplib::to_string(res.error())), "metrics");
  }
  if (res->status != 200) {
    return Fail(Code::kUnavailable, fmt::format("GET /metrics: HTTP {}", res->status), "metrics");
  }
  auto sum = model::SumPrometheusMetric(body, metric);
  if (!sum) return std::unexpected(sum.error());
  if (!*sum) return Fail(Code::kNotFound, fmt::format("/metrics has no {}", metric), "metric");
  return **sum;
}

}  // namespace

MetricScrape ScrapeMetric(const std::string& metric, const std::vector<RoutedReplica>& replicas,
                          const std::map<std::string, RouteNode>& nodes) {
  MetricScrape out;
  struct Asked {
    std::int64_t job_id;
    std::future<Result<double>> value;
  };
  std::vector<const RoutedReplica*> ready;
  for (const auto& r : replicas) {
    if (r.ready && !r.stopping && r.port != 0) ready.push_back(&r);
  }
  std::sort(ready.begin(), ready.end(),
            [](const RoutedReplica* a, const RoutedReplica* b) { return a->job_id < b->job_id; });
  if (ready.size() > kMaxMetricScrapes) ready.resize(kMaxMetricScrapes);
  std::vector<Asked> asked;
  for (const RoutedReplica* r : ready) {
    ++out.replicas;
    auto node = nodes.find(r->node);
    if (node == nodes.end() || node->second.address.empty()) {
      if (out.error.empty()) {
        out.error = fmt::format("replica job {}: its node {} has no address", r->job_id, r->node);
      }
      continue;
    }
    asked.push_back({r->job_id, std::async(std::launch::async, ScrapeOne, node->second.address,
                                           r->port, metric)});
  }
  double sum = 0;
  for (auto& a : asked) {
    auto v = a.value.get();
    if (!v) {
      if (out.error.empty())
        out.error = fmt::format("replica job {}: {}", a.job_id, v.error().message);
      continue;
    }
    ++out.answered;
    sum += *v;
  }
  if (out.answered > 0) {
    // Thousandths, bounded: a replica cannot push the autoscaler past
    // what an int64 holds.
    const double milli = std::clamp(sum * 1000.0, 0.0, 9e15);
    out.value_milli = static_cast<std::int64_t>(std::llround(milli));
  }
  return out;
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
