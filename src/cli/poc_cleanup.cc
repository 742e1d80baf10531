#include "cli/poc_cleanup.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "cli/json_view.h"
#include "common/units.h"

namespace berth::cli::poc {
namespace {

using nlohmann::json;

// How long cleanup waits for the run's jobs to end after cancelling them,
// before rolling the policy back (a policy that strands live jobs is
// refused).
constexpr std::int64_t kPocCleanupWaitMs = 60'000;

bool PocCleanupTerminal(const std::string& state) {
  return state == "Succeeded" || state == "Failed" || state == "Cancelled";
}

}  // namespace

std::string RunPolicyComment(const std::string& run) {
  return fmt::format("berth poc run {}: its tenants (rolled back when it ends)", run);
}

std::string RunRollbackComment(const std::string& run) {
  return fmt::format("berth poc run {} ended", run);
}

bool IsRunPrefix(std::string_view run) {
  if (!run.starts_with("poc-") || run.size() == 4) return false;
  for (char ch : run.substr(4)) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z'))) return false;
  }
  return true;
}

void CancelJobs(ApiClient& admin, const std::vector<std::uint64_t>& ids, const CleanupClock& clock,
                json& c) {
  // A 429 (berthd's --rate-limit; a run's burst can leave hundreds of jobs)
  // is waited out and asked again.
  auto patient = [&clock](auto ask) {
    auto r = ask();
    for (int tries = 0; !r && HttpStatus(r.error().code) == 429 && tries < 50; ++tries) {
      clock.sleep(std::max<std::int64_t>(clock.poll_ms, 100));
      r = ask();
    }
    return r;
  };
  auto get = [&](std::uint64_t id) {
    return patient([&] { return admin.Get(fmt::format("/v1/jobs/{}", id)); });
  };
  std::set<std::uint64_t> live;
  for (auto id : ids) {
    auto job = get(id);
    if (job && PocCleanupTerminal(Text(*job, "state"))) {
      c["jobs_already_ended"] = c["jobs_already_ended"].get<int>() + 1;
      continue;
    }
    auto r = patient(
        [&] { return admin.Post(fmt::format("/v1/jobs/{}/cancel", id), "", "application/json"); });
    if (r) {
      c["jobs_cancelled"].push_back(id);
      live.insert(id);
    } else {
      c["problems"].push_back(fmt::format("job {}: cancel refused: {}", id, r.error().message));
    }
  }
  const TimeMs deadline = clock.clock->NowMs() + kPocCleanupWaitMs;
  while (!live.empty() && clock.clock->NowMs() < deadline) {
    for (auto it = live.begin(); it != live.end();) {
      auto job = get(*it);
      it = job && PocCleanupTerminal(Text(*job, "state")) ? live.erase(it) : std::next(it);
    }
    if (!live.empty()) clock.sleep(clock.poll_ms);
  }
  for (auto id : live) {
    c["problems"].push_back(fmt::format("job {} had not ended {} after its cancel", id,
                                        FormatDurationMs(kPocCleanupWaitMs)));
  }
}

