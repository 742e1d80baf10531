// The policy's routes: read it and its versions, apply (a tenant admin only
// within its own tenants), roll back and diff; the scheduling history export
// and the preview of a policy over it.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "api/api.h"
#include "api/api_util.h"
#include "api/history.h"
#include "api/policy_diff.h"
#include "api/policy_preview.h"
#include "api/render.h"
#include "api/request_decode.h"
#include "common/units.h"
#include "control/snapshot_builder.h"
#include "model/json.h"
#include "sim/history.h"

namespace berth::server {

using nlohmann::json;

namespace {

Result<std::int64_t> VersionNumber(const std::string& s, const std::string& field) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) {
    return InvalidField(field, fmt::format("'{}' is not a policy version; versions are positive "
                                           "integers (see GET /v1/policy/versions)",
                                           s));
  }
  return v;
}

// Which tenants' jobs a GPU listing names: those of the request's scope.
Status TenantAdminMayApply(const Caller& caller, const model::Policy& from,
                           const model::Policy& to) {
  const json changes = PolicyChanges(from, to);
  auto refuse = [&](const std::string& what) -> Status {
    return Fail(Code::kPermissionDenied,
                fmt::format("{} may change only the queues below the tenants it administers; "
                            "this policy also changes {} (ask a platform-admin, or file a quota "
                            "request for a tenant's own quota)",
                            caller.name, what),
                "body");
  };
  bool manages_any = false;
  for (const auto& [tenant, role] : caller.tenants)
    manages_any |= role == store::Role::kTenantAdmin;
  if (!manages_any) {
    return Fail(Code::kPermissionDenied,
                fmt::format("applying a policy needs a platform-admin, or a tenant-admin for "
                            "queues of its tenant; {} is neither",
                            caller.name),
                {});
  }
  if (const json settings = changes.value("settings_changed", json::array()); !settings.empty()) {
    return refuse(fmt::format("the setting {}", settings[0].get<std::string>()));
  }
  // Run identities, storage grants and networks decide what jobs reach on
  // the nodes: a platform admin's alone, for the tenant-admin's own tenant too.
  if (const json t = changes.value("tenant_changes", json::array()); !t.empty()) {
    return refuse(fmt::format("tenants.{}.{}", t[0].value("tenant", ""), t[0].value("field", "")));
  }
  auto check_queue = [&](const std::string& path) -> Status {
    const auto slash = path.find('/');
    const std::string tenant = path.substr(0, slash);
    if (slash == std::string::npos) return refuse(fmt::format("tenant {}'s own queue", tenant));
    if (!caller.CanManage(tenant)) return refuse(fmt::format("queue {}", path));
    return {};
  };
  for (const char* list : {"queues_added", "queues_removed"}) {
    for (const auto& q : changes.value(list, json::array())) {
      BERTH_RETURN_IF_ERROR(check_queue(q.get<std::string>()));
    }
  }
  for (const char* list : {"quota_changes", "queue_changes"}) {
    for (const auto& c : changes.value(list, json::array())) {
      BERTH_RETURN_IF_ERROR(check_queue(c.value("queue", "")));
    }
  }
  // The checks above name what changed; this one holds for whatever a
  // policy grows next: outside the queues below the caller's tenants, the
  // two documents must be the same.
  auto outside = [&](model::Policy p) {
    std::erase_if(p.queues, [&](const model::QueuePolicy& q) {
      return !q.parent.empty() && caller.CanManage(q.tenant);
    });
    return model::PolicyToYaml(p);
  };
  if (outside(from) != outside(to)) return refuse("settings outside those queues");
  return {};
}

constexpr std::string_view kDefaultWindow = "7d";

