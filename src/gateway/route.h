// What berthd wants the gateway to serve: one Route per inference service,
// each with the replicas (backends) that may take its requests. Values only;
// gateway.h makes HAProxy match them. Every name and address here ends up in
// HAProxy's configuration or in a runtime-API command, so ValidateRoutes is
// the one gate they pass: nothing is interpolated that it did not check.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace berth::gateway {

// How a route spreads requests over its servers. Both are HAProxy's dynamic
// algorithms (servers can be added and reweighted at run time); leastconn
// suits LLM requests, whose lengths vary by orders of magnitude.
enum class Balance { kLeastConn, kRoundRobin };
std::string_view BalanceName(Balance balance);

// One replica behind a route.
struct RouteBackend {
  // Stable for the replica's life (its job id): HAProxy's server name. Two
  // backends of one route never share an id.
  std::string id;
  std::string address;  // an IPv4 or IPv6 literal; no host names (no DNS here)
  int port = 0;         // 1..65535
  int weight = 100;     // 0..256, relative share of new requests
  // True: takes no new requests; those in flight finish. A backend that
  // disappears from the route is drained first too, then deleted once it
  // has no connection left (see Gateway::Sync).
  bool draining = false;
};

struct Route {
  std::string tenant;   // a Berth name (model/names.h's rule)
  std::string service;  // a Berth name
  Balance balance = Balance::kLeastConn;
  // How long a request waits at the gateway while the route has no ready
  // server (scaled to zero), or while every server is at max_conn, before
  // it is answered 503. 0: answered 503 at once.
  std::int64_t hold_timeout_ms = 30'000;
  // Requests one server handles at once (HAProxy's server maxconn); beyond
  // it they queue at the gateway. 0: no limit.
  int max_conn_per_backend = 0;
  // Empty: anyone who reaches the gateway may call the route. Else the URL
  // berthd answers on whether a caller may (GET, with the request's
  // Authorization header): 204 with X-Berth-User, or 401/403/404/429, which
  // the gateway returns to the caller as they are. The gateway keeps each
  // verdict for kAuthAllowSeconds (allowed) or kAuthDenySeconds (refused),
  // answers a request without an Authorization header 401 without asking,
  // and while berthd cannot be reached keeps allowing a caller it allowed
  // within kAuthStaleSeconds (else 503). An allowed request reaches the
  // replica without its Authorization header and with X-Berth-User.
  std::string auth_url{};
  // Where the gateway connects for auth_url: "IP:PORT" or "[IPv6]:PORT"
  // (HAProxy resolves no names). auth_url's host is then only the name the
  // server's certificate must hold (HAProxy 2.6 checks a DNS name, never an
  // IP address, against it). Required with auth_url.
  std::string auth_address{};
  std::vector<RouteBackend> backends;
};

// How long the gateway keeps berthd's verdicts (see Route::auth_url).
inline constexpr int kAuthAllowSeconds = 10;
inline constexpr int kAuthDenySeconds = 2;
inline constexpr int kAuthStaleSeconds = 300;

// Bounds checked by ValidateRoutes.
inline constexpr int kMaxBackendWeight = 256;  // HAProxy's own limit
inline constexpr std::int64_t kMaxHoldTimeoutMs = 3'600'000;
inline constexpr int kMaxConnPerBackend = 1'000'000;
inline constexpr std::size_t kMaxBackendIdLength = 63;

// The path prefix a route answers under: "/s/<tenant>/<service>/". The
// prefix is stripped before the request reaches a replica, so a replica
// serving "/v1/completions" is called as "/s/ml/coder/v1/completions".
std::string RoutePrefix(const Route& route);
// HAProxy's backend name for a route: "<tenant>:<service>". ':' is in no
// Berth name, so two routes never share a backend name.
std::string BackendName(std::string_view tenant, std::string_view service);

// "a:p" for IPv4, "[a]:p" for IPv6: HAProxy's address syntax.
std::string HostPort(const std::string& address, int port);

// A Berth name: 1..63 of a-z, 0-9, '-', '_', '.', starting and ending with a
// letter or digit (the rule of model/names.h, restated: gateway depends on
// common only).
bool IsGatewayName(std::string_view s);
// A backend id: 1..63 of A-Z, a-z, 0-9, '-', '_', '.', starting with a
// letter or digit.
bool IsBackendId(std::string_view s);
// An IPv4 or IPv6 address literal (inet_pton), without brackets.
bool IsIpLiteral(std::string_view s);
// "IPv4:PORT" or "[IPv6]:PORT" with a port of 1..65535.
bool IsAddressPort(std::string_view s);
// An http:// or https:// URL of at most 512 bytes made only of letters,
// digits and - . _ ~ : / [ ] (what Route::auth_url may hold: it is one
// word of HAProxy's configuration).
bool IsPlainUrl(std::string_view s);

// Checks every route: names, addresses, ports, weights, bounds, no two
// routes for one tenant/service, no two backends of a route with one id.
// The error's field is a path into the vector: "routes[2].backends[0].port".
Status ValidateRoutes(const std::vector<Route>& routes);

}  // namespace berth::gateway