void DeleteServices(ApiClient& admin,
                    const std::vector<std::pair<std::string, std::string>>& services,
                    const CleanupClock& clock, json& c) {
  std::set<std::uint64_t> live;
  for (const auto& [tenant, name] : services) {
    const std::string path = fmt::format("/v1/services/{}/{}", tenant, name);
    auto shown = admin.Get(path);
    if (!shown) {
      if (shown.error().code == Code::kNotFound) {
        c["services_deleted"].push_back(tenant + "/" + name);
      } else {
        c["problems"].push_back(
            fmt::format("service {}/{}: {}", tenant, name, shown.error().message));
      }
      continue;
    }
    auto r = admin.Delete(path);
    if (!r && r.error().code != Code::kNotFound) {
      c["problems"].push_back(
          fmt::format("service {}/{}: delete refused: {}", tenant, name, r.error().message));
      continue;
    }
    c["services_deleted"].push_back(tenant + "/" + name);
    for (const auto& replica : Array(*shown, "status.replicas")) {
      if (auto id = Int(replica, "job")) live.insert(static_cast<std::uint64_t>(*id));
    }
  }
  const TimeMs deadline = clock.clock->NowMs() + kPocCleanupWaitMs;
  while (!live.empty()) {
    for (auto it = live.begin(); it != live.end();) {
      auto job = admin.Get(fmt::format("/v1/jobs/{}", *it));
      it = job && PocCleanupTerminal(Text(*job, "state")) ? live.erase(it) : std::next(it);
    }
    if (live.empty() || clock.clock->NowMs() >= deadline) break;
    clock.sleep(clock.poll_ms);
  }
  for (auto id : live) {
    c["problems"].push_back(
        fmt::format("replica job {} had not ended {} after its service was "
                    "deleted",
                    id, FormatDurationMs(kPocCleanupWaitMs)));
  }
}

json CleanUpRun(ApiClient& admin, const RunLeftovers& what, const CleanupClock& clock) {
  json c{{"services_deleted", json::array()},
         {"jobs_cancelled", json::array()},
         {"jobs_already_ended", 0},
         {"tokens_revoked", json::array()},
         {"identities_disabled", json::array()},
         {"budgets_removed", json::array()},
         {"policy", json()},
         {"problems", json::array()}};
  DeleteServices(admin, what.services, clock, c);
  CancelJobs(admin, what.jobs, clock, c);
  for (const auto& [id, who] : what.tokens) {
    auto r = admin.Post(fmt::format("/v1/tokens/{}/revoke", id), "", "application/json");
    if (r) {
      c["tokens_revoked"].push_back({{"id", id}, {"identity", who}});
    } else {
      c["problems"].push_back(fmt::format("token {} of {}: {}", id, who, r.error().message));
    }
  }
  for (const auto& real : what.identities) {
    auto r = admin.Post(fmt::format("/v1/identities/{}/disable", real), "", "application/json");
    if (r) {
      c["identities_disabled"].push_back(real);
    } else {
      c["problems"].push_back(fmt::format("identity {}: {}", real, r.error().message));
    }
  }
  // A budget a case set on one of the run's tenants goes with the tenant.
  for (const auto& tenant : what.tenants) {
    auto r = admin.Delete("/v1/budgets/" + tenant);
    if (r) {
      c["budgets_removed"].push_back(tenant);
    } else if (r.error().code != Code::kNotFound) {
      c["problems"].push_back(fmt::format("budget of {}: {}", tenant, r.error().message));
    }
  }
  if (!what.policy_problem.empty()) c["problems"].push_back(what.policy_problem);
  if (what.policy_during > 0) {
    // Roll back only the version the run applied: a version someone else
    // applied since would be lost, so that is left to a person.
    auto active = admin.Get("/v1/policy");
    const auto now = active ? Int(*active, "version").value_or(0) : 0;
    if (now != what.policy_during) {
      c["problems"].push_back(fmt::format(
          "the policy is at version {}, not the run's {}: someone applied a policy during the "
          "run, so it was not rolled back; remove the run's tenants ({}-*) by hand "
          "(berth policy show, berth policy apply)",
          now, what.policy_during, what.run));
      return c;
    }
    auto r =
        admin.Post("/v1/policy/rollback" + QueryString({{"to", std::to_string(what.policy_before)},
                                                        {"comment", RunRollbackComment(what.run)}}),
                   "", "application/json");
    if (r) {
      c["policy"] = {{"restored", what.policy_before},
                     {"as_version", Int(*r, "version").value_or(0)}};
    } else {
      c["problems"].push_back(
          fmt::format("policy rollback to version {}: {}", what.policy_before, r.error().message));
    }
  }
  return c;
}

