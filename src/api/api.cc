#include "api/api.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <thread>

#include "api/api_util.h"
#include "api/history.h"
#include "api/metrics_render.h"
#include "api/openapi.h"
#include "api/policy_diff.h"
#include "api/policy_preview.h"
#include "api/queue_usage.h"
#include "api/redact.h"
#include "api/render.h"
#include "api/request_decode.h"
#include "common/units.h"
#include "control/lifecycle.h"
#include "control/run_log.h"
#include "control/snapshot_builder.h"
#include "model/failure.h"
#include "model/job.h"
#include "model/json.h"
#include "model/reason.h"
#include "sched/layers.h"
#include "sim/history.h"

namespace berth::server {
namespace {

using nlohmann::json;

// A policy version number from a query parameter or the path.
std::function<bool(std::string_view)> Visibility(const model::TenantScope& scope) {
  return [&scope](std::string_view tenant) { return scope.Contains(tenant); };
}

// What an audit record says of a job: its state, and the spec fields that
// identify it (never its command or env, which may hold secrets).
json JobSummary(const model::JobSpec& spec) {
  json j{{"name", spec.name},
         {"tenant", spec.tenant},
         {"queue", spec.queue},
         {"replicas", spec.replicas},
         {"gpus", spec.resources.gpus}};
  if (spec.array) j["array_size"] = spec.array->count;
  return j;
}

std::optional<store::Cordon> CordonOf(const store::NodeRecord& n,
                                      std::optional<std::uint32_t> gpu) {
  if (!gpu) return n.cordon;
  auto it = n.gpu_cordons.find(*gpu);
  if (it == n.gpu_cordons.end()) return std::nullopt;
  return it->second;
}

json CordonSummary(const std::optional<store::Cordon>& c) {
  if (!c) return json{{"cordon", nullptr}};
  return json{{"cordon", model::CordonKindName(c->kind)}, {"reason", c->reason}, {"by", c->by}};
}

// Whether a tenant-admin may apply `to` over `from`: every change is to a
// queue below the top-level queue of a tenant it administers; pools,
// priority classes and settings, other tenants and the tenants' own quotas
// stay as they are. PermissionDenied names the first change out of reach.
}  // namespace

TenantOf Api::JobTenant() {
  return [this](const http::Request& req) -> Result<Owner> {
    auto id = PathId(req);
    if (!id) return std::unexpected(id.error());
    auto tenant = store_.JobTenant(*id);
    if (!tenant) return std::unexpected(tenant.error());
    return Owner{fmt::format("job {}", *id), *tenant, fmt::format("job/{}", *id), *id};
  };
}

TenantOf Api::PathTenant() {
  return [this](const http::Request& req) -> Result<Owner> {
    const std::string name = req.matches[1];
    auto active = controller_.ActivePolicy();
    if (!active) return std::unexpected(active.error());
    for (const auto& q : (*active)->policy.queues) {
      if (q.tenant == name) return Owner{fmt::format("tenant {}", name), name, "tenant/" + name};
    }
    return Fail(Code::kNotFound, fmt::format("tenant {} not found", name));
  };
}

void Api::Register(http::Server& http) {
  // Every answer carries a request id, the one its audit record keeps.
  http.set_pre_routing([this](const http::Request& req, http::Response& res) {
    res.set_header("X-Request-Id", RequestId(req));
    return Gate(req, res);
  });
  // Probes answer on the I/O thread, never queued behind busy handlers.
  http.set_inline_paths({"/healthz", "/readyz"});
  auto handler = [this](void (Api::*h)(const http::Request&, http::Response&)) {
    return [this, h](const http::Request& req, http::Response& res) { (this->*h)(req, res); };
  };
  auto scoped =
      [this](void (Api::*h)(const http::Request&, http::Response&, const model::TenantScope&)) {
        return ScopedHandler(
            [this, h](const http::Request& req, http::Response& res,
                      const model::TenantScope& scope) { (this->*h)(req, res, scope); });
      };
  auto any = [](std::string action) {
    return Rule{Access::kAuthenticated, {}, Need::kRead, std::move(action)};
  };
  auto admin = [](std::string action) {
    return Rule{Access::kPlatformAdmin, {}, Need::kRead, std::move(action)};
  };
  auto job = [this](Need need, std::string action) {
    return Rule{Access::kAuthenticated, JobTenant(), need, std::move(action)};
  };
  // The same, and a job token may call it for its own job (job_token.h).
  auto own_job = [&job](Need need, std::string action) {
    Rule r = job(need, std::move(action));
    r.own_job = true;
    return r;
  };
  auto quota = [this](Need need, std::string action) {
    return Rule{Access::kAuthenticated, QuotaRequestTenant(), need, std::move(action)};
  };
  auto tenant = [this](Need need, std::string action) {
    return Rule{Access::kAuthenticated, PathTenant(), need, std::move(action), false};
  };
  auto service = [](Need need, std::string action) {
    return Rule{Access::kAuthenticated, ServiceTenant(), need, std::move(action)};
  };
  const Rule open{Access::kPublic, {}, Need::kRead, ""};

  // Liveness, and readiness to take requests: the API answers only on the
  // berthd that leads (a standby answers both itself, berthd_main.cc).
  auto role = [this] {
    json body = leadership_ ? leadership_() : json{{"role", "single"}};
    if (!version_.empty()) body["version"] = version_;
    return body;
  };
  Route(http, "GET", "/healthz", open, [role](const http::Request&, http::Response& res) {
    json body = role();
    body["status"] = "ok";
    Reply(res, 200, body);
  });
  Route(http, "GET", "/readyz", open, [role](const http::Request&, http::Response& res) {
    json body = role();
    body["status"] = "ready";
    Reply(res, 200, body);
  });
  Route(http, "GET", "/v1/openapi.json", open, [](const http::Request&, http::Response& res) {
    res.set_content(std::string(OpenApiDocument()), "application/json");
  });
  // Metering: prices are public; usage is the caller's tenants'; budgets
  // are set by platform admins.
  Route(http, "GET", "/v1/prices", any("price.read"), handler(&Api::GetPrices));
  Route(http, "POST", "/v1/prices", admin("price.apply"),
        Audited("price.apply", &Api::ApplyPrices));
  Route(http, "GET", "/v1/usage", any("usage.read"), scoped(&Api::Usage));
  Route(http, "GET", "/v1/usage/records", any("usage.read"), scoped(&Api::UsageRecords));
  Route(http, "GET", "/v1/budgets", any("budget.list"), scoped(&Api::ListBudgets));
  // Quota against use, per queue: the caller's tenants'.
  Route(http, "GET", "/v1/queues", any("queue.list"), scoped(&Api::ListQueues));
  // The operations report: the caller's tenants; fleet figures for admins.
  Route(http, "GET", "/v1/reports/ops", any("report.read"), scoped(&Api::GetOpsReport));
  Route(http, "POST", R"(/v1/budgets/([^/]+))", admin("budget.set"),
        Audited("budget.set", &Api::SetBudget));
  Route(http, "DELETE", R"(/v1/budgets/([^/]+))", admin("budget.delete"),
        Audited("budget.delete", &Api::DeleteBudget));
  // Jobs: a tenant's own; another tenant's answer 404.
  Route(http, "POST", "/v1/jobs", any("job.submit"), Audited("job.submit", &Api::SubmitJob));
  Route(http, "GET", "/v1/jobs", any("job.list"), scoped(&Api::ListJobs));
  // What changed, as it commits: jobs of the caller's tenants, the
  // inventory, and alerts for platform admins (api_events.cc).
  Route(http, "GET", "/v1/events", any("event.watch"), scoped(&Api::Events));
  Route(http, "GET", R"(/v1/jobs/([^/]+))", own_job(Need::kRead, "job.read"),
        handler(&Api::GetJob));
  Route(http, "POST", R"(/v1/jobs/([^/]+)/cancel)", job(Need::kWrite, "job.cancel"),
        Audited("job.cancel", &Api::CancelJob));
  // An array is named by its first job's id: the same tenant check.
  Route(http, "POST", R"(/v1/arrays/([^/]+)/cancel)", job(Need::kWrite, "array.cancel"),
        Audited("array.cancel", &Api::CancelArray));
  Route(http, "POST", R"(/v1/jobs/([^/]+)/checkpoint)", own_job(Need::kWrite, "job.checkpoint"),
        Audited("job.checkpoint", &Api::ReportCheckpoint));
  Route(http, "GET", R"(/v1/jobs/([^/]+)/logs)", job(Need::kRead, "job.logs"), handler(&Api::Logs));
  Route(http, "GET", R"(/v1/jobs/([^/]+)/why)", own_job(Need::kRead, "job.why"),
        handler(&Api::Why));
  Route(http, "GET", R"(/v1/jobs/([^/]+)/outputs)", job(Need::kRead, "job.outputs"),
        handler(&Api::ListOutputs));
  Route(http, "GET", R"(/v1/jobs/([^/]+)/outputs/content)",
        job(Need::kRead, "job.outputs.download"),
        Audited("job.outputs.download", &Api::DownloadOutput));
  Route(http, "GET", R"(/v1/jobs/([^/]+)/telemetry)", job(Need::kRead, "job.telemetry"),
        handler(&Api::JobTelemetry));
  // Services: a tenant's own; another tenant's answer 404, as jobs do.
  Route(http, "POST", "/v1/services", any("service.apply"),
        Audited("service.apply", &Api::ApplyService));
  Route(http, "GET", "/v1/services", any("service.list"), scoped(&Api::ListServices));
  Route(http, "GET", R"(/v1/services/([^/]+)/([^/]+))", service(Need::kRead, "service.read"),
        handler(&Api::GetService));
  // The gateway asks whether a caller may call a service (gateway/route.h,
  // auth_url): a member or tenant-admin of its tenant may; a viewer is
  // refused 403, another tenant's token 404, no token 401.
  Route(http, "GET", R"(/v1/services/([^/]+)/([^/]+)/access)",
        service(Need::kWrite, "service.call"), handler(&Api::CheckServiceAccess));
  Route(http, "DELETE", R"(/v1/services/([^/]+)/([^/]+))", service(Need::kWrite, "service.delete"),
        Audited("service.delete", &Api::DeleteService));
  Route(http, "POST", R"(/v1/services/([^/]+)/([^/]+)/scale)",
        service(Need::kWrite, "service.scale"), Audited("service.scale", &Api::ScaleService));
  Route(http, "POST", R"(/v1/services/([^/]+)/([^/]+)/rollback)",
        service(Need::kWrite, "service.rollback"),
        Audited("service.rollback", &Api::RollbackService));
  Route(http, "POST", R"(/v1/services/([^/]+)/([^/]+)/rollout/resume)",
        service(Need::kWrite, "service.rollout.resume"),
        Audited("service.rollout.resume", &Api::ResumeServiceRollout));
  // Inventory: everyone sees it; other tenants' jobs on it are anonymous.
  Route(http, "GET", "/v1/nodes", any("node.list"), handler(&Api::ListNodes));
  Route(http, "GET", "/v1/gpus", any("gpu.list"), scoped(&Api::ListGpus));
  Route(http, "GET", R"(/v1/gpus/([^/]+)/telemetry)", any("gpu.telemetry"),
        scoped(&Api::GpuTelemetry));
  Route(http, "GET", R"(/v1/nodes/([^/]+))", any("node.read"), scoped(&Api::GetNode));
  Route(http, "POST", R"(/v1/nodes/([^/]+)/(cordon|drain|uncordon))", admin("node.cordon"),
        Audited("node.cordon", &Api::CordonAction));
  Route(http, "POST", R"(/v1/nodes/([^/]+)/gpus/([^/]+)/(cordon|uncordon))", admin("gpu.cordon"),
        Audited("gpu.cordon", &Api::CordonAction));
  // Removing a node revokes its certificates (docs/operations.md).
  Route(http, "DELETE", R"(/v1/nodes/([^/]+))", admin("node.remove"),
        Audited("node.remove", &Api::RemoveNode));
  // Alerts, their rules and webhook deliveries (api_alerts.cc).
  Route(http, "GET", "/v1/alerts", admin("alert.list"), handler(&Api::ListAlerts));
  Route(http, "POST", R"(/v1/alerts/([^/]+)/resolve)", admin("alert.resolve"),
        Audited("alert.resolve", &Api::ResolveAlert));
  Route(http, "GET", "/v1/alert-rules", admin("alert_rules.read"), handler(&Api::GetAlertRules));
  Route(http, "POST", "/v1/alert-rules", admin("alert_rules.apply"),
        Audited("alert_rules.apply", &Api::ApplyAlertRules));
  Route(http, "GET", "/v1/alert-deliveries", admin("alert_deliveries.list"),
        handler(&Api::ListAlertDeliveries));
  // Policy: quotas are public within the platform; changing them is not.
  Route(http, "GET", "/v1/policy", any("policy.read"), scoped(&Api::GetPolicy));
  Route(http, "POST", "/v1/policy", any("policy.apply"),
        Audited("policy.apply", &Api::ApplyPolicy));
  Route(http, "GET", "/v1/policy/versions", any("policy.read"), handler(&Api::ListPolicyVersions));
  Route(http, "GET", R"(/v1/policy/versions/([^/]+))", any("policy.read"),
        scoped(&Api::GetPolicyVersion));
  Route(http, "POST", "/v1/policy/rollback", admin("policy.rollback"),
        Audited("policy.rollback", &Api::RollbackPolicy));
  Route(http, "GET", "/v1/policy/diff", any("policy.read"), scoped(&Api::DiffPolicy));
  Route(http, "POST", "/v1/policy/preview", admin("policy.preview"), handler(&Api::PreviewPolicy));
  Route(http, "GET", "/v1/history", admin("history.read"), handler(&Api::History));
  // Prometheus scrapes with a metrics-reader's token (or a platform-admin's).
  Rule metrics_rule = admin("metrics.read");
  metrics_rule.metrics = true;
  Route(http, "GET", "/metrics", metrics_rule, handler(&Api::Metrics));
  // Quota requests: a tenant-admin files and withdraws; a platform admin
  // decides, and an approval becomes a new policy version.
  Route(http, "POST", "/v1/quota-requests", any("quota.request"),
        Audited("quota.request", &Api::FileQuotaRequest));
  Route(http, "GET", "/v1/quota-requests", any("quota.list"), scoped(&Api::ListQuotaRequests));
  Route(http, "GET", R"(/v1/quota-requests/([^/]+))", quota(Need::kRead, "quota.read"),
        handler(&Api::GetQuotaRequest));
  Route(http, "POST", R"(/v1/quota-requests/([^/]+)/approve)", admin("quota.approve"),
        Audited("quota.approve", &Api::ApproveQuotaRequest));
  Route(http, "POST", R"(/v1/quota-requests/([^/]+)/reject)", admin("quota.reject"),
        Audited("quota.reject", &Api::RejectQuotaRequest));
  Route(http, "POST", R"(/v1/quota-requests/([^/]+)/withdraw)",
        quota(Need::kManage, "quota.withdraw"),
        Audited("quota.withdraw", &Api::WithdrawQuotaRequest));
  // The audit trail: all of it for platform admins, a tenant's for its
  // tenant-admins (the handler asks Check for the tenant named).
  Route(http, "GET", "/v1/audit", any("audit.read"), scoped(&Api::ListAudit));
  Route(http, "GET", "/v1/audit/verify", admin("audit.verify"), handler(&Api::VerifyAudit));
  // Identities, roles and tokens.
  Route(http, "GET", "/v1/whoami", any("auth.whoami"), handler(&Api::WhoAmI));
  Route(http, "POST", "/v1/login", any("auth.login"), Audited("auth.login", &Api::Login));
  // The web console's sign-in: a session cookie made from a bearer token.
  Route(http, "POST", "/v1/console/session", any("console.sign_in"),
        Audited("console.sign_in", &Api::StartConsoleSession));
  Route(http, "GET", "/v1/console/session", any("console.session"),
        handler(&Api::GetConsoleSession));
  Route(http, "DELETE", "/v1/console/session", any("console.sign_out"),
        Audited("console.sign_out", &Api::EndConsoleSession));
  Route(http, "GET", "/v1/identities", any("identity.list"), handler(&Api::ListIdentities));
  Route(http, "POST", "/v1/identities", any("identity.create"),
        Audited("identity.create", &Api::CreateIdentity));
  Route(http, "POST",
        R"(/v1/identities/([^/]+)/(disable|enable|grant-platform-admin|revoke-platform-admin))",
        admin("identity.update"), Audited("identity.update", &Api::SetIdentityFlag));
  Route(http, "GET", R"(/v1/tenants/([^/]+)/members)", tenant(Need::kRead, "member.list"),
        handler(&Api::ListMembers));
  Route(http, "POST", R"(/v1/tenants/([^/]+)/members)", tenant(Need::kManage, "member.set"),
        Audited("member.set", &Api::SetMember));
  Route(http, "POST", R"(/v1/tenants/([^/]+)/members/([^/]+)/remove)",
        tenant(Need::kManage, "member.remove"), Audited("member.remove", &Api::RemoveMember));
  Route(http, "GET", "/v1/tokens", any("token.list"), handler(&Api::ListTokens));
  Route(http, "POST", "/v1/tokens", any("token.create"),
        Audited("token.create", &Api::CreateToken));
  Route(http, "POST", R"(/v1/tokens/([^/]+)/revoke)", any("token.revoke"),
        Audited("token.revoke", &Api::RevokeToken));
  http.set_error_handler([this](const http::Request& req, http::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      ReplyError(res, Error{Code::kNotFound,
                            fmt::format("no such endpoint: {} {}; see /v1/openapi.json", req.method,
                                        RedactSecrets(req.path)),
                            {}});
    } else if (res.status == 413) {
      res.set_content(ErrorJson(Error{Code::kInvalidArgument,
                                      fmt::format("request body too large: the limit is {} bytes "
                                                  "(berthd --max-body)",
                                                  max_body_bytes_),
                                      "body"})
                          .dump(),
                      "application/json");
    } else if (!res.reason.empty()) {
      // Refused by the HTTP layer before routing: the status stays.
      const char* field = res.status == 431 ? "header" : res.status == 414 ? "path" : "request";
      res.set_content(
          ErrorJson(Error{Code::kInvalidArgument,
                          res.reason + (res.status == 431 ? " (berthd --max-header-bytes)" : ""),
                          field})
              .dump(),
          "application/json");
    }
  });
  http.set_exception_handler([](const http::Request&, http::Response& res, std::exception_ptr ep) {
    std::string what = "unexpected error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("API handler failed: {}", RedactSecrets(what));
    ReplyError(res, Error{Code::kInternal, "internal error; see berthd's log", {}});
  });
}

