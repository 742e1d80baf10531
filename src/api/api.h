// The REST/JSON API: routes, request parsing and status codes. Handlers are
// thin: they parse, call the Controller or the Store, and render.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>

#include "api/audit.h"
#include "api/auth.h"
#include "api/rate_limit.h"
#include "common/clock.h"
#include "control/controller.h"
#include "http/server.h"
#include "meter/alerting.h"
#include "meter/metering.h"
#include "meter/metrics.h"
#include "meter/ops_report.h"
#include "model/reason.h"
#include "model/tenant_scope.h"
#include "store/audit_log.h"
#include "store/store.h"
#include "store/telemetry_store.h"
#include "store/traffic_store.h"

namespace berth::server {

class ServiceController;  // control/service_controller.h

// Rows a report or usage request may read unless --report-max-rows says
// otherwise.
inline constexpr std::size_t kDefaultReportMaxRows = 200'000;
// Services one tenant may have unless --max-services-per-tenant says otherwise.
inline constexpr std::size_t kDefaultMaxServicesPerTenant = 100;

class Api {
 public:
  Api(Controller& controller, store::Store& store, Authorizer& auth, const Clock& clock)
      : controller_(controller), store_(store), auth_(auth), clock_(clock) {}

  // Installs every route on `http`, each behind the guard of its Rule.
  void Register(http::Server& http);
  // Every route as registered: method, path pattern and rule (for the
  // OpenAPI document's x-berth-access and the authorization tests).
  struct RouteInfo {
    std::string method;
    std::string pattern;
    Access access;
    bool per_tenant;  // the rule names the object's tenant
    Need need;
  };
  const std::vector<RouteInfo>& routes() const { return routes_; }
  // Where mutating requests are recorded (before they are answered); null:
  // nowhere, and the audit endpoints answer Unavailable.
  void set_audit(store::AuditLog* audit) { audit_ = audit; }
  // Per-caller request limits (rate_limit.h); null: none. /healthz is exempt.
  // Each verified token is limited by `limiter`; before verification each
  // source address by SourceLimits() of its config (rate_limit.h).
  void set_rate_limiter(RateLimiter* limiter) {
    limiter_ = limiter;
    source_limiter_ = limiter == nullptr
                          ? nullptr
                          : std::make_unique<RateLimiter>(SourceLimits(limiter->config()), clock_);
  }
  // The request body limit berthd set on the server (--max-body), named in
  // its 413 answers.
  void set_max_body_bytes(std::size_t bytes) { max_body_bytes_ = bytes; }
  // Usage records, prices and budgets (api_usage.cc); null: those endpoints
  // answer Unavailable.
  void set_meter(Meter* meter) { meter_ = meter; }
  // The alert rules in force; null: /v1/alert-rules answers 503.
  void set_alerts(AlertRouter* alerts) { alerts_ = alerts; }
  // In-memory counters for GET /metrics (metrics.h); the API counts admin
  // interventions into it. Null: /metrics answers Unavailable.
  void set_metrics(ServerMetrics* metrics) { metrics_ = metrics; }
  // The HTTP server's own counters for GET /metrics (berth_http_*); none:
  // not shown.
  void set_http_stats(std::function<http::ServerStats()> stats) { http_stats_ = std::move(stats); }
  // This berthd's part in the control plane, for /healthz and /readyz:
  // {"role": "leader", "term": N, "leading_since": MS} with several berthd
  // on PostgreSQL. Unset: {"role": "single"}.
  void set_leadership(std::function<nlohmann::json()> role) { leadership_ = std::move(role); }
  // GPU telemetry history (api_telemetry.cc); null: the telemetry endpoints
  // answer Unavailable, jobs show no utilization and /metrics no DCGM gauges.
  void set_telemetry(store::TelemetryStore* telemetry) { telemetry_ = telemetry; }
  // How often an open GET /v1/events stream checks its caller again
  // (--events-recheck): a revoked token, an expired session or a lost
  // membership ends or narrows it within this time.
  void set_events_recheck_ms(std::int64_t ms) { events_recheck_ms_ = ms; }
  // The release /healthz and /readyz name (a rolling upgrade shows which
  // berthd runs what; `berth poc` records it).
  void set_version(std::string version) { version_ = std::move(version); }
  // Services' request history by hour, for the operations report.
  void set_traffic(store::ServiceTrafficStore* traffic) { traffic_ = traffic; }
  // The service controller, woken after each change to a service and asked
  // for its last round in a service's status; null: services are stored
  // and shown with their replicas, and nothing wakes a controller.
  void set_services(ServiceController* services) { services_ = services; }
  // Measured GPU utilization for the operations report (api_report.cc): the
  // readings of `run_ids` and of the fleet over [from, to). Null: the report
  // says "not measured".
  using OpsUtilizationSource = std::function<Result<OpsUtilization>(
      TimeMs from, TimeMs to, std::span<const std::string> run_ids)>;
  void set_ops_utilization(OpsUtilizationSource source) { ops_utilization_ = std::move(source); }
  // The most stored rows one report or usage request may read
  // (--report-max-rows, docs/operations.md "Read limits"): the operations
  // report counts its jobs, runs and audit records together; GET /v1/usage
  // and /v1/usage/records their runs. A window holding more is refused with
  // 400 naming `from`, the window and this figure.
  void set_report_max_rows(std::size_t rows) { report_max_rows_ = rows; }
  // The most services one tenant may have (--max-services-per-tenant); a
  // create past it is refused naming the limit and the flag.
  void set_max_services_per_tenant(std::size_t n) { max_services_per_tenant_ = n; }

