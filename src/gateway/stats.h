// What the gateway sees of its routes: parsed from HAProxy's `show stat`
// (CSV with a header line naming the columns) and from the hold action's
// `show berth-held`. Pure functions, tested on captured output; gateway.h
// asks the runtime socket and calls them.
//
// Counters (totals, 2xx/5xx, held) count from the current worker's start:
// a reload (a change of the set of routes) starts them again at zero, as a
// restarted Prometheus target's do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace berth::gateway {

// A server's state as the gateway routes to it.
enum class ServerState {
  kReady,  // takes new requests ("UP", or "no check": Berth checks readiness itself)
  kDrain,  // takes no new requests; in-flight ones finish
  kMaint,  // in maintenance: no requests at all (joined disabled, or before deletion)
  kDown,   // HAProxy's own check says down (Berth enables no checks today)
};
std::string_view ServerStateName(ServerState state);

struct ServerStats {
  std::string id;
  ServerState state = ServerState::kMaint;
  std::string status;  // HAProxy's own word ("no check", "DRAIN", "MAINT", ...)
  std::string address;
  int port = 0;
  int weight = 0;             // the weight Berth set (HAProxy's uweight)
  std::int64_t current = 0;   // requests in flight on it (scur)
  std::int64_t queued = 0;    // waiting for it (qcur)
  std::int64_t total = 0;     // sessions it has taken (stot)
  std::int64_t max_conn = 0;  // its limit (slim), 0 when none
};

struct RouteStats {
  std::string tenant;
  std::string service;
  std::int64_t current = 0;       // requests in flight at replicas (backend scur)
  std::int64_t queued = 0;        // waiting for a server slot (qcur)
  std::int64_t total = 0;         // requests routed (stot)
  std::int64_t held_now = 0;      // held right now because no server is ready
  std::int64_t held_total = 0;    // ever held at zero servers
  std::int64_t held_expired = 0;  // held until the timeout, then answered 503
  std::int64_t responses_2xx = 0;
  std::int64_t responses_5xx = 0;
  // HAProxy's averages over the last 1024 requests, in ms: response time
  // (first byte from the replica), total time, time queued.
  std::int64_t avg_response_ms = 0;
  std::int64_t avg_total_ms = 0;
  std::int64_t avg_queue_ms = 0;
  std::vector<ServerStats> servers;

  // What a route "at zero" looks like to an autoscaler: requests are being
  // held and no server can take them.
  std::int64_t ready_servers() const;
};

// Parses `show stat`'s CSV: one RouteStats per backend named
// "<tenant>:<service>" (other proxies, such as the frontend, are skipped),
// with its servers in the order listed. Columns are found by the header's
// names, so columns HAProxy adds later change nothing. An error names the
// row or column that does not parse.
Result<std::vector<RouteStats>> ParseShowStat(std::string_view csv);

// Adds `show berth-held`'s lines ("<backend> <now> <total> <expired>") to
// the routes they name; lines for backends not in `routes` are ignored.
Status MergeHeld(std::string_view held_text, std::vector<RouteStats>& routes);

}  // namespace berth::gateway