void Api::SubmitJob(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "job";
  auto spec = model::ParseJobSpec(req.body);
  if (!spec) return ReplyError(res, spec.error());
  note.tenant = spec->tenant;
  note.after = JobSummary(*spec);
  const Caller& caller = CurrentCaller();
  if (auto st = auth_.CheckNamed(caller, spec->tenant, Need::kWrite); !st) {
    return ReplyError(res, st.error());
  }
  // The record is committed with the jobs: both are durable or neither.
  auto ids = controller_.Submit(
      *spec, caller.name,
      RecordInChange<std::vector<std::int64_t>>(
          note, req, res, clock_.NowMs(),
          [array = spec->array.has_value()](AuditNote& n, const std::vector<std::int64_t>& made) {
            n.after["state"] = model::JobStateName(model::JobState::kPending);
            if (array) {
              // The first element stands for the array; the others follow it.
              n.object = fmt::format("array/{}", made.front());
              n.after["jobs"] = {made.front(), made.back()};
            } else {
              n.object = fmt::format("job/{}", made.front());
            }
          }));
  if (!ids) {
    // A refusal keeps its reason (with an over-quota refusal's numbers).
    note.after["refused"] = ids.error().message;
    return ReplyError(res, ids.error());
  }
  const std::int64_t id = ids->front();
  auto job = store_.GetJob(id);
  if (!job) return ReplyError(res, job.error());
  json out = JobJson(*job, true, EnvViewOf(caller, *job), JobRefsOf(caller));
  if (spec->array) {
    out["array"]["jobs"] = {{"first", ids->front()}, {"last", ids->back()}};
    res.set_header("Location", fmt::format("/v1/jobs?array={}", id));
  } else {
    res.set_header("Location", fmt::format("/v1/jobs/{}", id));
  }
  Reply(res, 201, out);
}