 private:
  // A handler that reads tenant-owned rows: it gets the request's tenant
  // scope (model/tenant_scope.h), computed once by the guard from the
  // authenticated caller, and passes it to every store read that lists such
  // rows. It never narrows a list by tenant itself.
  using ScopedHandler =
      std::function<void(const http::Request&, http::Response&, const model::TenantScope&)>;
  // A mutating handler: it fills `note` with what it changed or was refused.
  using AuditedHandler = void (Api::*)(const http::Request&, http::Response&, AuditNote&);
  using ScopedAuditedHandler = void (Api::*)(const http::Request&, http::Response&, AuditNote&,
                                             const model::TenantScope&);
  // Runs `handler`, then appends its audit record, so the record is durable
  // before the answer leaves.
  ScopedHandler Audited(std::string action, AuditedHandler handler);
  ScopedHandler Audited(std::string action, ScopedAuditedHandler handler);
  using AuditedBody = std::function<void(const http::Request&, http::Response&, AuditNote&,
                                         const model::TenantScope&)>;
  ScopedHandler AuditedRun(std::string action, AuditedBody body);
  // Registers `handler` for `method pattern` behind the guard: authenticate,
  // check `rule`, compute the caller's tenant scope (Authorizer::ScopeOf),
  // run the handler with the caller in scope and the tenant scope as its
  // argument. A denial is answered (401, 403, or 404 for another tenant's
  // object) and recorded. A public route's handler gets a scope of no tenant.
  void Route(http::Server& http, std::string_view method, const std::string& pattern, Rule rule,
             ScopedHandler handler);
  // For a handler that lists nothing tenant-owned.
  void Route(http::Server& http, std::string_view method, const std::string& pattern, Rule rule,
             http::Handler handler);
  // For a scoped caller (a job token, a metrics-reader; auth.h Scope):
  // true when `rule` admits it, else answers 403 (a route it may not call)
  // or 404 (another job than a job token's own) and records the denial.
  bool AdmitScoped(const Rule& rule, const Caller& caller, const http::Request& req,
                   http::Response& res);
  void RecordDenial(const Rule& rule, const http::Request& req, const http::Response& res,
                    std::string tenant, std::string object);
  // The tenant of the job named by the path's first capture.
  TenantOf JobTenant();
  // The tenant of the quota request named by the path's first capture.
  TenantOf QuotaRequestTenant();
  // The tenant named by the path's first capture (it must be in the policy).
  TenantOf PathTenant();
  // The service the path's captures name (tenant, then name): its tenant
  // is the path's, so no store read is needed to decide who may see it.
  static TenantOf ServiceTenant();

