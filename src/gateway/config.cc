#include "gateway/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "gateway/request_log.h"

namespace berth::gateway {

namespace {

std::int64_t ConfigMaxHold(const std::vector<Route>& routes) {
  std::int64_t max_hold = 0;
  for (const Route& r : routes) max_hold = std::max(max_hold, r.hold_timeout_ms);
  return max_hold;
}

}  // namespace

Status ValidateOptions(const GatewayOptions& o) {
  if (o.state_dir.empty() || !o.state_dir.is_absolute()) {
    return InvalidField("state_dir", "must be an absolute path");
  }
  // HAProxy's configuration has its own quoting; keep the paths it reads plain.
  const std::string dir = o.state_dir.string();
  auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
           c == '-' || c == '_' || c == '.';
  };
  if (!std::all_of(dir.begin(), dir.end(), plain)) {
    return InvalidField("state_dir", "may hold only letters, digits, '/', '-', '_' and '.'");
  }
  // A unix socket path is at most 107 bytes; leave room for "/master.sock".
  if (dir.size() > 90) return InvalidField("state_dir", "must be at most 90 bytes long");
  if (!IsIpLiteral(o.bind_address)) {
    return InvalidField("bind_address", "must be an IPv4 or IPv6 address literal");
  }
  if (o.bind_port < 1 || o.bind_port > 65535) {
    return InvalidField("bind_port", "must be 1..65535");
  }
  if (o.threads < 0 || o.threads > 64)
    return InvalidField("threads", "must be 0..64 (0: one per CPU)");
  if (o.max_connections < 1 || o.max_connections > 1'000'000) {
    return InvalidField("max_connections", "must be 1..1000000");
  }
  auto ms_ok = [](std::int64_t ms) { return ms >= 1 && ms <= 86'400'000; };
  if (!ms_ok(o.connect_timeout_ms))
    return InvalidField("connect_timeout_ms", "must be 1..86400000");
  if (!ms_ok(o.request_timeout_ms))
    return InvalidField("request_timeout_ms", "must be 1..86400000");
  if (!ms_ok(o.drain_timeout_ms)) return InvalidField("drain_timeout_ms", "must be 1..86400000");
  return Ok();
}