// A policy version as a caller of `scope` may read it. The `tenants` entries of
// tenants it is not a member of (who their jobs run as on the nodes, the
// paths they may use) are a platform admin's to see: for anyone else they
// are withheld, and the document shown is the normalized one without them.
store::PolicyVersion VisibleTo(const model::TenantScope& scope, store::PolicyVersion v) {
  if (scope.all()) return v;
  const std::size_t withheld =
      std::erase_if(v.policy.tenants, [&](const auto& t) { return !scope.Contains(t.first); });
  if (withheld == 0) return v;
  v.normalized = model::PolicyToYaml(v.policy);
  v.yaml = fmt::format(
               "# the tenants entries of {} tenant{} you are not a member of are withheld (run "
               "identities "
               "and storage grants are shown to their own tenants and platform admins only)\n",
               withheld, withheld == 1 ? "" : "s") +
           v.normalized;
  return v;
}

}  // namespace

void Api::GetPolicy(const http::Request&, http::Response& res, const model::TenantScope& scope) {
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  Reply(res, 200, PolicyVersionJson(VisibleTo(scope, **active), (*active)->version, true));
}

void Api::ListPolicyVersions(const http::Request&, http::Response& res) {
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  auto versions = store_.ListPolicyVersions();
  if (!versions) return ReplyError(res, versions.error());
  json list = json::array();
  for (const auto& v : *versions) list.push_back(PolicyVersionJson(v, (*active)->version, false));
  Reply(res, 200, json{{"active", (*active)->version}, {"versions", list}});
}

void Api::GetPolicyVersion(const http::Request& req, http::Response& res,
                           const model::TenantScope& scope) {
  auto number = VersionNumber(req.matches[1], "version");
  if (!number) return ReplyError(res, number.error());
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  auto v = store_.GetPolicyVersion(*number);
  if (!v) return ReplyError(res, v.error());
  Reply(res, 200, PolicyVersionJson(VisibleTo(scope, *v), (*active)->version, true));
}

void Api::ApplyPolicy(const http::Request& req, http::Response& res, AuditNote& note,
                      const model::TenantScope& scope) {
  note.object = "policy";
  if (auto active = controller_.ActivePolicy(); active) {
    note.before = json{{"version", (*active)->version}};
  }
  std::string dry_run = req.get_param_value("dry_run");
  // A dry run applies nothing, refused or not: no audit record.
  note.skip = dry_run == "true" || dry_run == "1";
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "the request body must be a policy document (YAML); see "
                                 "docs/policy.md",
                                 "body"});
  }
  // A platform admin changes anything; a tenant-admin only queues below its
  // tenants' top-level queues (whose quota is the tenant's, changed by a
  // quota request). The proposal is checked as it would be applied.
  std::string body = req.body;
  const Caller& caller = CurrentCaller();
  if (!caller.platform_admin) {
    auto active = controller_.ActivePolicy();
    if (!active) return ReplyError(res, active.error());
    auto proposed = controller_.PreviewPolicy(body, Actor(req));
    if (!proposed) return ReplyError(res, proposed.error());
    // The document it could read lacked other tenants' entries (VisibleTo):
    // they stay as they are, so what is applied is the proposal with them.
    model::Policy merged = proposed->policy;
    bool restored = false;
    for (const auto& [tenant, entry] : (*active)->policy.tenants) {
      if (!scope.Contains(tenant) && !merged.tenants.contains(tenant)) {
        merged.tenants[tenant] = entry;
        restored = true;
      }
    }
    if (restored) {
      body = model::PolicyToYaml(merged);
      proposed = controller_.PreviewPolicy(body, Actor(req));
      if (!proposed) return ReplyError(res, proposed.error());
    }
    if (auto st = TenantAdminMayApply(caller, (*active)->policy, proposed->policy); !st) {
      return ReplyError(res, st.error());
    }
  }
  if (note.skip) {
    // A preview: the diff from the active version, or the error applying
    // would give.
    auto active = controller_.ActivePolicy();
    if (!active) return ReplyError(res, active.error());
    auto proposed = controller_.PreviewPolicy(body, Actor(req));
    if (!proposed) return ReplyError(res, proposed.error());
    const store::PolicyVersion from = VisibleTo(scope, **active);
    const store::PolicyVersion to = VisibleTo(scope, *proposed);
    return Reply(res, 200,
                 json{{"dry_run", true},
                      {"from", from.version},
                      {"to", to.version},
                      {"diff", UnifiedDiff(from.normalized, to.normalized,
                                           fmt::format("policy v{}", from.version),
                                           fmt::format("policy v{} (not applied)", to.version))},
                      {"changes", PolicyChanges(from.policy, to.policy)}});
  }
  // Based on a version: refused with 409 if another landed since (checked
  // in the applying transaction, so two applies on one base: one wins).
  auto base = BaseVersion(req);
  if (!base) return ReplyError(res, base.error());
  const std::string comment = req.get_param_value("comment");
  auto version = controller_.ApplyPolicy(
      body, Actor(req), comment, *base,
      RecordInChange<std::int64_t>(note, req, res, clock_.NowMs(),
                                   [&comment](AuditNote& n, const std::int64_t& made) {
                                     n.object = fmt::format("policy/v{}", made);
                                     n.after = json{{"version", made}, {"comment", comment}};
                                   }));
  if (!version) return ReplyError(res, version.error());
  res.set_header("Location", fmt::format("/v1/policy/versions/{}", *version));
  Reply(res, 201, json{{"version", *version}});
}

