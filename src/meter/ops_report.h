// The operations report (docs/metering.md, "Operations report"): one window
// of a cluster's life, overall and per tenant — GPU allocation against
// capacity, measured GPU and memory utilization when telemetry gives it,
// queue wait, run outcomes and failures by class, evictions and the
// GPU-hours they lost, cost, and the manual interventions of admins.
//
// BuildOpsReport is a pure function over plain inputs (usage records, jobs
// with their runs, audit entries, capacity, optional measured utilization),
// so it is tested with constructed values and the API handler only gathers.
// Every sum is an integer (mGPU-ms, micro-units, milliseconds, counts);
// percentages and averages are computed when rendered, from these.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/usage.h"
#include "store/audit_log.h"
#include "store/store.h"
#include "store/telemetry_store.h"

namespace berth::server {

// Measured utilization of the window, from GPU telemetry: per run id the
// readings of its GPUs, and the whole fleet's. A run absent from `runs` was
// not sampled.
struct OpsUtilization {
  std::map<std::string, store::UtilSummary> runs;
  std::optional<store::UtilSummary> fleet;
};

// One service's requests through the gateway over the hours that overlap
// the window (store/traffic_store.h): counts, and latency percentiles the
// API computed from the hours' merged histogram.
struct OpsTraffic {
  std::string tenant;
  std::string service;
  std::int64_t requests = 0;
  std::int64_t responses_2xx = 0;
  std::int64_t responses_4xx = 0;
  std::int64_t responses_5xx = 0;
  std::int64_t held = 0;
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  std::int64_t max_ms = 0;
  std::int64_t slo_windows = 0;
  std::int64_t slo_windows_met = 0;
};

struct OpsInputs {
  TimeMs from = 0;  // the window [from, to)
  TimeMs to = 0;
  // Meter::Records for the window: clipped to it and priced.
  std::vector<model::UsageRecord> records;
  // Every job submitted before `to` that may matter (any still waiting at
  // `from`, any with a run in the window), with its runs.
  std::vector<store::JobRecord> jobs;
  // The audit entries of the window (any action; the report picks).
  std::vector<store::AuditEntry> audit;
  // GPUs in the inventory and their capacity over the window (GPUs x 1000 x
  // the window's elapsed length), in mGPU-ms.
  std::int64_t gpus = 0;
  std::int64_t capacity_mgpu_ms = 0;
  std::string currency = "USD";
  // nullopt: not measured (no telemetry).
  std::optional<OpsUtilization> utilization;
  // Per service, its requests over the hours that overlap the window (the
  // report's request figures are to the hour); services the caller may
  // not see are left out by the caller.
  std::vector<OpsTraffic> traffic;
  // False for a caller who is not a platform-admin: capacity, the fleet's
  // utilization and interventions that name no tenant are left out.
  bool fleet_visible = true;
  // When each alert was raised (any time; the report counts those in the
  // window). Alerts are about the fleet (nodes, GPUs, queues), so only a
  // fleet-visible report counts them; nullopt: berthd keeps no alerts.
  std::optional<std::vector<TimeMs>> alerts_raised_ms;
};

// Queue wait over the jobs whose first run started in the window.
struct OpsWait {
  std::int64_t started = 0;        // jobs whose first start is in the window
  std::int64_t total_wait_ms = 0;  // sum of (first start - submit)
  std::int64_t p95_wait_ms = 0;    // nearest rank: the ceil(0.95 n)-th smallest
  std::int64_t max_wait_ms = 0;
  std::int64_t waiting = 0;         // submitted before `to`, not started by `to`, not ended
  std::int64_t oldest_wait_ms = 0;  // to - the oldest such job's submit
  std::int64_t oldest_job_id = 0;   // 0 when none waits
};

// Measured figures of a set of runs.
struct OpsMeasured {
  std::int64_t runs_sampled = 0;
  std::int64_t sampled_mgpu_ms = 0;  // allocated mGPU-ms of the sampled runs
  std::int64_t used_mgpu_ms = 0;     // sum of allocated x utilization (floor per run)
  std::int64_t samples = 0;
  std::int64_t util_sum = 0;  // percent, summed over samples
  std::uint64_t memory_used_sum = 0;
  std::uint64_t memory_capacity_sum = 0;  // samples x the GPU's memory
};

// One tenant's figures, or the overall ones (tenant "").
struct OpsFigures {
  std::string tenant;
  // Jobs submitted in the window, and jobs that ended Failed in it (their
  // last attempt failed; a job retried to success is not one).
  std::int64_t jobs_submitted = 0;
  std::int64_t jobs_failed = 0;
  std::int64_t allocated_mgpu_ms = 0;
  std::int64_t cost_micros = 0;
  std::int64_t records = 0;
  std::optional<OpsMeasured> measured;  // nullopt: not measured
  OpsWait wait;
  std::int64_t runs_finished = 0;
  std::map<std::string, std::int64_t> outcomes;  // succeeded, failed, cancelled, ...
  std::int64_t runs_failed = 0;
  std::map<std::string, std::int64_t> failures_by_class;  // model::FailureClassName
  std::map<std::string, std::int64_t> evictions;          // preempted, reclaimed, moved
  std::int64_t lost_mgpu_ms = 0;
  // lost_mgpu_ms by eviction kind (preempted, reclaimed, moved): what
  // reclaims of the tenant's borrowed GPUs wasted, apart from the rest.
  std::map<std::string, std::int64_t> lost_mgpu_ms_by_kind;
  std::int64_t interventions = 0;  // those naming this tenant (overall: all shown)
};

// One inference service's replicas (jobs whose spec names the service):
// their GPU-hours, cost, measured use and resident memory, how long new
// replicas waited for GPUs, their runs' outcomes and evictions.
struct OpsServiceFigures {
  std::string tenant;
  std::string service;
  OpsFigures figures;
  std::optional<OpsTraffic> traffic;  // nullopt: no request logged in its hours
};

struct OpsEviction {
  TimeMs time_ms = 0;  // the run's end
  std::string run_id;
  std::int64_t job_id = 0;
  std::string job_name;
  std::string tenant;
  std::string kind;  // preempted, reclaimed, moved
  std::int64_t mgpu = 0;
  TimeMs lost_from_ms = 0;  // the last checkpoint, else the start (never before `from`)
  bool from_checkpoint = false;
  std::int64_t lost_mgpu_ms = 0;
};

struct OpsIntervention {
  TimeMs time_ms = 0;
  std::string actor;
  std::string action;  // the audit action: node.cordon, policy.apply, ...
  std::string object;
  std::string tenant;
};

struct OpsReport {
  TimeMs from = 0;
  TimeMs to = 0;
  std::string currency;
  bool fleet_visible = true;
  std::int64_t gpus = 0;
  std::int64_t capacity_mgpu_ms = 0;
  std::optional<store::UtilSummary> fleet;  // measured, fleet-visible only
  // Alerts raised in the window; nullopt when not fleet-visible or unknown.
  std::optional<std::int64_t> alerts_opened;
  bool measured = false;
  OpsFigures total;
  std::vector<OpsFigures> tenants;  // by name
  // The inference section: every service replica's figures summed (also
  // counted in total and its tenant's), and per service by tenant/name.
  OpsFigures inference;
  std::vector<OpsServiceFigures> services;
  std::vector<OpsEviction> evictions;  // oldest first
  std::map<std::string, std::int64_t> interventions_by_action;
  std::vector<OpsIntervention> interventions;  // oldest first
};

// Errors: an empty window (to <= from), a record outside it.
[[nodiscard]] Result<OpsReport> BuildOpsReport(const OpsInputs& in);

// Whether a succeeded audit entry is a manual intervention. A job.cancel is
// one only when the actor is not the job's submitter (`submitter` of the
// job, "" when unknown).
bool IsIntervention(const store::AuditEntry& e, const std::string& submitter);

// The report as the API's JSON (GET /v1/reports/ops): exact integers plus
// convenience figures (GPU-hours, percentages) for people.
nlohmann::json OpsReportJson(const OpsReport& report);

}  // namespace berth::server
