// The REST/JSON API: routes, request parsing and status codes. Handlers are
// thin: they parse, call the Controller or the Store, and render.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "model/reason.h"
#include "server/audit.h"
#include "server/controller.h"
#include "server/metering.h"
#include "store/audit_log.h"
#include "store/store.h"

namespace berth::server {

class Api {
 public:
  Api(Controller& controller, store::Store& store, const Clock& clock)
      : controller_(controller), store_(store), clock_(clock) {}

  // Installs every route on `http`.
  void Register(httplib::Server& http);
  // Where mutating requests are recorded (before they are answered); null:
  // nowhere, and the audit endpoints answer Unavailable.
  void set_audit(store::AuditLog* audit) { audit_ = audit; }
  // Usage records, prices and budgets (api_usage.cc); null: those endpoints
  // answer Unavailable.
  void set_meter(Meter* meter) { meter_ = meter; }

 private:
  // A mutating handler: it fills `note` with what it changed or was refused.
  using AuditedHandler = void (Api::*)(const httplib::Request&, httplib::Response&, AuditNote&);
  // Runs `handler`, then appends its audit record, so the record is durable
  // before the answer leaves.
  httplib::Server::Handler Audited(std::string action, AuditedHandler handler);
  void ListAudit(const httplib::Request& req, httplib::Response& res);
  void VerifyAudit(const httplib::Request& req, httplib::Response& res);
  // Metering (api_usage.cc, docs/metering.md).
  void GetPrices(const httplib::Request& req, httplib::Response& res);
  void ApplyPrices(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  void Usage(const httplib::Request& req, httplib::Response& res);
  void UsageRecords(const httplib::Request& req, httplib::Response& res);
  void ListBudgets(const httplib::Request& req, httplib::Response& res);
  void SetBudget(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  void DeleteBudget(const httplib::Request& req, httplib::Response& res, AuditNote& note);

  void SubmitJob(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  void ListJobs(const httplib::Request& req, httplib::Response& res);
  void GetJob(const httplib::Request& req, httplib::Response& res);
  void CancelJob(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  // POST /v1/jobs/ID/checkpoint[?at_ms=T]: a running job reports that it
  // saved a checkpoint (now, or at T), for the work an eviction would lose.
  void ReportCheckpoint(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  void Logs(const httplib::Request& req, httplib::Response& res);
  // GET /v1/jobs/{id}/why?lang=en|zh: the reason rendered in one language,
  // with the timeline events that explain it.
  void Why(const httplib::Request& req, httplib::Response& res);
  // The job's failure class, message and evidence (model/failure.h), from
  // its reason and the tail of its failed replica's log; null if none.
  nlohmann::json FailureJson(const store::JobRecord& job, model::Lang lang) const;
  void ListNodes(const httplib::Request& req, httplib::Response& res);
  void ListGpus(const httplib::Request& req, httplib::Response& res);
  void GetNode(const httplib::Request& req, httplib::Response& res);
  // POST /v1/nodes/NODE[/gpus/INDEX]/(cordon|drain|uncordon)?reason=...
  void CordonAction(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  void ListAlerts(const httplib::Request& req, httplib::Response& res);
  void GetPolicy(const httplib::Request& req, httplib::Response& res);
  void ListPolicyVersions(const httplib::Request& req, httplib::Response& res);
  void GetPolicyVersion(const httplib::Request& req, httplib::Response& res);
  void ApplyPolicy(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  void RollbackPolicy(const httplib::Request& req, httplib::Response& res, AuditNote& note);
  void DiffPolicy(const httplib::Request& req, httplib::Response& res);
  // POST /v1/policy/preview: the recent history replayed under the active
  // and the proposed policy (policy_preview.h); applies nothing.
  void PreviewPolicy(const httplib::Request& req, httplib::Response& res);
  // GET /v1/history: the jobs of a window with every run (history.h).
  void History(const httplib::Request& req, httplib::Response& res);

  Controller& controller_;
  store::Store& store_;
  const Clock& clock_;
  store::AuditLog* audit_ = nullptr;
  Meter* meter_ = nullptr;
};

}  // namespace berth::server