void Api::RollbackPolicy(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "policy";
  if (auto active = controller_.ActivePolicy(); active) {
    note.before = json{{"version", (*active)->version}};
  }
  if (!req.has_param("to")) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "is required: the version to roll back to, e.g. ?to=3", "to"});
  }
  auto to = VersionNumber(req.get_param_value("to"), "to");
  if (!to) return ReplyError(res, to.error());
  note.after = json{{"restores", *to}};
  auto version = controller_.RollbackPolicy(
      *to, Actor(req), req.get_param_value("comment"),
      RecordInChange<std::int64_t>(note, req, res, clock_.NowMs(),
                                   [](AuditNote& n, const std::int64_t& made) {
                                     n.object = fmt::format("policy/v{}", made);
                                     n.after["version"] = made;
                                   }));
  if (!version) return ReplyError(res, version.error());
  res.set_header("Location", fmt::format("/v1/policy/versions/{}", *version));
  Reply(res, 201, json{{"version", *version}, {"restores", *to}});
}

void Api::DiffPolicy(const http::Request& req, http::Response& res,
                     const model::TenantScope& scope) {
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  std::int64_t to = (*active)->version;
  if (req.has_param("to")) {
    auto v = VersionNumber(req.get_param_value("to"), "to");
    if (!v) return ReplyError(res, v.error());
    to = *v;
  }
  // Version 0 is the empty document before version 1.
  std::int64_t from = to - 1;
  if (req.has_param("from")) {
    auto v = VersionNumber(req.get_param_value("from"), "from");
    if (!v) return ReplyError(res, v.error());
    from = *v;
  }
  auto to_v = store_.GetPolicyVersion(to);
  if (!to_v) return ReplyError(res, Error{to_v.error().code, to_v.error().message, "to"});
  *to_v = VisibleTo(scope, std::move(*to_v));
  store::PolicyVersion from_v;  // version 0: no text, no queues
  if (from > 0) {
    auto v = store_.GetPolicyVersion(from);
    if (!v) return ReplyError(res, Error{v.error().code, v.error().message, "from"});
    from_v = VisibleTo(scope, std::move(*v));
  }
  std::string diff = UnifiedDiff(from_v.normalized, to_v->normalized,
                                 fmt::format("policy v{}", from), fmt::format("policy v{}", to));
  Reply(res, 200,
        json{{"from", from},
             {"to", to},
             {"diff", diff},
             {"changes", PolicyChanges(from_v.policy, to_v->policy)}});
}

