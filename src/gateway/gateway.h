// Berth's service gateway: one HAProxy for every inference service, run and
// kept by berthd (docs/services.md, "Gateway"). Berth renders HAProxy's
// configuration, starts it in master-worker mode, and drives it through its
// runtime API; there is no proxy of Berth's own.
//
//   auto gw = Gateway::Start(options);     // starts HAProxy, or adopts a live one
//   auto report = (*gw)->Sync(routes);     // make HAProxy serve `routes`
//   auto stats = (*gw)->Stats();           // per route: requests, held, servers
//   auto lat = (*gw)->TakeLatency();       // per route: p50/p95/p99 since the last call
//
// HAProxy outlives the Gateway object and berthd: destroying a Gateway
// leaves it serving, and the next Start on the same state directory adopts
// it. Only Stop() stops it.
//
// Latency comes from HAProxy's request log: a Gateway binds
// state_dir/log.sock and runs one reader thread that turns each request's
// line into per-route histograms (log_collector.h, latency.h). Destroying
// the Gateway stops that thread, not HAProxy.
//
// Not thread-safe: one caller (berthd's service loop) at a time, except
// TakeLatency, LatencyHistograms and RequestLogStats, which any thread may
// call at any time (they read the collector, under its lock).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "gateway/config.h"
#include "gateway/latency.h"
#include "gateway/log_collector.h"
#include "gateway/plan.h"
#include "gateway/route.h"
#include "gateway/stats.h"

namespace berth::gateway {

// HAProxy's processes as its master CLI lists them.
struct GatewayProcesses {
  pid_t master = -1;
  int reloads = 0;
  int failed_reloads = 0;
  std::vector<pid_t> workers;      // the current worker (one)
  std::vector<pid_t> old_workers;  // workers of earlier configs still finishing requests
};

// Parses the master CLI's `show proc` (pure; tested on captured output).
Result<GatewayProcesses> ParseShowProc(std::string_view text);

class Gateway {
 public:
  // Creates state_dir (0700) if needed. If the pid file names a live
  // HAProxy whose master and runtime sockets answer, adopts it (requests
  // keep being served across a berthd restart); otherwise renders a
  // configuration with no routes and starts `haproxy -W -D`. An HAProxy that
  // runs on this state directory but does not answer is an error, not a
  // reason to start a second one.
  static Result<std::unique_ptr<Gateway>> Start(GatewayOptions options);

  // Stops the log reader thread; HAProxy goes on serving (see above).
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Makes HAProxy serve `routes` and returns what changed. A change of the
  // set of routes or of a route's settings (balance, hold, max_conn) writes
  // a new configuration, with every current server in it, and reloads
  // (hitless: the old worker finishes its requests). A change of servers
  // alone only sends runtime-API commands (plan.h has the rules). Servers
  // being drained are deleted by a later Sync once idle: call it
  // periodically. Invalid routes are refused before anything is sent. If
  // HAProxy is gone (killed, crashed), it is started again with `routes`
  // (report.restarted).
  Result<SyncReport> Sync(const std::vector<Route>& routes);

  // Per route (in HAProxy's order): counts, held requests, servers.
  Result<std::vector<RouteStats>> Stats();

  // HAProxy's master and workers, from the master CLI.
  Result<GatewayProcesses> Processes();

  // Soft-stops HAProxy (in-flight requests finish) and waits up to
  // `grace`; then terminates it. Reads the request log lines it sent, stops
  // the reader, and removes the pid file and the sockets. Latency read
  // before stays readable.
  Status Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

  // Per route, the requests logged since the previous call (or since
  // Start): counts by status class, held at zero, p50/p95/p99 latency in ms
  // (latency.h: HAProxy's Ta, hold included; within 4.5%). Every route seen
  // since Start and still wanted by the last Sync is listed, requests == 0
  // when it had none. Requests HAProxy answered itself (404 for a path
  // under no route) are not a route's. kUnavailable if the log reader
  // stopped on a socket error: the figures would stop growing unseen.
  Result<std::vector<RouteLatency>> TakeLatency();
  // Per route, cumulative since it was first seen by this Gateway: the
  // counts and the Prometheus buckets (le 1, 2, 4 .. 2^20 ms, +Inf) for
  // /metrics. Reading does not reset anything.
  Result<std::vector<RouteLatencyHistogram>> LatencyHistograms();
  // What the log reader received and did with it (lines that did not
  // parse are counted here, with the last error, never fatal).
  RequestLogCounters RequestLogStats();
  // Lines HAProxy's worker could not send because log.sock's queue was
  // full (`show info` DroppedLogs, since the worker started): requests the
  // latency figures miss.
  Result<std::int64_t> DroppedRequestLogs();

  bool adopted() const { return adopted_; }
  pid_t master_pid() const { return master_pid_; }
  const GatewayOptions& options() const { return options_; }

  // One runtime-API command on the admin socket; its answer.
  Result<std::string> AdminCommand(const std::string& command);

 private:
  explicit Gateway(GatewayOptions options) : options_(std::move(options)) {}

  std::filesystem::path Path(const char* name) const { return options_.state_dir / name; }
  Status Launch();
  Status WriteFiles(const std::vector<Route>& routes);
  Status Reload(const std::vector<Route>& routes);
  Status Restart(const std::vector<Route>& routes);
  Result<std::string> MasterCommand(const std::string& command);

  GatewayOptions options_;
  pid_t master_pid_ = -1;
  bool adopted_ = false;
  // The shape (config.h) of what the running worker was loaded with.
  std::string shape_;
  // Bound to log.sock from Start on, before HAProxy is started or adopted.
  std::unique_ptr<RequestLogCollector> log_;
};

}  // namespace berth::gateway