  // Identities, memberships and tokens (api_identity.cc).
  void WhoAmI(const http::Request& req, http::Response& res);
  void Login(const http::Request& req, http::Response& res, AuditNote& note);
  void StartConsoleSession(const http::Request& req, http::Response& res, AuditNote& note);
  void GetConsoleSession(const http::Request& req, http::Response& res);
  void EndConsoleSession(const http::Request& req, http::Response& res, AuditNote& note);
  void ListIdentities(const http::Request& req, http::Response& res);
  void CreateIdentity(const http::Request& req, http::Response& res, AuditNote& note);
  void SetIdentityFlag(const http::Request& req, http::Response& res, AuditNote& note);
  void ListMembers(const http::Request& req, http::Response& res);
  void SetMember(const http::Request& req, http::Response& res, AuditNote& note);
  void RemoveMember(const http::Request& req, http::Response& res, AuditNote& note);
  void ListTokens(const http::Request& req, http::Response& res);
  void CreateToken(const http::Request& req, http::Response& res, AuditNote& note);
  void RevokeToken(const http::Request& req, http::Response& res, AuditNote& note);
  // Runs before routing (api_gate.cc): the rate limit, then the route's
  // declared query parameters (request_decode.h). True when it answered.
  bool Gate(const http::Request& req, http::Response& res);
  // Takes one request from `key`'s bucket of `limiter`; false after
  // answering 429 with Retry-After.
  bool Admit(RateLimiter& limiter, const std::string& key, http::Response& res) const;
  void ListAudit(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void VerifyAudit(const http::Request& req, http::Response& res);
  // Metering (api_usage.cc, docs/metering.md).
  void GetPrices(const http::Request& req, http::Response& res);
  void ApplyPrices(const http::Request& req, http::Response& res, AuditNote& note);
  void Usage(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void UsageRecords(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void ListBudgets(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void SetBudget(const http::Request& req, http::Response& res, AuditNote& note);
  void DeleteBudget(const http::Request& req, http::Response& res, AuditNote& note);
  // GET /v1/reports/ops (api_report.cc, docs/metering.md "Operations report").
  void GetOpsReport(const http::Request& req, http::Response& res, const model::TenantScope& scope);

  // Quota requests (api_quota.cc): a tenant asks, a platform admin decides;
  // an approval is a new policy version.
  void FileQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note);
  void ListQuotaRequests(const http::Request& req, http::Response& res,
                         const model::TenantScope& scope);
  void GetQuotaRequest(const http::Request& req, http::Response& res);
  void ApproveQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note);
  void RejectQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note);
  void WithdrawQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note);

