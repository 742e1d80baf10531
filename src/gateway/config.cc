#include "gateway/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <string_view>
#include <utility>

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
  if (!o.auth_ca_file.empty()) {
    const std::string ca = o.auth_ca_file.string();
    if (!o.auth_ca_file.is_absolute() || !std::all_of(ca.begin(), ca.end(), plain)) {
      return InvalidField("auth_ca_file",
                          "must be an absolute path of letters, digits, '/', '-', '_' and '.'");
    }
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
      "log={} ca={}",
      HostPort(o.bind_address, o.bind_port), o.max_connections, o.threads, o.connect_timeout_ms,
      o.request_timeout_ms, o.drain_timeout_ms, o.state_dir.string(), kRequestLogTag,
      o.auth_ca_file.empty() ? std::string("-") : o.auth_ca_file.string()));
  for (const Route& r : routes) {
    lines.push_back(fmt::format("# berth-shape route {} balance={} hold={} maxconn={} auth={}{}",
                                BackendName(r.tenant, r.service), BalanceName(r.balance),
                                r.hold_timeout_ms, r.max_conn_per_backend,
                                r.auth_url.empty() ? std::string("-") : r.auth_url,
                                r.auth_url.empty() ? std::string() : "@" + r.auth_address));
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
      "{7}"
      "\n",
      dir, kAdminSocket, o.max_connections, o.drain_timeout_ms, kLuaFile, lua_timeout_ms,
      o.threads > 0 ? fmt::format("  nbthread {}\n", o.threads) : std::string(),
      // The callers' checks (berth_auth) go to berthd over HTTPS, verified.
      o.auth_ca_file.empty() ? std::string("  httpclient.ssl.verify required\n")
                             : fmt::format("  httpclient.ssl.ca-file {}\n"
                                           "  httpclient.ssl.verify required\n",
                                           o.auth_ca_file.string()));
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
      "unless {{ path,map_beg({1}) -m found }}\n",
      HostPort(o.bind_address, o.bind_port), map, dir, kLogSocket, kRequestLogFormat);
  // Callers are checked here, in the frontend, before any backend sees the
  // request: a refused request is never in a service's counters (in flight,
  // requests) and never wakes a service at zero. auth.map holds, per route
  // that checks its callers, "URL|ADDRESS" (RenderAuthMap).
  out += "  http-request del-header X-Berth-User\n";  // the gateway's to set, never the caller's
  out += fmt::format("  http-request set-var(txn.berth_check) path,map_beg({}/{})\n", dir,
                     kAuthMapFile);
  out += "  http-request lua.berth_auth if { var(txn.berth_check) -m found }\n";
  for (const auto& [code, text] :
       {std::pair{401, "a Berth token is needed: Authorization: Bearer TOKEN"},
        std::pair{403, "this token may not call the service"}, std::pair{404, "no such service"},
        std::pair{429, "too many requests from this token"},
        std::pair{503, "berthd cannot check the caller now"}}) {
    out += fmt::format(
        "  http-request return status {0} content-type text/plain string \"{1}\" {2}if {{ "
        "var(txn.berth_auth) -m str {0} }}\n",
        code, text, code == 401 ? "hdr WWW-Authenticate \"Bearer realm=\\\"berth\\\"\" " : "");
  }
  out += "  http-request del-header Authorization if { var(txn.berth_check) -m found }\n";
  out +=
      "  http-request set-header X-Berth-User %[var(txn.berth_user)] if { var(txn.berth_check) -m "
      "found }\n";
  out += fmt::format("  use_backend %[path,map_beg({})]\n", map);
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

std::string RenderAuthMap(const std::vector<Route>& routes) {
  std::string out;
  for (const Route& r : routes) {
    if (r.auth_url.empty()) continue;
    out += fmt::format("{} {}|{}\n", RoutePrefix(r), r.auth_url, r.auth_address);
  }
  return out;
}

std::string HoldLua() {
  // Counters live in the worker's one Lua state (lua-load, not per thread);
  // they start at zero in each new worker, as HAProxy's own counters do.
  std::string lua = R"lua(-- Rendered by Berth's gateway (src/gateway/config.cc).

-- berth_auth: may this caller call the route? txn.berth_check holds the
-- route's "URL|ADDRESS" (auth.map): berthd answers at URL, reached at
-- ADDRESS (GET, with the caller's Authorization header), 200 and
-- X-Berth-User when it may, else 401/403/404/429. The verdict is kept @ALLOW@ s (allowed) or
-- @DENY@ s (refused) per route and Authorization value; a request without the
-- header is refused here. While berthd cannot be reached, a caller allowed
-- within the last @STALE@ s stays allowed; any other gets 503. The verdict goes
-- to txn.berth_auth ("ok" or the status), the caller's name to
-- txn.berth_user; haproxy.cfg's rules act on them.
berth_auth_cache = {}
berth_auth_entries = 0

core.register_action("berth_auth", {"http-req"}, function(txn)
  local check = txn:get_var("txn.berth_check") or ""
  local bar = string.find(check, "|", 1, true)
  if bar == nil then
    txn:set_var("txn.berth_auth", "503")
    return
  end
  local url = string.sub(check, 1, bar - 1)
  local address = string.sub(check, bar + 1)
  local h = txn.http:req_get_headers()["authorization"]
  local given = h and h[0]
  if given == nil or given == "" then
    txn:set_var("txn.berth_auth", "401")
    return
  end
  local key = check .. " " .. given
  local now = core.now().sec
  local seen = berth_auth_cache[key]
  if seen ~= nil and seen.fresh >= now then
    txn:set_var("txn.berth_auth", seen.verdict)
    txn:set_var("txn.berth_user", seen.user)
    return
  end
  local res = core.httpclient():get{url = url, dst = address,
                                     headers = {["authorization"] = {given}}, timeout = 5000}
  local status = res and res.status or 0
  local verdict
  if status == 204 or status == 200 then
    verdict = "ok"
  elseif status == 401 or status == 403 or status == 404 or status == 429 then
    verdict = tostring(status)
  else
    -- berthd did not answer (or failed): keep a recent "ok", else 503.
    if seen ~= nil and seen.verdict == "ok" and seen.stale >= now then
      txn:set_var("txn.berth_auth", "ok")
      txn:set_var("txn.berth_user", seen.user)
    else
      txn:set_var("txn.berth_auth", "503")
    end
    return
  end
  local user = ""
  if verdict == "ok" and res.headers ~= nil and res.headers["x-berth-user"] ~= nil then
    user = res.headers["x-berth-user"][0] or ""
  end
  if seen == nil then
    if berth_auth_entries >= 10000 then
      berth_auth_cache = {}
      berth_auth_entries = 0
    end
    berth_auth_entries = berth_auth_entries + 1
  end
  local keep = verdict == "ok" and @ALLOW@ or @DENY@
  berth_auth_cache[key] = {verdict = verdict, user = user, fresh = now + keep,
                           stale = now + @STALE@}
  txn:set_var("txn.berth_auth", verdict)
  txn:set_var("txn.berth_user", user)
end)

-- Hold at zero.
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
  // The verdicts' lifetimes, from route.h.
  for (const auto& [mark, value] :
       {std::pair{"@ALLOW@", kAuthAllowSeconds}, std::pair{"@DENY@", kAuthDenySeconds},
        std::pair{"@STALE@", kAuthStaleSeconds}}) {
    for (auto at = lua.find(mark); at != std::string::npos; at = lua.find(mark)) {
      lua.replace(at, std::string_view(mark).size(), std::to_string(value));
    }
  }
  return lua;
}

}  // namespace berth::gateway