json Api::FailureJson(const store::JobRecord& job, model::Lang lang) const {
  // The failed replica's log, its last 64 KiB: where the cause usually is.
  // A job waiting to retry shows the failure of the attempt before.
  std::string tail;
  if (job.reason.code == model::ReasonCode::kFailedExitCode ||
      job.reason.code == model::ReasonCode::kRetrying) {
    auto replica = job.reason.counts.find("replica");
    std::uint32_t attempt = 0;
    for (const auto& r : job.runs) {
      if (r.state == model::RunState::kExited) attempt = std::max(attempt, r.attempt);
    }
    for (const auto& r : job.runs) {
      if (r.attempt != attempt) continue;
      bool cause = replica != job.reason.counts.end()
                       ? r.replica == static_cast<std::uint32_t>(replica->second)
                       : !r.failure_class.empty() && r.stopped_for == model::StopCause::kNone;
      if (!cause) continue;
      tail = controller_.LogTail(job, r.run_id, Controller::kFailureTailBytes);
      break;
    }
  }
  model::Reason reason = job.reason;
  if (JobRefsOf(CurrentCaller()) == JobRefs::kHideOtherTenants) {
    model::HideOtherTenantsJobs(reason);
  }
  auto failure = model::ClassifyFailure(reason, tail);
  if (!failure) return nullptr;
  return json{{"class", model::FailureClassName(failure->cls)},
              {"message", model::RenderFailure(*failure, lang)},
              {"evidence", failure->evidence}};
}

