// What the service controller tells the gateway and reads back from it
// (docs/services.md, "Gateway" and "Autoscaling"): pure functions, tested
// without HAProxy; ServiceController calls them each round.
//
//   - RouteOf: the route of one service. Its backends are the replicas that
//     may take requests: running, ready (by their agent's readiness probe),
//     on a node that is Ready and has an address, and not being stopped or
//     drained. Old revisions' ready replicas serve until they are stopped,
//     so a rollout never leaves the route empty.
//   - SampleOf: one autoscaler sample from the gateway's counters for the
//     route: requests in flight, queued and held (concurrency), the requests
//     routed since the last sample (rps), the ones waiting (queue depth),
//     and from its request log the p95 latency of the requests since then.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gateway/latency.h"
#include "gateway/route.h"
#include "gateway/stats.h"
#include "model/service.h"
#include "sched/autoscale.h"
#include "store/store.h"

namespace berth::server {

// A node as the gateway needs it: where its replicas are reached.
struct RouteNode {
  std::string address;  // an IP literal; "" when the node reported none
  bool ready = false;   // its agent holds its lease
};

// One live replica of a service, as a round sees it.
struct RoutedReplica {
  std::int64_t job_id = 0;
  std::string node;
  std::uint32_t port = 0;
  bool ready = false;     // running and passing readiness
  bool stopping = false;  // asked to stop, or being drained before it is
};

// The gateway's server name for replica job `job_id`: "job-<id>".
std::string ReplicaServerId(std::int64_t job_id);
// The job a server name is for; nullopt for a name Berth did not make.
std::optional<std::int64_t> ReplicaOfServer(std::string_view server_id);

// berthd's API as the gateway on its host reaches it.
struct GatewayApi {
  // Scheme, a host name berthd's certificate holds, and the port:
  // "https://localhost:7460".
  std::string url;
  std::string address;  // what the gateway connects to: "127.0.0.1:7460"
};

// A service with `access: tenant` (the default) has its callers checked at
// `<api.url>/v1/services/<tenant>/<name>/access`, reached at api.address.
gateway::Route RouteOf(const store::ServiceRecord& service,
                       const std::vector<RoutedReplica>& replicas,
                       const std::map<std::string, RouteNode>& nodes, const GatewayApi& api);

// The `metric` signal (docs/services.md, "The metric signal"): the named
// gauge read from each ready, routed replica's /metrics (on its node's
// address and port), all at once, each within kMetricScrapeTimeoutMs, and
// summed. concurrency, rps and queue_depth come from the gateway's
// counters, p95_latency from its request log.
struct MetricScrape {
  std::optional<std::int64_t> value_milli{};  // nullopt: no replica answered
  std::uint32_t replicas = 0;                 // asked
  std::uint32_t answered = 0;
  std::string error{};  // the first failure: "replica job 12: connection refused"
};
inline constexpr std::int64_t kMetricScrapeTimeoutMs = 1000;
// At most this many replicas are asked per round (the first ones by job id).
inline constexpr std::size_t kMaxMetricScrapes = 64;
MetricScrape ScrapeMetric(const std::string& metric, const std::vector<RoutedReplica>& replicas,
                          const std::map<std::string, RouteNode>& nodes);

// The gateway's totals at the last sample, to turn counters into rates. A
// counter that went down (the gateway reloaded or restarted) starts again
// from zero.
struct RouteCounters {
  std::int64_t total = 0;
  std::int64_t held_total = 0;
  TimeMs at_ms = 0;
  bool seen = false;
};

// One autoscaler sample from the route's stats at `now` and, for
// p95_latency, the requests its log showed since the last sample (nullptr:
// none logged); updates `last`.
sched::AutoscaleSample SampleOf(const gateway::RouteStats& stats,
                                const gateway::RouteLatency* latency, model::AutoscaleSignal signal,
                                RouteCounters& last, TimeMs now);

}  // namespace berth::server
