// What berth-sim prints: completion time and queueing delay (mean, p50, p95,
// p99) overall, per tenant and per job-size class, makespan, evictions and
// the GPU-hours they threw away, node failures and what they threw away,
// allocation and idle-while-waiting GPUs, and finish-time fairness per tenant.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/engine.h"

namespace berth::sim {

struct Distribution {
  std::int64_t count = 0;
  double mean_s = 0;
  double p50_s = 0;
  double p95_s = 0;
  double p99_s = 0;
};

struct Group {
  std::int64_t jobs = 0;
  std::int64_t finished = 0;
  Distribution jct;   // end - submit, finished jobs
  Distribution wait;  // first start - submit, started jobs
};

// Finish-time fairness (Themis, Mahajan et al., NSDI'20): for each finished
// job, rho = its completion time in the shared cluster (end - submit) over
// its completion time on an isolated 1/N share of the cluster, N the number
// of tenants with jobs. The isolated time is the job's trace duration,
// stretched by gang_gpus / (cluster GPUs / N) when the gang is larger than
// the share (Themis' linear-scaling assumption), plus the wait for the
// first scheduling cycle at or after its submit (the isolated cluster runs
// on the same cycle grid); no queueing behind the tenant's own jobs, no
// evictions, no restart overhead. rho <= 1: the job did at least as well
// as on its own slice of the cluster.
struct Fairness {
  std::int64_t jobs = 0;  // finished jobs counted
  double mean_rho = 0;
  double max_rho = 0;
  double share_over_1 = 0;  // fraction of those jobs with rho > 1
};

struct Summary {
  std::string scheduler;
  std::int64_t cluster_gpus = 0;
  Group all;
  std::map<std::string, Group> by_tenant;
  std::map<std::string, Group> by_size;  // "1", "2-4", "8", "9-32", "33+" GPUs
  double makespan_s = 0;                 // first submit to last end
  std::int64_t never_started = 0;
  std::int64_t evictions = 0;
  std::int64_t moves = 0;  // of the evictions, moves by consolidation (--movable)
  double lost_gpu_hours = 0;
  // Starts after waiting out a reclaim grace, and the longest such wait
  // from the first cycle the job needed the reclaim (JobOutcome).
  std::int64_t reclaim_waits = 0;
  double max_reclaim_wait_s = 0;
  std::int64_t reclaim_waits_held_otherwise = 0;
  double max_reclaim_wait_held_otherwise_s = 0;
  // The same per tenant (tenants with at least one reclaim wait): does each
  // tenant's guarantee come within the grace?
  struct ReclaimWaits {
    std::int64_t waits = 0;
    double max_s = 0;
    std::int64_t held_otherwise = 0;
    double max_held_otherwise_s = 0;
  };
  std::map<std::string, ReclaimWaits> reclaim_by_tenant;
  // ETA accuracy: jobs given a known estimated start while waiting
  // (JobOutcome::first_eta_ms), and the share of them whose first start
  // came within 25% of the wait that first estimate promised (|start - eta|
  // <= 0.25 x (eta - when given), plus one cycle for the grid); a job
  // never started misses. Apart: those whose first estimate stood on a
  // predicted run time.
  std::int64_t etas = 0;
  double eta_within_25 = 0;
  // Jobs left waiting by at least one plan before their first start: the
  // share of them given an estimate is the estimates' coverage.
  std::int64_t waited = 0;
  double eta_coverage = 0;  // etas / waited
  std::int64_t etas_predicted = 0;
  double eta_predicted_within_25 = 0;
  std::int64_t node_failures = 0;  // node outages that took effect
  std::int64_t failures = 0;       // job runs stopped by a node failure
  double lost_gpu_hours_to_failures = 0;
  Fairness fairness;  // all finished jobs
  std::map<std::string, Fairness> fairness_by_tenant;
  double mean_allocation = 0;  // allocated / cluster GPUs, averaged over time
  // Mean free GPUs while some job waited (time-weighted): capacity the
  // waiting jobs could not use (fragmentation, gang or quota limits).
  double mean_idle_gpus_while_waiting = 0;
  std::int64_t cycles = 0;
  double scheduler_ms_per_cycle = 0;
  // With --eta-forecast: forecasts run, scheduler runs per forecast, and
  // wall time per forecast (ms).
  std::int64_t forecasts = 0;
  double forecast_cycles_mean = 0;
  double forecast_ms_mean = 0;
  // With --verify-hints (SimResult's hint counts): of the waiting decisions,
  // the share with a hint shown; of the hints the core found, the share the
  // check on the same snapshot bore out; of the shown hints whose job still
  // waited at the next cycle, the share that cycle placed with the change.
  bool hints_checked = false;
  std::int64_t waiting_decisions = 0;
  std::int64_t capacity_decisions = 0;
  double hinted_capacity_share = 0;  // of the decisions waiting for capacity
  std::int64_t hints_found = 0;
  std::int64_t hints_verified = 0;
  std::int64_t hints_next_checked = 0;
  double hinted_share = 0;
  double hints_verified_share = 0;
  double hints_next_held_share = 0;
};

Summary Summarize(const std::string& scheduler, const SimResult& result);
// The isolated completion time in seconds of a job of `gpus` GPUs that runs
// `duration_ms`, on 1/`tenants` of `cluster_gpus` (see Fairness).
double IsolatedSeconds(TimeMs duration_ms, std::int64_t gpus, std::int64_t cluster_gpus,
                       std::size_t tenants);
nlohmann::json ToJson(const Summary& s);
// One table comparing summaries side by side (overall), then per tenant.
std::string RenderTable(const std::vector<Summary>& summaries);

}  // namespace berth::sim