void Api::GetJob(const http::Request& req, http::Response& res) {
  auto id = PathId(req);
  if (!id) return ReplyError(res, id.error());
  auto job = store_.GetJob(*id);
  if (!job) return ReplyError(res, job.error());
  json out = JobJson(*job, true, EnvViewOf(CurrentCaller(), *job), JobRefsOf(CurrentCaller()));
  out["failure"] = FailureJson(*job, model::Lang::kEn);
  out["utilization"] = JobUtilization(*job);
  Reply(res, 200, out);
}

void Api::CancelJob(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = fmt::format("job/{}", std::string(req.matches[1]));
  auto id = PathId(req);
  if (!id) return ReplyError(res, id.error());
  if (auto before = store_.GetJob(*id); before) {
    note.tenant = before->spec.tenant;
    note.before = json{{"state", model::JobStateName(before->state)}};
    if (const auto& owner = before->spec.service) {
      // Its service would only start another: the service says how many.
      return ReplyError(
          res, Error{Code::kFailedPrecondition,
                     fmt::format("job {} is a replica of service {}/{}; change the service "
                                 "instead: berth svc scale {} --min N, or berth svc delete {}",
                                 *id, before->spec.tenant, owner->name, owner->name, owner->name),
                     "job"});
    }
  }
  auto job = controller_.Cancel(
      *id, Actor(req),
      RecordInChange<store::JobRecord, store::JobRecord>(
          note, req, res, clock_.NowMs(),
          [](AuditNote& n, const store::JobRecord& was, const store::JobRecord& now) {
            n.tenant = was.spec.tenant;
            n.before = json{{"state", model::JobStateName(was.state)}};
            n.after = json{{"state", model::JobStateName(now.state)},
                           {"cancel_requested", now.cancel_requested}};
          }));
  if (!job) return ReplyError(res, job.error());
  Reply(res, 200,
        JobJson(*job, true, EnvViewOf(CurrentCaller(), *job), JobRefsOf(CurrentCaller())));
}