std::string ConfigShape(const GatewayOptions& o, const std::vector<Route>& routes) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "# berth-shape gateway bind={} maxconn={} threads={} connect={} request={} drain={} dir={} "
      "log={}",
      HostPort(o.bind_address, o.bind_port), o.max_connections, o.threads, o.connect_timeout_ms,
      o.request_timeout_ms, o.drain_timeout_ms, o.state_dir.string(), kRequestLogTag));
  for (const Route& r : routes) {
    lines.push_back(fmt::format("# berth-shape route {} balance={} hold={} maxconn={}",
                                BackendName(r.tenant, r.service), BalanceName(r.balance),
                                r.hold_timeout_ms, r.max_conn_per_backend));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string ParseConfigShape(const std::string& config_text) {
  std::istringstream in(config_text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# berth-shape ")) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string RenderConfig(const GatewayOptions& o, const std::vector<Route>& routes) {
  const std::string dir = o.state_dir.string();
  const std::string map = fmt::format("{}/{}", dir, kMapFile);
  std::string out;
  out += "# Rendered by Berth's gateway (src/gateway/config.cc). Do not edit: each change of\n";
  out += "# the set of routes rewrites it and reloads HAProxy.\n";
  out += ConfigShape(o, routes);
  // Lua's run time is bounded per request; a held request sleeps in Lua for
  // up to its route's hold, so the bound sits above the longest hold.
  const std::int64_t lua_timeout_ms = ConfigMaxHold(routes) + 10'000;
  out += fmt::format(
      "global\n"
      "  master-worker\n"
      "  stats socket {0}/{1} mode 600 level admin expose-fd listeners\n"
      "  stats timeout 30s\n"
      "{6}"
      "  maxconn {2}\n"
      "  hard-stop-after {3}ms\n"
      "  lua-load {0}/{4}\n"
      "  tune.lua.session-timeout {5}ms\n"
      "\n",
      dir, kAdminSocket, o.max_connections, o.drain_timeout_ms, kLuaFile, lua_timeout_ms,
      o.threads > 0 ? fmt::format("  nbthread {}\n", o.threads) : std::string());
  out += fmt::format(
      "defaults\n"
      "  mode http\n"
      "  option forwardfor\n"
      "  timeout connect {0}ms\n"
      "  timeout client {1}ms\n"
      "  timeout server {1}ms\n"
      "  timeout http-request 10s\n"
      "  timeout http-keep-alive 10s\n"
      "  timeout queue {2}ms\n"
      "\n",
      o.connect_timeout_ms, o.request_timeout_ms, o.connect_timeout_ms);
  // A path under no route's prefix is answered 404 by the frontend itself.
  // Each request's line goes to Berth's collector on log.sock (request_log.h
  // has the format; log_collector.h reads it), raw: no syslog header. The
  // request log is the frontend's, so `log` sits in the frontend only: the
  // backends then have no log target, and HAProxy's own messages about
  // them (a server down) go nowhere. The frontend's own (stopped at a
  // reload) still come; the collector counts them apart. dontlognull: no
  // line for a connection that sent nothing.
  out += fmt::format(
      "frontend berth\n"
      "  bind {0}\n"
      "  log {2}/{3} format raw local0 info\n"
      "  log-format \"{4}\"\n"
      "  option dontlognull\n"
      "  http-request return status 404 content-type text/plain string \"no such service\" "
      "unless {{ path,map_beg({1}) -m found }}\n"
      "  use_backend %[path,map_beg({1})]\n",
      HostPort(o.bind_address, o.bind_port), map, dir, kLogSocket, kRequestLogFormat);
  for (const Route& r : routes) {
    const std::string prefix = RoutePrefix(r);
    out += fmt::format("\nbackend {}\n", BackendName(r.tenant, r.service));
    out += fmt::format("  balance {}\n", BalanceName(r.balance));
    // Requests beyond every server's maxconn wait in the queue up to the
    // hold timeout, as requests at zero servers do.
    out += fmt::format("  timeout queue {}ms\n", std::max<std::int64_t>(r.hold_timeout_ms, 1));
    if (r.hold_timeout_ms > 0) {
      out += fmt::format("  http-request lua.berth_hold {}\n", r.hold_timeout_ms);
    }
    // "/s/t/s/v1/x" -> "/v1/x": keep the path from the prefix's last '/'.
    out += fmt::format("  http-request set-path %[path,bytes({})]\n", prefix.size() - 1);
    for (const RouteBackend& b : r.backends) {
      out += fmt::format("  server {} {} weight {}", b.id, HostPort(b.address, b.port), b.weight);
      if (r.max_conn_per_backend > 0) out += fmt::format(" maxconn {}", r.max_conn_per_backend);
      if (b.draining) out += " disabled";
      out += "\n";
    }
  }
  return out;
}

std::string RenderRouteMap(const std::vector<Route>& routes) {
  std::string out;
  for (const Route& r : routes) {
    out += fmt::format("{} {}\n", RoutePrefix(r), BackendName(r.tenant, r.service));
  }
  return out;
}

std::string HoldLua() {
  // Counters live in the worker's one Lua state (lua-load, not per thread);
  // they start at zero in each new worker, as HAProxy's own counters do.
  return R"lua(-- Rendered by Berth's gateway (src/gateway/config.cc): hold at zero.
-- A request to a backend with no usable server waits here, polling the
-- backend's server count, until a server joins or the hold timeout passes;
-- then HAProxy routes it (or answers 503 when there is still no server).
berth_held_now = {}
berth_held_total = {}
berth_held_expired = {}

core.register_action("berth_hold", {"http-req"}, function(txn, hold_ms)
  local be = txn.f:be_name()
  if txn.f:nbsrv(be) > 0 then return end
  local limit = tonumber(hold_ms) or 0
  berth_held_now[be] = (berth_held_now[be] or 0) + 1
  berth_held_total[be] = (berth_held_total[be] or 0) + 1
  local start = core.now()
  local waited = 0
  while txn.f:nbsrv(be) == 0 and waited < limit do
    core.msleep(10)
    local now = core.now()
    waited = (now.sec - start.sec) * 1000 + (now.usec - start.usec) / 1000
  end
  berth_held_now[be] = berth_held_now[be] - 1
  -- The request's log line says it was held, and for how long.
  txn:set_var("txn.berth_held_ms", math.floor(waited))
  if txn.f:nbsrv(be) == 0 then
    berth_held_expired[be] = (berth_held_expired[be] or 0) + 1
  end
end, 1)

-- "show berth-held": one line per backend that ever held a request:
-- "<backend> <held now> <held in total> <expired in total>".
core.register_cli({"show", "berth-held"}, "show berth-held : requests held at zero servers",
  function(applet)
    for be, total in pairs(berth_held_total) do
      applet:send(string.format("%s %d %d %d\n", be, berth_held_now[be] or 0, total,
                                berth_held_expired[be] or 0))
    end
  end)
)lua";
}

}  // namespace berth::gateway
