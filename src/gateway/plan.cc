#include "gateway/plan.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace berth::gateway {

ServerPlan PlanServers(const std::vector<Route>& wanted, const std::vector<RouteStats>& live,
                       bool old_workers_alive) {
  ServerPlan plan;
  std::map<std::string, const RouteStats*> live_by_backend;
  for (const RouteStats& r : live) live_by_backend[BackendName(r.tenant, r.service)] = &r;

  for (const Route& route : wanted) {
    const std::string be = BackendName(route.tenant, route.service);
    auto found = live_by_backend.find(be);
    if (found == live_by_backend.end()) continue;
    const RouteStats& now = *found->second;
    auto label = [&](const std::string& id) {
      return fmt::format("{}/{}/{}", route.tenant, route.service, id);
    };
    auto cmd = [&](std::string c) { plan.commands.push_back(std::move(c)); };

    std::map<std::string, const ServerStats*> live_servers;
    for (const ServerStats& s : now.servers) live_servers[s.id] = &s;
    std::set<std::string> wanted_ids;

    for (const RouteBackend& b : route.backends) {
      wanted_ids.insert(b.id);
      const std::string srv = fmt::format("{}/{}", be, b.id);
      auto it = live_servers.find(b.id);
      if (it == live_servers.end()) {
        std::string add =
            fmt::format("add server {} {} weight {}", srv, HostPort(b.address, b.port), b.weight);
        if (route.max_conn_per_backend > 0) {
          add += fmt::format(" maxconn {}", route.max_conn_per_backend);
        }
        cmd(add);
        if (!b.draining) {
          cmd(fmt::format("enable server {}", srv));
          plan.report.added.push_back(label(b.id));
        }
        continue;
      }
      const ServerStats& s = *it->second;
      bool updated = false;
      if (s.address != b.address || s.port != b.port) {
        cmd(fmt::format("set server {} addr {} port {}", srv, b.address, b.port));
        updated = true;
      }
      if (s.weight != b.weight) {
        cmd(fmt::format("set server {} weight {}", srv, b.weight));
        updated = true;
      }
      if (updated) plan.report.updated.push_back(label(b.id));
      const bool takes_requests = s.state == ServerState::kReady || s.state == ServerState::kDown;
      if (b.draining && takes_requests) {
        cmd(fmt::format("set server {} state drain", srv));
        plan.report.drained.push_back(label(b.id));
      } else if (!b.draining && !takes_requests) {
        cmd(fmt::format("set server {} state ready", srv));
        plan.report.enabled.push_back(label(b.id));
      }
    }

    for (const ServerStats& s : now.servers) {
      if (wanted_ids.contains(s.id)) continue;
      const std::string srv = fmt::format("{}/{}", be, s.id);
      if (s.state == ServerState::kReady || s.state == ServerState::kDown) {
        cmd(fmt::format("set server {} state drain", srv));
        plan.report.drained.push_back(label(s.id));
        plan.report.draining.push_back(label(s.id));
      } else if (s.current == 0 && s.queued == 0 && !old_workers_alive) {
        if (s.state != ServerState::kMaint) cmd(fmt::format("set server {} state maint", srv));
        cmd(fmt::format("del server {}", srv));
        plan.report.removed.push_back(label(s.id));
      } else {
        plan.report.draining.push_back(label(s.id));
      }
    }
  }
  plan.report.commands = plan.commands;
  return plan;
}

}  // namespace berth::gateway