void Api::CancelArray(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = fmt::format("array/{}", std::string(req.matches[1]));
  auto id = PathId(req);
  if (!id) return ReplyError(res, id.error());
  auto done = controller_.CancelArray(
      *id, Actor(req),
      RecordInChange<store::ArrayCancel>(
          note, req, res, clock_.NowMs(), [](AuditNote& n, const store::ArrayCancel& made) {
            n.tenant = made.tenant;
            n.after = json{{"cancelled", made.cancelled}, {"stopping", made.stopping}};
          }));
  if (!done) return ReplyError(res, done.error());
  Reply(res, 200,
        json{{"array", *id}, {"cancelled", done->cancelled}, {"stopping", done->stopping}});
}

void Api::ReportCheckpoint(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = fmt::format("job/{}", std::string(req.matches[1]));
  auto id = PathId(req);
  if (!id) return ReplyError(res, id.error());
  const TimeMs now = clock_.NowMs();
  TimeMs at = now;
  if (req.has_param("at_ms")) {
    const auto& s = req.get_param_value("at_ms");
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), at);
    if (ec != std::errc() || p != s.data() + s.size() || at <= 0 || at > now) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   "at_ms must be a unix time in milliseconds, not in the future; "
                                   "omit it for now",
                                   "at_ms"});
    }
  }
  auto job = store_.GetJob(*id);
  if (!job) return ReplyError(res, job.error());
  note.tenant = job->spec.tenant;
  note.before = json{{"state", model::JobStateName(job->state)}};
  note.after = json{{"checkpoint_at_ms", at}};
  // The runs of its latest attempt record it, with the audit record, in one
  // transaction.
  auto recorded = control::RecordJobCheckpoint(
      store_, *id, at,
      RecordInChange<store::JobRecord, int>(
          note, req, res, now, [](AuditNote& n, const store::JobRecord& was, const int& runs) {
            n.before = json{{"state", model::JobStateName(was.state)}};
            n.after["runs"] = runs;
          }));
  if (!recorded) return ReplyError(res, recorded.error());
  Reply(res, 200, json{{"job", *id}, {"checkpoint_at_ms", at}, {"runs", *recorded}});
}

void Api::Logs(const http::Request& req, http::Response& res) {
  auto id = PathId(req);
  if (!id) return ReplyError(res, id.error());
  auto job = store_.GetJob(*id);
  if (!job) return ReplyError(res, job.error());
  std::optional<std::uint32_t> replica;
  if (req.has_param("replica")) {
    const auto& s = req.get_param_value("replica");
    std::uint32_t r = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), r);
    if (ec != std::errc() || p != s.data() + s.size() || r >= job->spec.replicas) {
      return ReplyError(
          res, Error{Code::kInvalidArgument,
                     fmt::format("replica must be 0 to {}", job->spec.replicas - 1), "replica"});
    }
    replica = r;
  }
  bool follow = req.get_param_value("follow") == "true" || req.get_param_value("follow") == "1";

  // The set of runs to show is re-read while following: a job that is still
  // Pending gets its runs once it is placed.
  struct Cursor {
    std::string run_id;
    std::uint32_t replica;
    std::uint32_t attempt;
    std::uint64_t offset = 0;
  };
  auto state = std::make_shared<std::vector<Cursor>>();
  auto last_header = std::make_shared<std::string>();
  std::int64_t job_id = *id;
  auto refresh = [this, job_id, replica, state]() -> std::optional<bool> {
    auto j = store_.GetJob(job_id);
    if (!j) return std::nullopt;
    for (const auto& r : j->runs) {
      if (replica && r.replica != *replica) continue;
      bool known = std::any_of(state->begin(), state->end(),
                               [&](const Cursor& c) { return c.run_id == r.run_id; });
      if (!known) state->push_back({r.run_id, r.replica, r.attempt, 0});
    }
    return model::IsTerminal(j->state);
  };
  // Appends what the runs' logs hold past their cursors, up to about
  // kPiece bytes; true when it stopped with more to read.
  static constexpr std::size_t kPiece = 256 * 1024;
  const std::uint64_t log_limit = controller_.LogLimitFor(job->spec.tenant);
  auto drain = [this, job_id, state, last_header, log_limit](std::string& out) -> bool {
    bool many = state->size() > 1;
    for (auto& c : *state) {
      const auto path = controller_.LogPath(job_id, c.run_id);
      for (;;) {
        if (out.size() >= kPiece) return true;
        // Absolute offsets: a log trimmed past its limit while it is being
        // followed shows the marker, then carries on with the kept tail.
        auto slice = ReadRunLog(path, c.offset, 64 * 1024, log_limit);
        if (slice.data.empty()) break;
        if (many && *last_header != c.run_id) {
          out += fmt::format("==> replica {} (attempt {}) <==\n", c.replica, c.attempt);
          *last_header = c.run_id;
        }
        out += slice.data;
        c.offset = slice.next;
      }
    }
    return false;
  };

  // Each call sends what is there; a followed job with nothing new waits
  // without a thread (http::Step::kWait) and is asked again.
  res.set_stream("text/plain; charset=utf-8",
                 [refresh, drain, follow](std::string& out) -> http::Step {
                   auto terminal = refresh();
                   if (!terminal) return http::Step::kDone;
                   if (drain(out)) return http::Step::kMore;
                   // A terminal job's logs are complete: agents ship every
                   // byte before they report the exit that settles the job.
                   if (!follow || *terminal) return http::Step::kDone;
                   return http::Step::kWait;
                 });
}