Result<RunLeftovers> FindLeftovers(ApiClient& admin, const std::string& run) {
  auto me = admin.Get("/v1/whoami");
  if (!me) return std::unexpected(me.error());
  if (!Bool(*me, "platform_admin")) {
    return Fail(Code::kPermissionDenied,
                fmt::format("berth poc cleanup needs a platform admin's token (it cancels jobs of "
                            "every tenant, disables identities and rolls the policy back); {} is "
                            "not one: berth login as a platform admin",
                            Text(*me, "name")));
  }
  RunLeftovers left;
  left.run = run;
  const std::string prefix = run + "-";
  auto jobs = GetAllPages(admin, "/v1/jobs", {{"state", "Pending,Scheduled,Running"}}, "jobs", 0,
                          PageOrder::kAppend);
  if (!jobs) return std::unexpected(jobs.error());
  for (const auto& j : *jobs) {
    if (!Text(j, "tenant").starts_with(prefix)) continue;
    if (PocCleanupTerminal(Text(j, "state"))) continue;
    // A service's replica ends with its service, below.
    if (const json* svc = Field(j, "service"); svc != nullptr && !svc->is_null()) continue;
    left.jobs.push_back(j.value("id", std::uint64_t{0}));
  }
  auto services = GetAllPages(admin, "/v1/services", {}, "services", 0, PageOrder::kAppend);
  if (!services) return std::unexpected(services.error());
  for (const auto& svc : *services) {
    if (Text(svc, "tenant").starts_with(prefix)) {
      left.services.emplace_back(Text(svc, "tenant"), Text(svc, "name"));
    }
  }
  auto ids = GetAllPages(admin, "/v1/identities", {}, "identities", 0, PageOrder::kAppend);
  if (!ids) return std::unexpected(ids.error());
  for (const auto& id : *ids) {
    const std::string name = Text(id, "name");
    if (!name.starts_with(prefix)) continue;
    auto tokens =
        GetAllPages(admin, "/v1/tokens", {{"identity", name}}, "tokens", 0, PageOrder::kAppend);
    if (!tokens) return std::unexpected(tokens.error());
    for (const auto& t : *tokens) {
      const json* revoked = Field(t, "revoked_ms");
      if (revoked != nullptr && !revoked->is_null()) continue;
      left.tokens.emplace_back(Text(t, "id"), name);
    }
    if (!Bool(id, "disabled")) left.identities.push_back(name);
  }
  auto budgets = admin.Get("/v1/budgets");
  if (!budgets) return std::unexpected(budgets.error());
  for (const auto& b : Array(*budgets, "budgets")) {
    if (Text(b, "tenant").starts_with(prefix)) left.tenants.push_back(Text(b, "tenant"));
  }
  auto versions = admin.Get("/v1/policy/versions");
  if (!versions) return std::unexpected(versions.error());
  const std::int64_t active = Int(*versions, "active").value_or(0);
  std::int64_t applied = 0;
  bool rolled_back = false;
  for (const auto& v : Array(*versions, "versions")) {
    const std::int64_t n = Int(v, "version").value_or(0);
    if (Text(v, "comment") == RunPolicyComment(run)) applied = std::max(applied, n);
  }
  std::int64_t before = 0;
  for (const auto& v : Array(*versions, "versions")) {
    const std::int64_t n = Int(v, "version").value_or(0);
    if (n < applied) before = std::max(before, n);
    if (n > applied && Text(v, "comment") == RunRollbackComment(run)) rolled_back = true;
  }
  if (applied > 0 && !rolled_back) {
    if (applied == active) {
      // Each apply and rollback makes the next version and activates it, so
      // the run's version was applied over the one just below it (the run
      // sends that as its base_version).
      left.policy_during = applied;
      left.policy_before = before;
    } else {
      left.policy_problem = fmt::format(
          "the run applied policy version {} but version {} is active: someone applied a "
          "policy since, so it is not rolled back; remove the run's tenants ({}-*) by hand "
          "(berth policy show, berth policy apply)",
          applied, active, run);
    }
  }
  return left;
}

}  // namespace berth::cli::poc
