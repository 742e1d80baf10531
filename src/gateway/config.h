// Rendering HAProxy's configuration for Berth's gateway: pure functions from
// the gateway's options and the routes to the text of haproxy.cfg, the
// route map and the hold-at-zero Lua action (docs/services.md, "Gateway").
// Nothing here touches a file or a process; gateway.h writes and loads them.
//
// Inputs are trusted to have passed ValidateOptions and ValidateRoutes:
// names, addresses and numbers are interpolated as they are.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "gateway/route.h"

namespace berth::gateway {

struct GatewayOptions {
  // The directory Berth keeps HAProxy's state in: haproxy.cfg, routes.map,
  // hold.lua, the pid file and three sockets (admin.sock: the runtime API;
  // master.sock: the master CLI; log.sock: the request log HAProxy sends
  // and Berth reads). Created 0700 and owned by berthd's user; the sockets
  // are 0600 in it and never on TCP, so a job on the same host (which runs
  // as its tenant's identity) cannot reach them.
  std::filesystem::path state_dir;
  // The frontend every service is reached on. HAProxy cannot report a port
  // it picked, so the port is configured (tests pick a free one).
  std::string bind_address = "127.0.0.1";
  int bind_port = 8480;
  std::filesystem::path haproxy_binary = "haproxy";
  int max_connections = 4096;               // global maxconn
  int threads = 0;                          // HAProxy's worker threads; 0: its default, one per CPU
  std::int64_t connect_timeout_ms = 5'000;  // to a replica
  std::int64_t request_timeout_ms = 300'000;  // client and server inactivity
  // How long an old worker may go on serving its in-flight requests after a
  // reload (HAProxy's hard-stop-after).
  std::int64_t drain_timeout_ms = 300'000;
  // The CA the gateway trusts when it asks berthd whether a caller may call
  // a route (Route::auth_url, https): berthd's own CA. Empty: the system's
  // CA bundle (HAProxy's @system-ca).
  std::filesystem::path auth_ca_file{};
};

Status ValidateOptions(const GatewayOptions& options);

// File names inside state_dir.
inline constexpr const char* kConfigFile = "haproxy.cfg";
inline constexpr const char* kMapFile = "routes.map";
inline constexpr const char* kAuthMapFile = "auth.map";
inline constexpr const char* kLuaFile = "hold.lua";
inline constexpr const char* kPidFile = "haproxy.pid";
inline constexpr const char* kAdminSocket = "admin.sock";
inline constexpr const char* kMasterSocket = "master.sock";
inline constexpr const char* kLogSocket = "log.sock";  // bound by Berth, sent to by HAProxy

// The shape of the configuration: the options and each route's own
// settings, without servers. A change of shape needs a reload; a change of
// servers alone never does. One line per item, sorted, each starting with
// "# berth-shape " (they head haproxy.cfg, so an adopted HAProxy's shape is
// read back from its file).
std::string ConfigShape(const GatewayOptions& options, const std::vector<Route>& routes);
// The shape lines of a rendered haproxy.cfg (ConfigShape's output).
std::string ParseConfigShape(const std::string& config_text);

// haproxy.cfg. Backends marked draining are rendered `disabled` (in
// maintenance: no new requests) so that the reload keeps them until they
// can be deleted.
std::string RenderConfig(const GatewayOptions& options, const std::vector<Route>& routes);
// routes.map: "<prefix> <backend>" per route, for map_beg.
std::string RenderRouteMap(const std::vector<Route>& routes);
// auth.map: "<prefix> <auth_url>|<auth_address>" per route that checks its
// callers, for map_beg in the frontend.
std::string RenderAuthMap(const std::vector<Route>& routes);
// hold.lua: the `berth_auth` and `berth_hold` actions and the
// `show berth-held` CLI command.
std::string HoldLua();

}  // namespace berth::gateway