void Api::Why(const http::Request& req, http::Response& res) {
  auto id = PathId(req);
  if (!id) return ReplyError(res, id.error());
  model::Lang lang = model::Lang::kEn;
  if (req.has_param("lang")) {
    const std::string& text = req.get_param_value("lang");
    auto parsed = model::ParseLang(text);
    if (!parsed) {
      return ReplyError(res,
                        Error{Code::kInvalidArgument,
                              fmt::format("unknown language '{}'; use en or zh", text), "lang"});
    }
    lang = *parsed;
  }
  auto job = store_.GetJob(*id);
  if (!job) return ReplyError(res, job.error());
  model::Reason told = job->reason;
  if (JobRefsOf(CurrentCaller()) == JobRefs::kHideOtherTenants) model::HideOtherTenantsJobs(told);
  json reason = model::ToJson(told);
  reason["message"] = model::RenderReason(told, lang);
  // The verified hint on its own, in `lang`, for a client to lead with as
  // `berth why` does (the message also ends with it).
  if (std::string hint = model::WouldRunText(told, lang); !hint.empty()) reason["hint"] = hint;
  // A pending job held back by something other than nodes (its queue's
  // order, quota, budget) also hears what the nodes would say once that
  // clears: the layers, the one holding it now first.
  if (job->state == model::JobState::kPending) {
    auto layers = WhyLayers(*job, told, lang);
    if (!layers) return ReplyError(res, layers.error());
    if (!layers->second.empty())
      reason["message"] = reason["message"].get<std::string>() + layers->second;
    reason["layers"] = std::move(layers->first);
    // The latest forecast (control/forecaster.h): the scheduler run forward
    // over what runs and waits. A view of this job only; never stored.
    if (auto f = controller_.ForecastOf(job->id); f) {
      const TimeMs now = clock_.NowMs();
      reason["forecast"] = {{"start_ms", f->start_ms},
                            {"made_at_ms", f->made_at_ms},
                            {"basis", f->predicted ? "predicted" : "declared"},
                            {"cycles", f->cycles}};
      reason["message"] =
          reason["message"].get<std::string>() +
          model::RenderForecast(f->start_ms, f->made_at_ms, f->predicted, now, lang);
    }
  }
  // The events that explain how it got here: evictions, requeues, exits and
  // the end, the last few of them, oldest first.
  static constexpr std::array<std::string_view, 8> kExplaining{
      "Preempting", "Reclaiming", "Moving",    "Consolidating",
      "Requeued",   "Exited",     "Cancelled", "Failed"};
  static constexpr std::size_t kMaxEvents = 8;
  json all = JobJson(*job, true, EnvView::kOther)["timeline"];
  json events = json::array();
  for (const auto& e : all) {
    std::string name = e.value("event", "");
    if (std::find(kExplaining.begin(), kExplaining.end(), name) != kExplaining.end()) {
      events.push_back(e);
    }
  }
  if (events.size() > kMaxEvents) {
    events.erase(events.begin(), events.end() - static_cast<std::ptrdiff_t>(kMaxEvents));
  }
  Reply(res, 200,
        json{{"id", job->id},
             {"name", job->spec.name},
             {"tenant", job->spec.tenant},
             {"queue", job->spec.queue},
             {"state", model::JobStateName(job->state)},
             {"lang", model::LangName(lang)},
             {"reason", reason},
             {"failure", FailureJson(*job, lang)},
             {"timeline", events}});
}

Result<std::pair<json, std::string>> Api::WhyLayers(const store::JobRecord& job,
                                                    const model::Reason& told, model::Lang lang) {
  using model::ReasonCode;
  const ReasonCode code = told.code;
  auto name = [](ReasonCode c) -> std::string_view {
    switch (c) {
      case ReasonCode::kBehindInQueue:
        return "order";
      case ReasonCode::kOverQuota:
      case ReasonCode::kNotPreemptibleOverGuarantee:
        return "quota";
      case ReasonCode::kOverBudget:
        return "budget";
      case ReasonCode::kQueued:
        return "not_looked_at_yet";
      case ReasonCode::kNoNodeFits:
      case ReasonCode::kFragmented:
      case ReasonCode::kNoNodes:
        return "nodes";
      default:
        return "";
    }
  };
  json layers = json::array();
  const std::string_view now = name(code);
  if (!now.empty()) layers.push_back({{"layer", now}, {"code", model::ReasonCodeName(code)}});
  // The node layer is the reason itself when nodes are what holds it.
  if (now.empty() || now == "nodes") return std::pair{std::move(layers), std::string()};
  auto nodes = controller_.Nodes();
  if (!nodes) return std::unexpected(nodes.error());
  auto policy = controller_.ActivePolicy();
  if (!policy) return std::unexpected(policy.error());
  std::vector<sched::NodeView> views;
  views.reserve(nodes->size());
  for (const auto& n : *nodes) {
    views.push_back(NodeViewFor(n.record, n.record.state == model::NodeState::kReady));
  }
  std::sort(views.begin(), views.end(),
            [](const sched::NodeView& a, const sched::NodeView& b) { return a.name < b.name; });
  const sched::NodeLayer layer = sched::NodeLayerOf(views, (*policy)->policy, PendingFrom(job));
  // Least change first: `alone` is how many nodes lifting that one cause
  // would open (the nodes where it is the only cause).
  json excluded = json::array();
  for (const auto& [cause, n] : layer.excluded) {
    const auto alone = layer.alone.find(cause);
    excluded.push_back({{"cause", cause},
                        {"nodes", n},
                        {"alone", alone == layer.alone.end() ? 0 : alone->second}});
  }
  layers.push_back({{"layer", "nodes"},
                    {"nodes", layer.nodes},
                    {"could_take", layer.could_take},
                    {"excluded", std::move(excluded)}});
  std::string text;
  if (layer.nodes > 0) {
    text = model::RenderNodeLayer(layer.nodes, layer.could_take, layer.excluded, layer.alone, lang);
  }
  return std::pair{std::move(layers), std::move(text)};
}