void Api::History(const http::Request& req, http::Response& res) {
  const TimeMs now = clock_.NowMs();
  auto since =
      TimeParam(req.has_param("since") ? req.get_param_value("since") : std::string(kDefaultWindow),
                "since", now);
  if (!since) return ReplyError(res, since.error());
  TimeMs until = now;
  if (req.has_param("until")) {
    auto u = TimeParam(req.get_param_value("until"), "until", now);
    if (!u) return ReplyError(res, u.error());
    until = *u;
  }
  if (until < *since) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 fmt::format("until ({}) is before since ({})", FormatTimeMs(until),
                                             FormatTimeMs(*since)),
                                 "until"});
  }
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  // The same read cap as the operations report: jobs and their runs,
  // counted together; one job more than the cap says the window is over it,
  // and nothing partial is ever exported.
  constexpr std::string_view kRows = "stored rows (jobs and runs)";
  const std::size_t cap = report_max_rows_;
  auto jobs = store_.JobsSubmittedBetween(*since, until, cap + 1);
  if (!jobs) return ReplyError(res, jobs.error());
  std::size_t read = 0;
  for (const auto& j : *jobs) read += 1 + j.runs.size();
  if (read > cap) {
    return ReplyError(res, WindowTooLarge(kRows, *since, until, cap, "since", "until"));
  }
  auto nodes = store_.ListNodes();
  if (!nodes) return ReplyError(res, nodes.error());
  Reply(res, 200, HistoryJson(*jobs, *nodes, **active, *since, until, now));
}

void Api::PreviewPolicy(const http::Request& req, http::Response& res) {
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "the request body must be the proposed policy (YAML); see "
                                 "docs/policy.md",
                                 "body"});
  }
  const TimeMs now = clock_.NowMs();
  std::string window =
      req.has_param("window") ? req.get_param_value("window") : std::string(kDefaultWindow);
  auto window_ms = ParseDurationMs(window);
  if (!window_ms || *window_ms <= 0) {
    return ReplyError(
        res,
        Error{Code::kInvalidArgument,
              fmt::format("'{}' is not a positive duration such as 7d or 12h", window), "window"});
  }
  auto prices = ParsePrices(req.get_param_value("prices"));
  if (!prices) return ReplyError(res, prices.error());
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  // The same checks as POST /v1/policy, errors and all; nothing is stored.
  auto proposed = controller_.PreviewPolicy(req.body, Actor(req));
  if (!proposed) return ReplyError(res, proposed.error());

  const TimeMs since = now - *window_ms;
  // The history export's read cap (--report-max-rows): a replay over more
  // than that is refused whole, naming the window to shorten.
  const std::size_t cap = report_max_rows_;
  auto jobs = store_.JobsSubmittedBetween(since, now, cap + 1);
  if (!jobs) return ReplyError(res, jobs.error());
  std::size_t read = 0;
  for (const auto& j : *jobs) read += 1 + j.runs.size();
  if (read > cap) {
    return ReplyError(
        res, WindowTooLarge("stored rows (jobs and runs)", since, now, cap, "window", "window"));
  }
  auto nodes = store_.ListNodes();
  if (!nodes) return ReplyError(res, nodes.error());
  // The history goes through the export's document and berth-sim's reader,
  // so a preview and an offline replay of `berth history export` agree.
  auto history = sim::ReadHistory(HistoryJson(*jobs, *nodes, **active, since, now, now));
  if (!history) return ReplyError(res, history.error());

  // The inventory as the controller's snapshot builder sees it, every node
  // counted ready and nothing running: the replay starts from an idle cluster.
  std::map<std::string, bool> ready;
  for (const auto& n : *nodes) ready[n.info.name] = true;
  const std::vector<store::RunRecord> no_runs;
  const store::PendingQueue no_jobs;
  SnapshotInputs in{now, &*nodes, &ready, &no_runs, &no_jobs, &(*active)->policy, nullptr};
  auto snap = BuildSnapshot(in, [](std::int64_t) -> Result<model::JobSpec> {
    return Fail(Code::kInternal, "no runs are replayed from the live cluster");
  });
  if (!snap) return ReplyError(res, snap.error());

  PreviewInputs preview;
  preview.history = &*history;
  preview.nodes = std::move(snap->nodes);
  preview.current = active->get();
  preview.proposed = &*proposed;
  preview.prices = std::move(*prices);
  preview.window = window;
  auto answer = PreviewPolicyChange(preview);
  if (!answer) return ReplyError(res, answer.error());
  Reply(res, 200, *answer);
}

}  // namespace berth::server
