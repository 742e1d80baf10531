// GET /v1/reports/ops: the operations report of a window (ops_report.h,
// docs/metering.md "Operations report"). The handler only gathers: usage
// records from the Meter, jobs with their runs from the Store, the window's
// audit entries, GPU capacity from the inventory and, when berthd has
// telemetry, measured utilization through the hook set on Api. A caller who
// is not a platform-admin gets its readable tenants only and no fleet-wide
// figures.
#include <fmt/format.h>

#include "api/api.h"
#include "api/api_util.h"
#include "gateway/latency.h"

namespace berth::server {

void Api::GetOpsReport(const http::Request& req, http::Response& res,
                       const model::TenantScope& scope) {
  if (meter_ == nullptr) {
    return ReplyError(res, Error{Code::kUnavailable, "this berthd keeps no usage records", {}});
  }
  const TimeMs now = clock_.NowMs();
  TimeMs from = now - std::int64_t{24} * 3600 * 1000;
  TimeMs to = now;
  for (const char* name : {"from", "to"}) {
    if (!req.has_param(name)) continue;
    auto t = TimeParam(req.get_param_value(name), name, now);
    if (!t) return ReplyError(res, t.error());
    (std::string_view(name) == "from" ? from : to) = *t;
  }
  if (to <= from) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 fmt::format("the window is empty: to ({}) must be after from "
                                             "({}); give --to later than --from",
                                             to, from),
                                 "to"});
  }
  OpsInputs in;
  in.from = from;
  in.to = to;
  in.fleet_visible = scope.all();

  // Rows read, counted against report_max_rows_ over every source; each
  // read asks for one row more than is left, so a window holding more than
  // the cap is refused without reading all of it. Every read runs on a
  // read connection: none holds the store's writer.
  constexpr std::string_view kRows =
      "stored rows (jobs, runs, audit records and services' request hours)";
  const std::size_t cap = report_max_rows_;
  std::size_t read = 0;
  // Every read takes the request's scope: the rows of other tenants are
  // neither read nor counted against the cap.
  auto records = meter_->Records(from, to, "", scope, now, /*measure=*/true, cap + 1);
  if (!records) return ReplyError(res, records.error());
  read += records->size();
  if (read > cap) return ReplyError(res, WindowTooLarge(kRows, from, to, cap));
  in.records = std::move(*records);

  // Every job that may matter: one still waiting may be old, and a run
  // ending in the window may belong to an old job; one that finished
  // before the window cannot.
  auto jobs = store_.JobsForWindow(from, to, scope, cap - read + 1);
  if (!jobs) return ReplyError(res, jobs.error());
  for (const auto& j : *jobs) read += 1 + j.runs.size();
  if (read > cap) return ReplyError(res, WindowTooLarge(kRows, from, to, cap));
  in.jobs = std::move(*jobs);

  if (audit_ != nullptr) {
    store::AuditFilter filter;
    filter.since = from;
    filter.until = to;
    filter.limit = cap - read + 1;
    filter.tenants = scope;
    auto entries = audit_->Query(filter);
    if (!entries) return ReplyError(res, entries.error());
    read += entries->size();
    if (read > cap) return ReplyError(res, WindowTooLarge(kRows, from, to, cap));
    in.audit = std::move(*entries);
  }

  auto nodes = store_.ListNodes();
  if (!nodes) return ReplyError(res, nodes.error());
  for (const auto& n : *nodes) in.gpus += static_cast<std::int64_t>(n.info.gpus.size());
  // Capacity counts the window up to now: the future holds no capacity yet.
  const TimeMs elapsed_end = std::min(to, std::max(now, from));
  in.capacity_mgpu_ms = in.gpus * 1000 * (elapsed_end - from);

  if (scope.all()) {
    // Alerts are the fleet's (nodes, GPUs, queues): counted for a platform
    // admin only. They are few (one open per rule and subject), so all are
    // read and the report counts those raised in the window.
    auto alerts = store_.FindAlerts(store::AlertFilter{});
    if (!alerts) return ReplyError(res, alerts.error());
    std::vector<TimeMs> raised;
    raised.reserve(alerts->size());
    for (const auto& a : *alerts) raised.push_back(a.raised_ms);
    in.alerts_raised_ms = std::move(raised);
  }

  auto prices = meter_->Prices();
  if (!prices) return ReplyError(res, prices.error());
  in.currency = prices->empty() ? "USD" : prices->back().table.currency;

  if (ops_utilization_) {
    std::vector<std::string> run_ids;
    run_ids.reserve(in.records.size());
    for (const auto& r : in.records) run_ids.push_back(r.run_id);
    auto util = ops_utilization_(from, to, run_ids);
    if (!util) return ReplyError(res, util.error());
    in.utilization = std::move(*util);
  }

  if (traffic_ != nullptr) {
    // Each service's requests, by the hours that overlap the window.
    auto hours = traffic_->Range(from, to, cap - read, scope);
    if (!hours && hours.error().code == Code::kResourceExhausted) {
      return ReplyError(res, WindowTooLarge(kRows, from, to, cap));
    }
    if (!hours) return ReplyError(res, hours.error());
    for (const auto& h : *hours) {
      const std::vector<std::pair<int, std::int64_t>> buckets(h.latency_buckets.begin(),
                                                              h.latency_buckets.end());
      const auto latency = gateway::LatencyHistogram::FromBuckets(
          buckets, h.latency_sum_ms, h.latency_min_ms, h.latency_max_ms);
      OpsTraffic t;
      t.tenant = h.tenant;
      t.service = h.service;
      t.requests = h.requests;
      t.responses_2xx = h.responses_2xx;
      t.responses_4xx = h.responses_4xx;
      t.responses_5xx = h.responses_5xx;
      t.held = h.held;
      t.p50_ms = latency.Quantile(0.50);
      t.p95_ms = latency.Quantile(0.95);
      t.p99_ms = latency.Quantile(0.99);
      t.max_ms = latency.max_ms();
      t.slo_windows = h.slo_windows;
      t.slo_windows_met = h.slo_windows_met;
      in.traffic.push_back(std::move(t));
    }
  }

  auto report = BuildOpsReport(in);
  if (!report) return ReplyError(res, report.error());
  Reply(res, 200, OpsReportJson(*report));
}

}  // namespace berth::server