void Api::ListNodes(const http::Request&, http::Response& res) {
  auto nodes = controller_.Nodes();
  if (!nodes) return ReplyError(res, nodes.error());
  auto active = store_.ActiveRuns();
  if (!active) return ReplyError(res, active.error());
  json list = json::array();
  for (const auto& n : *nodes) list.push_back(NodeJson(n, *active));
  Reply(res, 200, json{{"nodes", list}});
}

void Api::GetNode(const http::Request& req, http::Response& res, const model::TenantScope& scope) {
  const std::string name = req.matches[1];
  auto nodes = controller_.Nodes();
  if (!nodes) return ReplyError(res, nodes.error());
  auto active = store_.ActiveRuns();
  if (!active) return ReplyError(res, active.error());
  for (const auto& n : *nodes) {
    if (n.record.info.name != name) continue;
    json out = NodeJson(n, *active);
    auto holders = store_.ListJobs(
        store::JobFilter{{model::JobState::kScheduled, model::JobState::kRunning}, {}, {}, 100000});
    if (!holders) return ReplyError(res, holders.error());
    out["gpus"] = GpusJson({n}, *holders, Visibility(scope));
    auto events = store_.NodeEvents(name, 100);
    if (!events) return ReplyError(res, events.error());
    json list = json::array();
    for (const auto& e : *events) {
      list.push_back({{"time_ms", e.time_ms}, {"event", e.event}, {"message", e.message}});
    }
    out["events"] = list;
    return Reply(res, 200, out);
  }
  ReplyError(res, Error{Code::kNotFound,
                        fmt::format("node '{}' is not known; `berth nodes` lists the nodes", name),
                        "node"});
}

void Api::CordonAction(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string node = req.matches[1];
  std::optional<std::uint32_t> gpu;
  std::string action = req.matches[2];
  note.action = "node." + action;
  note.object = "node/" + node;
  if (req.matches.size() > 3) {
    const std::string s = req.matches[2];
    note.action = "gpu." + std::string(req.matches[3]);
    note.object = fmt::format("gpu/{}/{}", node, s);
    std::uint32_t g = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), g);
    if (ec != std::errc() || p != s.data() + s.size()) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   fmt::format("'{}' is not a GPU index; use the index `berth "
                                               "gpus` shows, e.g. 3",
                                               s),
                                   "gpu"});
    }
    gpu = g;
    action = req.matches[3];
  }
  const std::string reason = req.get_param_value("reason");
  if (reason.size() > 1024) {
    return ReplyError(
        res, Error{Code::kInvalidArgument, "reason is longer than 1024 characters", "reason"});
  }
  if (auto nodes = controller_.Nodes(); nodes) {
    for (const auto& n : *nodes) {
      if (n.record.info.name == node) note.before = CordonSummary(CordonOf(n.record, gpu));
    }
  }
  if (action == "uncordon") {
    note.after = CordonSummary(std::nullopt);
    auto had = controller_.Uncordon(
        node, gpu, Actor(req), RecordInChange<>(note, req, res, clock_.NowMs(), [](AuditNote&) {}));
    if (!had) return ReplyError(res, had.error());
    return Reply(
        res, 200,
        json{{"node", node}, {"gpu", gpu ? json(*gpu) : json(nullptr)}, {"uncordoned", *had}});
  }
  note.after = json{{"cordon", action}, {"reason", reason}};
  auto st = controller_.Cordon(node, gpu, action == "drain", reason, Actor(req),
                               RecordInChange<>(note, req, res, clock_.NowMs(), [](AuditNote&) {}));
  if (!st) return ReplyError(res, st.error());
  Reply(res, 200,
        json{{"node", node},
             {"gpu", gpu ? json(*gpu) : json(nullptr)},
             {"action", action},
             {"reason", reason}});
}

void Api::RemoveNode(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string node = req.matches[1];
  note.action = "node.remove";
  note.object = "node/" + node;
  if (auto nodes = controller_.Nodes(); nodes) {
    for (const auto& n : *nodes) {
      if (n.record.info.name != node) continue;
      note.before = json{{"state", model::NodeStateName(n.record.state)},
                         {"gpus", n.record.info.gpus.size()}};
    }
  }
  const TimeMs now = clock_.NowMs();
  note.after = json{{"removed", true}, {"certificates_revoked_at_ms", now}};
  auto st = controller_.RemoveNode(node, Actor(req),
                                   RecordInChange<>(note, req, res, now, [](AuditNote&) {}));
  if (!st) return ReplyError(res, st.error());
  Reply(res, 200,
        json{{"node", node},
             {"removed", true},
             {"certificates_revoked", fmt::format("issued at or before {}", FormatTimeMs(now))}});
}

