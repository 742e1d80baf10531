// Turning "what berthd wants" and "what HAProxy has" into runtime-API
// commands: a pure function, so the rules of joining, draining and deleting
// are tested without a process (snapshot in, plan out; Gateway::Sync is
// the one place that sends the commands).
//
// The rules, per server of a route:
//   - wanted and absent: `add server` then `enable server` (a server joins
//     enabled; one wanted draining is added and left in maintenance);
//   - wanted with another address, port or weight: `set server ... addr`,
//     `set server ... weight`;
//   - wanted draining and taking requests: `set server ... state drain`;
//     wanted ready and drained or in maintenance: `state ready`;
//   - not wanted and taking requests: `state drain` (in-flight requests
//     finish; no new ones);
//   - not wanted, drained or in maintenance, with no request in flight or
//     queued on it, and no old worker left from a reload (which may still
//     be serving through it): `state maint` then `del server`;
//   - not wanted and still busy: left draining, reported as such.
#pragma once

#include <string>
#include <vector>

#include "gateway/route.h"
#include "gateway/stats.h"

namespace berth::gateway {

// What a Sync did, for berthd to log and audit. Server entries are
// "<tenant>/<service>/<id>", routes "<tenant>/<service>".
struct SyncReport {
  bool reloaded = false;   // the set of routes (or their settings) changed
  bool restarted = false;  // HAProxy was gone and was started again
  std::vector<std::string> routes_added;
  std::vector<std::string> routes_removed;
  std::vector<std::string> added;     // joined, enabled
  std::vector<std::string> enabled;   // was drained or in maintenance, takes requests again
  std::vector<std::string> drained;   // stopped taking new requests now
  std::vector<std::string> removed;   // deleted: no request can reach it any more
  std::vector<std::string> draining;  // not wanted, still finishing requests
  std::vector<std::string> updated;   // address, port or weight changed
  std::vector<std::string> commands;  // the runtime-API commands sent, in order
};

struct ServerPlan {
  std::vector<std::string> commands;  // runtime-API commands, in order
  SyncReport report;                  // every field but reloaded and routes_*
};

// `live` is ParseShowStat's view of the running worker. Routes of `wanted`
// with no backend in `live` are skipped (a reload adds them first).
ServerPlan PlanServers(const std::vector<Route>& wanted, const std::vector<RouteStats>& live,
                       bool old_workers_alive);

}  // namespace berth::gateway