  // Inference services (api_services.cc, docs/services.md): stored,
  // versioned objects of a tenant; no replicas run yet.
  void ApplyService(const http::Request& req, http::Response& res, AuditNote& note);
  void ListServices(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void GetService(const http::Request& req, http::Response& res);
  void CheckServiceAccess(const http::Request& req, http::Response& res);
  void ScaleService(const http::Request& req, http::Response& res, AuditNote& note);
  void RollbackService(const http::Request& req, http::Response& res, AuditNote& note);
  void ResumeServiceRollout(const http::Request& req, http::Response& res, AuditNote& note);
  void DeleteService(const http::Request& req, http::Response& res, AuditNote& note);
  // A service's status: its replicas as stored, and the controller's last round.
  // `live`: the service's live replicas (with runs), newest first, when the
  // caller read them already; nullptr: read here.
  nlohmann::json ServiceStatus(const store::ServiceRecord& s,
                               const std::vector<const store::JobRecord*>* live = nullptr);
  void ServiceChanged();
  // The service families of GET /metrics (api/service_metrics.h): each
  // service's replicas and, with the gateway, its traffic, request
  // durations, responses and last cold start.
  Result<std::string> ServiceReplicaCounts();

  void SubmitJob(const http::Request& req, http::Response& res, AuditNote& note);
  void ListJobs(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  // GET /v1/events: committed changes as server-sent events (api_events.cc).
  void Events(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void GetJob(const http::Request& req, http::Response& res);
  void CancelJob(const http::Request& req, http::Response& res, AuditNote& note);
  void CancelArray(const http::Request& req, http::Response& res, AuditNote& note);
  // POST /v1/jobs/ID/checkpoint[?at_ms=T]: a running job reports that it
  // saved a checkpoint (now, or at T), for the work an eviction would lose.
  void ReportCheckpoint(const http::Request& req, http::Response& res, AuditNote& note);
  void Logs(const http::Request& req, http::Response& res);
  // A job's outputs on the node of its run (api_outputs.cc): a listing, and
  // a file's bytes (audited: who took which file).
  void ListOutputs(const http::Request& req, http::Response& res);
  void DownloadOutput(const http::Request& req, http::Response& res, AuditNote& note);
  // GET /v1/jobs/{id}/why?lang=en|zh: the reason rendered in one language,
  // with the timeline events that explain it.
  void Why(const http::Request& req, http::Response& res);
  // The layers of a pending job's reason, the one holding it now first,
  // then the nodes' (sched/layers.h) when the reason is about something
  // else; and that node layer's sentence in `lang` ("" when none).
  Result<std::pair<nlohmann::json, std::string>> WhyLayers(const store::JobRecord& job,
                                                           const model::Reason& told,
                                                           model::Lang lang);
  // The job's failure class, message and evidence (model/failure.h), from
  // its reason and the tail of its failed replica's log; null if none.
  nlohmann::json FailureJson(const store::JobRecord& job, model::Lang lang) const;
  void ListNodes(const http::Request& req, http::Response& res);
  void ListGpus(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  // Each GPU of GpusJson gets `telemetry` (its newest fresh sample, or
  // null) and `idle_allocated`.
  void AddLatestTelemetry(nlohmann::json& gpus) const;
  // GET /v1/queues?tenant=: each queue's GPU quota against what it holds now.
  void ListQueues(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void GetNode(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  // POST /v1/nodes/NODE[/gpus/INDEX]/(cordon|drain|uncordon)?reason=...
  void CordonAction(const http::Request& req, http::Response& res, AuditNote& note);
  // DELETE /v1/nodes/{node}: removes the node and revokes its certificates.
  void RemoveNode(const http::Request& req, http::Response& res, AuditNote& note);
  // Alerts (api_alerts.cc, docs/operations.md "Alerts").
  void ListAlerts(const http::Request& req, http::Response& res);
  void ResolveAlert(const http::Request& req, http::Response& res, AuditNote& note);
  void GetAlertRules(const http::Request& req, http::Response& res);
  void ApplyAlertRules(const http::Request& req, http::Response& res, AuditNote& note);
  void ListAlertDeliveries(const http::Request& req, http::Response& res);
  void GetPolicy(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  void ListPolicyVersions(const http::Request& req, http::Response& res);
  void GetPolicyVersion(const http::Request& req, http::Response& res,
                        const model::TenantScope& scope);
  void ApplyPolicy(const http::Request& req, http::Response& res, AuditNote& note,
                   const model::TenantScope& scope);
  void RollbackPolicy(const http::Request& req, http::Response& res, AuditNote& note);
  void DiffPolicy(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  // POST /v1/policy/preview: the recent history replayed under the active
  // and the proposed policy (policy_preview.h); applies nothing.
  void PreviewPolicy(const http::Request& req, http::Response& res);
  // GET /v1/history: the jobs of a window with every run (history.h).
  void History(const http::Request& req, http::Response& res);
  // Telemetry (api_telemetry.cc, docs/metering.md "Telemetry").
  // GET /v1/jobs/{id}/telemetry: per-run summaries and the job's GPUs' series.
  void JobTelemetry(const http::Request& req, http::Response& res);
  // GET /v1/gpus/{uuid}/telemetry: one GPU's series; other tenants' runs
  // are "another tenant".
  void GpuTelemetry(const http::Request& req, http::Response& res, const model::TenantScope& scope);
  // The job's runs summarized over [from, to).
  Result<std::map<std::string, store::UtilSummary>> JobRunSummaries(const store::JobRecord& job,
                                                                    TimeMs from, TimeMs to);
  // GET /v1/jobs/{id}'s "utilization": its runs' readings since it was
  // submitted; null without samples.
  nlohmann::json JobUtilization(const store::JobRecord& job);
  // GET /metrics: the Prometheus text format (docs/metrics.md).
  void Metrics(const http::Request& req, http::Response& res);
  // Counts a succeeded operator change (cordon, drain, policy, admin cancel)
  // as berth_admin_interventions_total.
  void CountIntervention(const std::string& action, const http::Request& req,
                         const http::Response& res);

  std::function<http::ServerStats()> http_stats_;
  std::function<nlohmann::json()> leadership_;
  Controller& controller_;
  store::Store& store_;
  Authorizer& auth_;
  const Clock& clock_;
  store::AuditLog* audit_ = nullptr;
  std::vector<RouteInfo> routes_;
  RateLimiter* limiter_ = nullptr;
  std::unique_ptr<RateLimiter> source_limiter_;
  RefusalCounter refusals_;  // refused authentications, aggregated in the audit log
  std::size_t max_body_bytes_ = 2 << 20;
  std::size_t report_max_rows_ = kDefaultReportMaxRows;
  std::size_t max_services_per_tenant_ = kDefaultMaxServicesPerTenant;
  Meter* meter_ = nullptr;
  AlertRouter* alerts_ = nullptr;
  ServerMetrics* metrics_ = nullptr;
  store::TelemetryStore* telemetry_ = nullptr;
  std::int64_t events_recheck_ms_ = 30'000;
  std::string version_;
  store::ServiceTrafficStore* traffic_ = nullptr;
  ServiceController* services_ = nullptr;
  OpsUtilizationSource ops_utilization_;
};

}  // namespace berth::server
