// /v1/services: inference services as stored, versioned objects of a
// tenant (docs/services.md). Apply creates a service or a new revision of
// it; scale and rollback are revisions too; delete removes it. Each change
// commits its audit record with itself (store::ServiceStore).
//
// Who may call what (docs/security.md): the routes' rules in Api::Register
// decide show, scale, rollback and delete from the path's tenant (another
// tenant's service answers 404, as a job of another tenant does); apply
// asks the Authorizer for the spec's tenant here, and the list keeps the
// caller's visible tenants.
//
// Every answer's status is read from the service's replicas (jobs it owns,
// control/service_controller.h) and the service controller's last round.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>

#include "api/api.h"
#include "api/api_util.h"
#include "api/paging.h"
#include "api/render.h"
#include "api/request_decode.h"
#include "api/service_metrics.h"
#include "control/service_controller.h"
#include "model/json.h"
#include "model/policy.h"
#include "model/service.h"

namespace berth::server {
namespace {

using nlohmann::json;

json RevisionJson(const store::ServiceRevision& r) {
  return json{{"revision", r.revision},
              {"change", r.change},
              {"restores", r.restores ? json(*r.restores) : json(nullptr)},
              {"created_ms", r.created_ms},
              {"created_by", r.created_by},
              {"image", r.spec.image},
              {"replicas", {{"min", r.spec.replicas.min}, {"max", r.spec.replicas.max}}}};
}

json ServiceJson(const store::ServiceRecord& s, const json& status) {
  json out{{"tenant", s.tenant},         {"name", s.name},
           {"queue", s.spec.queue},      {"revision", s.revision},
           {"created_ms", s.created_ms}, {"created_by", s.created_by},
           {"updated_ms", s.updated_ms}, {"updated_by", s.updated_by},
           {"status", status},           {"spec", model::ToJson(s.spec)}};
  if (!s.revisions.empty()) {
    json revs = json::array();
    for (const auto& r : s.revisions) revs.push_back(RevisionJson(r));
    out["revisions"] = std::move(revs);
  }
  return out;
}

// What an audit record keeps of a service: enough to read the change, not
// its command or image arguments.
json ServiceSummary(const store::ServiceRecord& s) {
  return json{{"revision", s.revision},
              {"queue", s.spec.queue},
              {"image", s.spec.image},
              {"replicas", {{"min", s.spec.replicas.min}, {"max", s.spec.replicas.max}}}};
}

std::string AuditObject(const std::string& tenant, const std::string& name) {
  return fmt::format("service/{}/{}", tenant, name);
}

// The queue kind a spec runs in: inference for a service, interactive for
// a session.
std::string_view QueueKindOf(const model::ServiceSpec& spec) {
  return spec.kind == model::ServiceKind::kSession ? "interactive" : "inference";
}

// The tenant's queues of `kind`, by the name a spec writes ("serving" for
// "ml/serving").
std::vector<std::string> QueuesOfKind(const model::Policy& policy, const std::string& tenant,
                                      std::string_view kind) {
  std::vector<std::string> out;
  for (const auto& q : policy.queues) {
    if (q.tenant != tenant || q.kind != kind) continue;
    out.push_back(q.path.substr(std::min(q.path.size(), tenant.size() + 1)));
  }
  return out;
}

// A service's queue must be one of its tenant's inference queues in the
// active policy, a session's one of its interactive queues; the refusal
// names `queue` and the queues it could use.
Status CheckServiceQueue(const model::Policy& policy, const model::ServiceSpec& spec) {
  const std::string path = spec.tenant + "/" + spec.queue;
  const std::string_view kind = QueueKindOf(spec);
  const std::string_view what = model::ServiceKindName(spec.kind);
  auto usable = QueuesOfKind(policy, spec.tenant, kind);
  const std::string choices = usable.empty()
                                  ? fmt::format(
                                        "tenant {} has no queue of kind {}; ask a platform "
                                        "admin to add one to the policy",
                                        spec.tenant, kind)
                                  : fmt::format("tenant {}'s queues of kind {}: {}", spec.tenant,
                                                kind, fmt::join(usable, ", "));
  auto it = std::find_if(policy.queues.begin(), policy.queues.end(),
                         [&](const model::QueuePolicy& q) { return q.path == path; });
  if (it == policy.queues.end()) {
    return Fail(Code::kInvalidArgument,
                fmt::format("queue {} is not in the active policy (v{}); {}", spec.queue,
                            policy.version, choices),
                "queue");
  }
  if (it->kind != kind) {
    return Fail(Code::kInvalidArgument,
                fmt::format("queue {} is a {} queue; a {} runs in a queue of kind {}; {}",
                            spec.queue, it->kind, what, kind, choices),
                "queue");
  }
  return Ok();
}

// The autoscaler's last decision, with its reason in words.
json AutoscaleJson(const sched::AutoscaleReason& r) {
  return json{{"code", sched::AutoscaleCodeName(r.code)},
              {"signal", model::AutoscaleSignalName(r.signal)},
              {"observed", model::FormatMilli(r.observed_milli)},
              {"target", model::FormatMilli(r.target_milli)},
              {"desired", r.desired},
              {"reason", sched::RenderAutoscaleReason(r)}};
}

// The last hour's SLO attainment: the share of request windows whose p95
// met the target, availability, and how fast the error budget burns (1:
// exactly at the budget's rate; above 1, faster).
json SloJson(const SloAttainment& slo) {
  json out{{"window", "1h"},
           {"latency_p95_ms", slo.latency_p95_ms > 0 ? json(slo.latency_p95_ms) : json(nullptr)},
           {"windows", slo.windows},
           {"windows_met", slo.windows_met},
           {"requests", slo.requests},
           {"errors", slo.errors}};
  out["latency_attainment"] =
      slo.windows > 0
          ? json(static_cast<double>(slo.windows_met) / static_cast<double>(slo.windows))
          : json(nullptr);
  const double budget = 1.0 - static_cast<double>(slo.availability_ppm) / 1e6;
  if (slo.requests > 0) {
    const double error_rate = static_cast<double>(slo.errors) / static_cast<double>(slo.requests);
    out["availability"] = 1.0 - error_rate;
    out["error_budget_burn"] = budget > 0 ? json(error_rate / budget) : json(nullptr);
  } else {
    out["availability"] = nullptr;
    out["error_budget_burn"] = nullptr;
  }
  return out;
}

// What the gateway saw of the service in the last round.
json TrafficJson(const gateway::RouteStats& t, const std::optional<gateway::RouteLatency>& l) {
  json out{{"in_flight", t.current},
           {"queued", t.queued},
           {"held", t.held_now},
           {"requests_total", t.total},
           {"held_total", t.held_total},
           {"held_expired_total", t.held_expired},
           {"responses_2xx", t.responses_2xx},
           {"responses_5xx", t.responses_5xx}};
  if (l) {
    out["window"] = json{{"requests", l->requests}, {"responses_5xx", l->responses_5xx},
                         {"held", l->held},         {"p50_ms", l->p50_ms},
                         {"p95_ms", l->p95_ms},     {"p99_ms", l->p99_ms}};
  } else {
    out["window"] = nullptr;
  }
  return out;
}

}  // namespace

namespace {

// A canary step under way, as the status shows it (docs/api.md).
json CanaryJson(const sched::ReplicaPlan::Canary& c, std::uint32_t steps) {
  return json{{"step", c.step + 1},
              {"steps", steps},
              {"weight_pct", c.weight_pct},
              {"replicas", c.replicas},
              {"ready", c.ready},
              {"pause_ends_ms", c.pause_ends_ms ? json(*c.pause_ends_ms) : json(nullptr)},
              {"awaiting_resume", c.awaiting_resume}};
}

}  // namespace

json Api::ServiceStatus(const store::ServiceRecord& s,
                        const std::vector<const store::JobRecord*>* live) {
  json status{{"revision", s.revision},
              {"desired", ServiceController::DesiredReplicas(s.spec)},
              {"ready", 0},
              {"not_ready", 0},
              {"running", 0},
              {"starting", 0},
              {"stopping", 0}};
  std::vector<store::JobRecord> read;
  std::vector<const store::JobRecord*> mine;
  if (live == nullptr) {
    store::JobFilter filter;
    filter.tenant = s.tenant;
    filter.service = s.name;
    filter.states = {model::JobState::kPending, model::JobState::kScheduled,
                     model::JobState::kRunning};
    filter.limit = std::size_t{2} * model::kMaxServiceReplicas;
    auto jobs = store_.ListJobs(filter);
    if (!jobs) {
      status["error"] = jobs.error().message;
      return status;
    }
    read = std::move(*jobs);
    for (const auto& job : read) mine.push_back(&job);
    live = &mine;
  }
  const ReplicaCounts n = ServiceController::CountReplicas(s, *live);
  json replicas = json::array();
  for (auto it = live->rbegin(); it != live->rend(); ++it) {  // oldest first
    const store::JobRecord& job = **it;
    const std::int64_t revision = job.spec.service ? job.spec.service->revision : 0;
    const ReplicaHealth h = ServiceController::HealthOf(job);
    // Why a replica that does not run waits: its job's reason, with other
    // tenants' jobs named only as that (as GET /v1/jobs shows it).
    json waiting = nullptr;
    if (!h.running) waiting = JobSummaryJson(job, JobRefsOf(CurrentCaller())).at("reason");
    replicas.push_back(
        json{{"job", job.id},
             {"reason", std::move(waiting)},
             {"revision", revision},
             {"current", ServiceController::RunsCurrentSpec(s, job.spec)},
             {"state", model::JobStateName(job.state)},
             {"ready", h.ready},
             {"probe", h.probe_detail.empty() ? json(nullptr) : json(h.probe_detail)},
             {"not_ready_since_ms",
              h.not_ready_since_ms > 0 ? json(h.not_ready_since_ms) : json(nullptr)},
             {"node", h.node.empty() ? json(nullptr) : json(h.node)},
             {"port", h.port == 0 ? json(nullptr) : json(h.port)},
             {"stopping", h.stopping}});
  }
  status["ready"] = n.ready;
  status["not_ready"] = n.not_ready;
  status["running"] = n.running;
  status["starting"] = n.starting;
  status["stopping"] = n.stopping;
  status["replicas"] = std::move(replicas);
  // Where the service is reached through the gateway (null: no gateway).
  const std::string endpoint = services_ != nullptr ? services_->Endpoint(s.tenant, s.name) : "";
  status["endpoint"] = endpoint.empty() ? json(nullptr) : json(endpoint);
  std::optional<ServiceRound> round;
  if (services_ != nullptr) round = services_->LastRound(s.tenant, s.name);
  if (round && round->revision == s.revision) {
    status["phase"] = sched::ReplicaPhaseName(round->phase);
    status["backoff_until_ms"] =
        round->backoff_until_ms ? json(*round->backoff_until_ms) : json(nullptr);
    status["recent_crashes"] = round->recent_crashes;
    status["refused"] = round->refused.empty() ? json(nullptr) : json(round->refused);
    status["waiting"] = round->waiting.empty() ? json(nullptr) : json(round->waiting);
    status["reconciled_ms"] = round->at_ms;
    status["desired"] = round->desired;
    status["autoscale"] = round->autoscale ? AutoscaleJson(*round->autoscale) : json(nullptr);
    status["routed"] = round->routed;
    status["draining"] = round->draining;
    status["traffic"] =
        round->traffic ? TrafficJson(*round->traffic, round->latency) : json(nullptr);
    status["cold_start_since_ms"] =
        round->cold_start_since_ms ? json(*round->cold_start_since_ms) : json(nullptr);
    status["slo"] = round->slo ? SloJson(*round->slo) : json(nullptr);
    status["last_cold_start"] = round->last_cold_start
                                    ? json{{"job", round->last_cold_start->job_id},
                                           {"duration_ms", round->last_cold_start->duration_ms},
                                           {"at_ms", round->last_cold_start->at_ms}}
                                    : json(nullptr);
    status["canary"] =
        round->canary ? CanaryJson(*round->canary, round->canary_steps) : json(nullptr);
  } else {
    // Not reconciled since its last change (or no controller runs here).
    status["phase"] = "pending";
  }
  if (s.spec.kind == model::ServiceKind::kSession) {
    // Its lifetime as its queue allows it now.
    model::SessionLimits limits = s.spec.session;
    if (auto active = controller_.ActivePolicy(); active) {
      limits = ServiceController::SessionLimitsOf(s.spec, (*active)->policy);
    }
    json session{{"expires_ms", s.created_ms + limits.max_lifetime_ms},
                 {"max_lifetime_ms", limits.max_lifetime_ms},
                 {"idle_since_ms", nullptr},
                 {"idle_ends_ms", nullptr}};
    if (round && round->session) {
      if (round->session->idle_since_ms > 0)
        session["idle_since_ms"] = round->session->idle_since_ms;
      if (round->session->idle_ends_ms > 0) session["idle_ends_ms"] = round->session->idle_ends_ms;
    }
    status["session"] = std::move(session);
  } else {
    status["session"] = nullptr;
  }
  return status;
}

Result<std::string> Api::ServiceReplicaCounts() {
  store::ServiceFilter all;
  all.limit = std::numeric_limits<std::size_t>::max();
  auto services = store_.ListServices(all);
  if (!services) return std::unexpected(services.error());
  if (services->empty()) return RenderServiceMetrics({});
  store::JobFilter live;
  live.replicas_only = true;
  live.states = {model::JobState::kPending, model::JobState::kScheduled, model::JobState::kRunning};
  live.with_runs = true;
  live.limit = std::numeric_limits<std::size_t>::max();
  auto replicas = store_.ListJobs(live);
  if (!replicas) return std::unexpected(replicas.error());
  std::map<std::pair<std::string, std::string>, std::vector<const store::JobRecord*>> of;
  for (const auto& job : *replicas) of[{job.spec.tenant, job.spec.service->name}].push_back(&job);
  // The gateway's request log since berthd started, by service. A log that
  // cannot be read leaves its families out of this scrape, not the rest.
  std::map<std::pair<std::string, std::string>, gateway::RouteLatencyHistogram> latency;
  if (services_ != nullptr) {
    auto histograms = services_->LatencyHistograms();
    if (histograms) {
      for (auto& h : *histograms) latency[{h.tenant, h.service}] = std::move(h);
    } else {
      spdlog::warn("/metrics: the gateway's latency histograms are not readable: {}",
                   histograms.error().message);
    }
  }
  std::vector<ServiceMetricsView> views;
  views.reserve(services->size());
  for (const auto& s : *services) {
    ServiceMetricsView v;
    v.tenant = s.tenant;
    v.service = s.name;
    v.replicas = ServiceController::CountReplicas(s, of[{s.tenant, s.name}]);
    v.desired = ServiceController::DesiredReplicas(s.spec);
    std::optional<ServiceRound> round;
    if (services_ != nullptr) round = services_->LastRound(s.tenant, s.name);
    if (round) {
      // The desired count as the status shows it: the round's, once it
      // reconciled the current revision (a new revision's bounds apply
      // from its first round on). The gateway's counters are the route's,
      // whatever the revision.
      if (round->revision == s.revision) v.desired = round->desired;
      v.traffic = round->traffic;
      if (round->last_cold_start) v.last_cold_start_ms = round->last_cold_start->duration_ms;
    }
    if (auto it = latency.find({s.tenant, s.name}); it != latency.end()) {
      v.latency = std::move(it->second);
    }
    views.push_back(std::move(v));
  }
  return RenderServiceMetrics(views);
}

void Api::ServiceChanged() {
  if (services_ != nullptr) services_->Wake();
}

TenantOf Api::ServiceTenant() {
  return [](const http::Request& req) -> Result<Owner> {
    const std::string tenant = req.matches[1];
    const std::string name = req.matches[2];
    return Owner{fmt::format("service {}/{}", tenant, name), tenant, AuditObject(tenant, name)};
  };
}

void Api::ApplyService(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "service";
  auto spec = model::ParseServiceSpec(req.body);
  if (!spec) return ReplyError(res, spec.error());
  note.tenant = spec->tenant;
  note.object = AuditObject(spec->tenant, spec->name);
  const Caller& caller = CurrentCaller();
  if (auto st = auth_.CheckNamed(caller, spec->tenant, Need::kWrite); !st) {
    return ReplyError(res, st.error());
  }
  // A name keeps its kind: a session cannot become a service or the
  // reverse (their replicas run under different rules).
  if (auto existing = store_.GetService(spec->tenant, spec->name);
      existing && existing->spec.kind != spec->kind) {
    return ReplyError(
        res, Fail(Code::kFailedPrecondition,
                  fmt::format("{}/{} is a {}, not a {}; pick another name, or "
                              "delete it first",
                              spec->tenant, spec->name, model::ServiceKindName(existing->spec.kind),
                              model::ServiceKindName(spec->kind)),
                  "kind")
                 .error());
  }
  // Read before the store's transaction, which must not call the store.
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  auto policy = *active;
  auto admit = [policy](const model::ServiceSpec& s) {
    return CheckServiceQueue(policy->policy, s);
  };
  auto applied = store_.ApplyService(
      *spec, caller.name, clock_.NowMs(), max_services_per_tenant_, admit,
      RecordInChange<store::ServiceApply>(
          note, req, res, clock_.NowMs(), [](AuditNote& n, const store::ServiceApply& a) {
            n.after = ServiceSummary(a.service);
            n.after["applied"] =
                a.applied == store::ServiceApplied::kCreated ? "created" : "revised";
          }));
  if (!applied) {
    note.after = json{{"refused", applied.error().message}};
    return ReplyError(res, applied.error());
  }
  if (applied->applied != store::ServiceApplied::kUnchanged) ServiceChanged();
  json out = ServiceJson(applied->service, ServiceStatus(applied->service));
  switch (applied->applied) {
    case store::ServiceApplied::kCreated:
      out["applied"] = "created";
      break;
    case store::ServiceApplied::kRevised:
      out["applied"] = "revised";
      break;
    case store::ServiceApplied::kUnchanged:
      out["applied"] = "unchanged";
      note.after = json{{"applied", "unchanged"}, {"revision", applied->service.revision}};
      break;
  }
  res.set_header("Location", fmt::format("/v1/services/{}/{}", spec->tenant, spec->name));
  Reply(res, applied->applied == store::ServiceApplied::kCreated ? 201 : 200, out);
}

void Api::ListServices(const http::Request& req, http::Response& res,
                       const model::TenantScope& scope) {
  store::ServiceFilter filter;
  filter.tenant = req.get_param_value("tenant");
  if (const std::string kind = req.get_param_value("kind"); kind == "session") {
    filter.kind = model::ServiceKind::kSession;
  } else if (kind == "service") {
    filter.kind = model::ServiceKind::kService;
  } else if (!kind.empty()) {
    return ReplyError(res,
                      Fail(Code::kInvalidArgument,
                           fmt::format("'{}' is not a kind; use service or session", kind), "kind")
                          .error());
  }
  auto after = AfterIdParam(req, CursorKind::kServices);
  if (!after) return ReplyError(res, after.error());
  filter.before_id = *after;
  // The one authorization layer decides whose services any page may hold.
  filter.tenants = scope;
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  filter.limit = *limit + 1;
  auto list = store_.ListServices(filter);
  if (!list) return ReplyError(res, list.error());
  const bool more = list->size() > *limit;
  if (more) list->resize(*limit);
  // The page's replicas in one read, not one per service.
  std::map<std::pair<std::string, std::string>, std::vector<const store::JobRecord*>> of;
  std::vector<store::JobRecord> replicas;
  if (!list->empty()) {
    store::JobFilter live;
    live.replicas_only = true;
    live.tenant = filter.tenant;
    live.tenants = scope;
    live.states = {model::JobState::kPending, model::JobState::kScheduled,
                   model::JobState::kRunning};
    live.limit = std::numeric_limits<std::size_t>::max();
    auto read = store_.ListJobs(live);
    if (!read) return ReplyError(res, read.error());
    replicas = std::move(*read);
    for (const auto& job : replicas) {
      of[{job.spec.tenant, job.spec.service->name}].push_back(&job);
    }
  }
  json services = json::array();
  for (const auto& s : *list) {
    services.push_back(ServiceJson(s, ServiceStatus(s, &of[{s.tenant, s.name}])));
  }
  json body{{"services", std::move(services)}};
  // The gateway every service of the list is called through: its address
  // and whether it serves, the same for every caller (nothing of any
  // tenant's routes); null when berthd runs none.
  const auto gateway = services_ != nullptr ? services_->GatewayState() : std::nullopt;
  body["gateway"] = gateway ? json{{"url", gateway->url}, {"up", gateway->up}} : json(nullptr);
  if (more) body["next"] = EncodeCursor(CursorKind::kServices, std::to_string(list->back().id));
  Reply(res, 200, body);
}

void Api::GetService(const http::Request& req, http::Response& res) {
  auto s = store_.GetService(req.matches[1], req.matches[2]);
  if (!s) return ReplyError(res, s.error());
  Reply(res, 200, ServiceJson(*s, ServiceStatus(*s)));
}

void Api::CheckServiceAccess(const http::Request& req, http::Response& res) {
  auto s = store_.GetService(req.matches[1], req.matches[2]);
  if (!s) return ReplyError(res, s.error());
  // The gateway passes the caller's name on to the replica.
  const std::string& user = CurrentCaller().name;
  res.set_header("X-Berth-User", user);
  Reply(res, 200, json{{"tenant", s->tenant}, {"service", s->name}, {"user", user}});
}

void Api::ScaleService(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  const std::string name = req.matches[2];
  note.object = AuditObject(tenant, name);
  note.tenant = tenant;
  if (!req.has_param("min") && !req.has_param("max")) {
    return ReplyError(res,
                      Error{Code::kInvalidArgument,
                            "say the new bounds: min, max or both (e.g. ?min=1&max=4)", "min"});
  }
  auto current = store_.GetService(tenant, name);
  if (!current) return ReplyError(res, current.error());
  model::ReplicaBounds bounds = current->spec.replicas;
  for (const char* field : {"min", "max"}) {
    if (!req.has_param(field)) continue;
    auto v = ParseIntParam(req.get_param_value(field), field, 0, model::kMaxServiceReplicas);
    if (!v) return ReplyError(res, v.error());
    (std::string_view(field) == "min" ? bounds.min : bounds.max) = static_cast<std::uint32_t>(*v);
  }
  auto scaled = store_.ScaleService(
      tenant, name, bounds, CurrentCaller().name, clock_.NowMs(),
      RecordInChange<store::ServiceRecord, store::ServiceRecord>(
          note, req, res, clock_.NowMs(),
          [](AuditNote& n, const store::ServiceRecord& was, const store::ServiceRecord& now) {
            n.before = ServiceSummary(was);
            n.after = ServiceSummary(now);
          }));
  if (!scaled) return ReplyError(res, scaled.error());
  ServiceChanged();
  Reply(res, 200, ServiceJson(*scaled, ServiceStatus(*scaled)));
}

void Api::RollbackService(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  const std::string name = req.matches[2];
  note.object = AuditObject(tenant, name);
  note.tenant = tenant;
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  auto policy = *active;
  auto admit = [policy](const model::ServiceSpec& s) {
    return CheckServiceQueue(policy->policy, s);
  };
  auto rolled = store_.RollbackService(
      tenant, name, CurrentCaller().name, clock_.NowMs(), admit,
      RecordInChange<store::ServiceRecord, store::ServiceRecord>(
          note, req, res, clock_.NowMs(),
          [](AuditNote& n, const store::ServiceRecord& was, const store::ServiceRecord& now) {
            n.before = ServiceSummary(was);
            n.after = ServiceSummary(now);
            if (!now.revisions.empty() && now.revisions.front().restores) {
              n.after["restores"] = *now.revisions.front().restores;
            }
          }));
  if (!rolled) return ReplyError(res, rolled.error());
  ServiceChanged();
  Reply(res, 200, ServiceJson(*rolled, ServiceStatus(*rolled)));
}

void Api::ResumeServiceRollout(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  const std::string name = req.matches[2];
  note.object = AuditObject(tenant, name);
  note.tenant = tenant;
  auto service = store_.GetService(tenant, name);
  if (!service) return ReplyError(res, service.error());
  const auto steps = static_cast<std::uint32_t>(service->spec.rollout.canary.size());
  if (steps == 0) {
    return ReplyError(res, Error{Code::kFailedPrecondition,
                                 fmt::format("{}/{} has no canary steps (rollout.canary): its "
                                             "rollouts replace replicas without pausing",
                                             tenant, name),
                                 "rollout.canary"});
  }
  auto progress = store_.GetRolloutProgress(tenant, name);
  if (!progress) return ReplyError(res, progress.error());
  if (!*progress || (*progress)->revision != service->revision || (*progress)->step >= steps) {
    return ReplyError(
        res, Error{Code::kFailedPrecondition,
                   fmt::format("no canary step of {}/{} is under way (revision {}): a rollout's "
                               "steps start once its new replicas are created; see berth svc "
                               "rollout status {}/{}",
                               tenant, name, service->revision, tenant, name),
                   "rollout"});
  }
  const store::RolloutProgress was = **progress;
  const store::RolloutProgress next{was.revision, was.step + 1, clock_.NowMs(),
                                    CurrentCaller().name};
  auto moved = store_.SetRolloutProgress(
      tenant, name, was, next,
      RecordInChange<store::RolloutProgress>(
          note, req, res, clock_.NowMs(), [&](AuditNote& n, const store::RolloutProgress& p) {
            n.after = json{{"revision", p.revision}, {"step_ended", p.step}, {"steps", steps}};
          }));
  if (!moved) return ReplyError(res, moved.error());
  ServiceChanged();
  json out = ServiceJson(*service, ServiceStatus(*service));
  // The status is the controller's last round, from before the resume.
  out["resumed"] = json{{"step_ended", was.step + 1}, {"steps", steps}};
  Reply(res, 200, out);
}

void Api::DeleteService(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  const std::string name = req.matches[2];
  note.object = AuditObject(tenant, name);
  note.tenant = tenant;
  auto gone = store_.DeleteService(
      tenant, name, CurrentCaller().name, clock_.NowMs(),
      RecordInChange<store::ServiceRecord>(note, req, res, clock_.NowMs(),
                                           [](AuditNote& n, const store::ServiceRecord& was) {
                                             n.before = ServiceSummary(was);
                                             n.after = json{{"deleted", true}};
                                           }));
  if (!gone) return ReplyError(res, gone.error());
  // Its replicas are stopped by the service controller's next round, now.
  ServiceChanged();
  Reply(res, 200,
        json{{"deleted", true}, {"tenant", tenant}, {"name", name}, {"revision", gone->revision}});
}

}  // namespace berth::server