void Api::CountIntervention(const std::string& action, const http::Request& req,
                            const http::Response& res) {
  if (metrics_ == nullptr || res.status >= 300) return;
  // The path's last capture is the verb: cordon, drain, uncordon.
  const std::string verb =
      req.matches.size() > 1 ? std::string(req.matches[req.matches.size() - 1]) : std::string();
  if (action == "node.cordon") {
    metrics_->CountAdminIntervention(verb);
  } else if (action == "gpu.cordon") {
    metrics_->CountAdminIntervention("gpu_" + verb);
  } else if (action == "policy.apply") {
    metrics_->CountAdminIntervention("policy_apply");
  } else if (action == "policy.rollback") {
    metrics_->CountAdminIntervention("policy_rollback");
  } else if ((action == "job.cancel" || action == "array.cancel") &&
             CurrentCaller().platform_admin) {
    metrics_->CountAdminIntervention("cancel");
  }
}

void Api::Metrics(const http::Request&, http::Response& res) {
  if (metrics_ == nullptr) {
    return ReplyError(res, Error{Code::kUnavailable, "this berthd keeps no metrics", {}});
  }
  auto nodes = controller_.Nodes();
  if (!nodes) return ReplyError(res, nodes.error());
  auto holders = store_.ListJobs(
      store::JobFilter{{model::JobState::kScheduled, model::JobState::kRunning}, {}, {}, 1000000});
  if (!holders) return ReplyError(res, holders.error());
  auto pending = store_.PendingJobs();
  if (!pending) return ReplyError(res, pending.error());
  auto policy = controller_.ActivePolicy();
  if (!policy) return ReplyError(res, policy.error());
  auto open_alerts = store_.ListAlerts(true);
  if (!open_alerts) return ReplyError(res, open_alerts.error());
  ClusterView view{&*nodes, &*holders, &*pending, &(*policy)->policy, &*open_alerts};
  std::vector<model::GpuSample> samples;
  if (telemetry_ != nullptr) {
    samples = telemetry_->Latest();
    view.samples = &samples;
    view.telemetry_samples = telemetry_->ingested();
    view.telemetry_late = telemetry_->late();
  }
  std::string text = RenderMetrics(view, *metrics_);
  auto services = ServiceReplicaCounts();
  if (!services) return ReplyError(res, services.error());
  text += *services;
  if (http_stats_) text += RenderHttpMetrics(http_stats_());
  text += RenderLeadershipMetrics(leadership_ ? leadership_() : nlohmann::json::object());
  text += RenderStoreMetrics(store_.commit_stats());
  res.set_content(std::move(text), "text/plain; version=0.0.4; charset=utf-8");
}

void Api::ListQueues(const http::Request& req, http::Response& res,
                     const model::TenantScope& scope) {
  auto policy = controller_.ActivePolicy();
  if (!policy) return ReplyError(res, policy.error());
  auto holders = store_.ListJobs(
      store::JobFilter{{model::JobState::kScheduled, model::JobState::kRunning}, {}, {}, 100000});
  if (!holders) return ReplyError(res, holders.error());
  Reply(res, 200,
        json{{"policy_version", (*policy)->version},
             {"queues",
              QueueUsageJson((*policy)->policy, *holders, scope, req.get_param_value("tenant"))}});
}

void Api::ListGpus(const http::Request&, http::Response& res, const model::TenantScope& scope) {
  auto nodes = controller_.Nodes();
  if (!nodes) return ReplyError(res, nodes.error());
  auto holders = store_.ListJobs(
      store::JobFilter{{model::JobState::kScheduled, model::JobState::kRunning}, {}, {}, 100000});
  if (!holders) return ReplyError(res, holders.error());
  json gpus = GpusJson(*nodes, *holders, Visibility(scope));
  AddLatestTelemetry(gpus);
  Reply(res, 200, json{{"gpus", std::move(gpus)}});
}

void Api::AddLatestTelemetry(json& gpus) const {
  // The newest sample of each GPU, as the fleet map shows it: what the
  // card does now and whether a job holds it idle. Utilization is no
  // tenant's secret (GET /v1/gpus/{uuid}/telemetry shows it to anyone);
  // who holds the card stays as GpusJson hid it.
  std::unordered_map<std::string, model::GpuSample> latest;
  if (telemetry_ != nullptr) {
    for (auto& s : telemetry_->Latest()) latest.emplace(s.uuid, std::move(s));
  }
  const TimeMs now = clock_.NowMs();
  for (auto& g : gpus) {
    const auto it = latest.find(g.value("uuid", ""));
    // Older than this, a sample says nothing about now (an agent that
    // stopped reporting).
    constexpr TimeMs kFreshMs = 5 * 60'000;
    if (it == latest.end() || now - it->second.at_ms > kFreshMs) {
      g["telemetry"] = nullptr;
      g["idle_allocated"] = false;
      continue;
    }
    const auto& s = it->second;
    g["telemetry"] = json{{"at_ms", s.at_ms},
                          {"util_pct", s.util_pct},
                          {"mem_util_pct", s.mem_util_pct},
                          {"memory_used_bytes", s.memory_used_bytes},
                          {"memory_total_bytes", s.memory_total_bytes},
                          {"temperature_c", s.temperature_c},
                          {"power_w", static_cast<double>(s.power_mw) / 1000.0}};
    const bool held =
        !g["job"].is_null() || (g["sharing"].is_object() && !g["sharing"]["holders"].empty());
    g["idle_allocated"] = held && s.util_pct < telemetry_->idle_util_pct();
  }
}

}  // namespace berth::server
