#include "gateway/stats.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>

namespace berth::gateway {

std::string_view ServerStateName(ServerState state) {
  switch (state) {
    case ServerState::kReady:
      return "ready";
    case ServerState::kDrain:
      return "drain";
    case ServerState::kMaint:
      return "maint";
    case ServerState::kDown:
      return "down";
  }
  return "maint";
}

std::int64_t RouteStats::ready_servers() const {
  std::int64_t n = 0;
  for (const auto& s : servers) n += s.state == ServerState::kReady && s.weight > 0 ? 1 : 0;
  return n;
}

namespace {

std::vector<std::string_view> StatsSplit(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = line.find(sep, start);
    if (at == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, at - start));
    start = at + 1;
  }
}

// An empty field is 0 (HAProxy leaves counters empty where they do not apply).
std::optional<std::int64_t> StatsInt(std::string_view s) {
  if (s.empty()) return 0;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

ServerState StatsServerState(std::string_view status) {
  if (status == "no check" || status.starts_with("UP")) return ServerState::kReady;
  if (status.starts_with("DRAIN") || status.starts_with("NOLB")) return ServerState::kDrain;
  if (status.starts_with("DOWN")) return ServerState::kDown;
  return ServerState::kMaint;  // "MAINT", "MAINT(via)", "MAINT(resolution)", ...
}

}  // namespace

Result<std::vector<RouteStats>> ParseShowStat(std::string_view csv) {
  std::vector<RouteStats> routes;
  std::map<std::string, std::size_t, std::less<>> column;
  std::map<std::string, std::size_t, std::less<>> route_index;
  std::size_t line_no = 0;
  std::size_t start = 0;
  while (start < csv.size()) {
    std::size_t end = csv.find('\n', start);
    if (end == std::string_view::npos) end = csv.size();
    std::string_view line = csv.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.starts_with("# ")) {
      auto names = StatsSplit(line.substr(2), ',');
      for (std::size_t i = 0; i < names.size(); ++i) {
        if (!names[i].empty()) column.emplace(std::string(names[i]), i);
      }
      continue;
    }
    if (column.empty()) {
      return Fail(Code::kInternal, "show stat: a row before the header line", "line 1");
    }
    auto cells = StatsSplit(line, ',');
    auto cell = [&](std::string_view name) -> std::string_view {
      auto it = column.find(name);
      if (it == column.end() || it->second >= cells.size()) return {};
      return cells[it->second];
    };
    std::string bad_column;
    auto num = [&](std::string_view name) -> std::int64_t {
      auto v = StatsInt(cell(name));
      if (!v) {
        if (bad_column.empty()) bad_column = std::string(name);
        return 0;
      }
      return *v;
    };
    for (const char* required : {"pxname", "svname", "scur", "status"}) {
      if (!column.contains(required)) {
        return Fail(Code::kInternal, fmt::format("show stat: no column '{}'", required), required);
      }
    }
    const std::string_view px = cell("pxname");
    const std::string_view sv = cell("svname");
    const std::size_t colon = px.find(':');
    if (colon == std::string_view::npos || sv == "FRONTEND") continue;  // not a route
    auto [it, inserted] = route_index.try_emplace(std::string(px), routes.size());
    if (inserted) {
      routes.push_back(RouteStats{});
      routes.back().tenant = std::string(px.substr(0, colon));
      routes.back().service = std::string(px.substr(colon + 1));
    }
    RouteStats& r = routes[it->second];
    if (sv == "BACKEND") {
      r.current = num("scur");
      r.queued = num("qcur");
      r.total = num("stot");
      r.responses_2xx = num("hrsp_2xx");
      r.responses_5xx = num("hrsp_5xx");
      r.avg_response_ms = num("rtime");
      r.avg_total_ms = num("ttime");
      r.avg_queue_ms = num("qtime");
    } else {
      ServerStats s;
      s.id = std::string(sv);
      s.status = std::string(cell("status"));
      s.state = StatsServerState(s.status);
      const std::string_view addr = cell("addr");
      const std::size_t port_at = addr.rfind(':');
      if (port_at != std::string_view::npos) {
        std::string_view host = addr.substr(0, port_at);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
          host = host.substr(1, host.size() - 2);
        }
        s.address = std::string(host);
        s.port = static_cast<int>(StatsInt(addr.substr(port_at + 1)).value_or(0));
      }
      s.weight = static_cast<int>(column.contains("uweight") ? num("uweight") : num("weight"));
      s.current = num("scur");
      s.queued = num("qcur");
      s.total = num("stot");
      s.max_conn = num("slim");
      r.servers.push_back(std::move(s));
    }
    if (!bad_column.empty()) {
      return Fail(
          Code::kInternal,
          fmt::format("show stat line {}: column '{}' is not a number", line_no, bad_column),
          bad_column);
    }
  }
  return routes;
}

Status MergeHeld(std::string_view held_text, std::vector<RouteStats>& routes) {
  std::size_t start = 0;
  while (start < held_text.size()) {
    std::size_t end = held_text.find('\n', start);
    if (end == std::string_view::npos) end = held_text.size();
    const std::string_view line = held_text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    auto parts = StatsSplit(line, ' ');
    if (parts.size() != 4) {
      return Fail(Code::kInternal, fmt::format("show berth-held: '{}' is not 4 fields", line));
    }
    auto now = StatsInt(parts[1]);
    auto total = StatsInt(parts[2]);
    auto expired = StatsInt(parts[3]);
    if (!now || !total || !expired) {
      return Fail(Code::kInternal, fmt::format("show berth-held: '{}' has a bad count", line));
    }
    for (RouteStats& r : routes) {
      if (parts[0] == fmt::format("{}:{}", r.tenant, r.service)) {
        r.held_now = *now;
        r.held_total = *total;
        r.held_expired = *expired;
      }
    }
  }
  return Ok();
}

}  // namespace berth::gateway
