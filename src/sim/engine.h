// berth-sim's engine: the unchanged scheduling core (or any sched::Scheduler)
// on a virtual clock. Jobs start the moment a plan places them, run for their
// trace duration, and end; evicted jobs lose the work since their last
// checkpoint, go back to the queue and pay a restart overhead when they run
// again. Nodes may fail and return (a schedule, or at random from a seed):
// a failed node's jobs are stopped the same way and its GPUs are unhealthy
// until it returns. Deterministic: the same inputs give the same result.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/policy.h"
#include "sched/forecast.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"
#include "sim/trace.h"

namespace berth::sim {

// Random failures: each node fails after an exponentially distributed up
// time of mean `mtbf_ms` and comes back after an exponentially distributed
// repair of mean `mttr_ms`, counted from the first submit. Each node draws
// from its own generator seeded by (seed, node position in name order), so
// the same seed gives the same failures whatever the scheduler does.
struct RandomFailures {
  TimeMs mtbf_ms = 0;  // 0: none
  TimeMs mttr_ms = 0;
  std::uint64_t seed = 1;
};

struct SimOptions {
  // The scheduler runs at most once per cycle, on a grid of this step, and
  // only when something arrived or ended since the last run.
  TimeMs cycle_ms = 10'000;
  // Extra run time each time an evicted job starts again.
  TimeMs restart_overhead_ms = 60'000;
  // A running job checkpoints every this long (0: never; an eviction then
  // loses everything since its start).
  TimeMs checkpoint_interval_ms = 0;
  // Jobs that checkpoint (checkpoint_interval_ms > 0) declare it, so the
  // core may move them to make room for a gang (policy `consolidation`).
  bool movable = false;
  // Stop after this much virtual time past the first submit (0: run dry).
  TimeMs horizon_ms = 0;
  // Node failures on a schedule (trace.h; any order; a node already down ignores a
  // second failure), and/or at random.
  std::vector<NodeFailure> node_failures{};
  RandomFailures random_failures{};
  // Run-time predictions (sched/runtime_estimate.h) on the snapshot's jobs,
  // learnt from the jobs finished so far in the replay (never a job's own
  // duration): what berthd's snapshot builder gives the core from its
  // store. Off for the baselines, which order by their own rules.
  bool predict_runtimes = false;
  sched::RuntimeHistoryOptions history{};
  // Checks the plans' "would run now if" hints as berthd does (each by one
  // more cycle with the change, sched/hints.h), with no budget, and again at
  // the next cycle the scheduler runs: the counterfactual in SimResult.
  // Costs two more cycles per hint.
  bool verify_hints = false;
  // Diagnostic: running jobs' predicted run times are replaced by their
  // true run lengths (an oracle no scheduler has), so that the estimated
  // starts' misses that remain are those of queue order and competition,
  // not of run-time prediction. Running jobs' predictions feed only the
  // estimates, so the decisions do not change.
  bool oracle_running_ends = false;
  // Estimated starts from the forecast (sched/forecast.h): whenever a plan
  // leaves a job waiting that has no estimate yet, the scheduler is run
  // forward from that snapshot and the job's first estimate is the start it
  // foresees (else the plan's own estimate, if any).
  bool eta_forecast = false;
  sched::ForecastOptions forecast{};
  // With eta_forecast: the forecast foresees the arrivals of the past
  // window again (each job submitted in (now - W, now] arrives again at
  // its time + W, with the run time predicted for it); 0: no arrivals.
  TimeMs forecast_arrivals_window_ms = 0;
};

struct JobOutcome {
  std::int64_t id = 0;
  std::string tenant;
  std::string queue;
  std::int64_t gpus = 0;  // whole gang, a slice rounded up to one
  TimeMs submit_ms = 0;
  TimeMs duration_ms = 0;
  std::optional<TimeMs> first_start_ms;
  std::vector<sched::ReplicaPlacement> first_placement;  // where it first ran
  std::optional<TimeMs> end_ms;                          // nullopt: never finished
  std::int64_t evictions = 0;
  std::int64_t moves = 0;        // of its evictions, those that moved it (consolidation)
  std::int64_t lost_gpu_ms = 0;  // GPU-time of work thrown away by evictions
  // Stopped because a node it ran on failed, and the GPU-time of work that
  // threw away (not counted in evictions / lost_gpu_ms).
  std::int64_t failures = 0;
  std::int64_t lost_gpu_ms_to_failures = 0;
  // Reclaim grace (policy reclaim_grace): starts that came after the job had
  // needed to reclaim lent GPUs, and the longest time from the first cycle
  // that said so (model::kReclaimSinceMs) to the start: bounded by the
  // grace plus one cycle. Apart: starts of jobs that, after first needing
  // the reclaim, were held back by something else in some cycle (their
  // queue's order or quota), whose wait the grace does not bound.
  std::int64_t reclaim_waits = 0;
  TimeMs max_reclaim_wait_ms = 0;
  std::int64_t reclaim_waits_held_otherwise = 0;
  TimeMs max_reclaim_wait_held_otherwise_ms = 0;
  // The first estimated start a plan gave it while it waited (a known
  // model::kEtaMs), when that plan was made, and whether the estimate
  // stood on a predicted run time (model::kEtaBasis). 0: none given.
  TimeMs first_eta_ms = 0;
  TimeMs first_eta_given_ms = 0;
  bool first_eta_predicted = false;
  // Left waiting by at least one plan (the share given an estimate is the
  // coverage), and of that first estimate: the running job whose end it
  // waited for last (model::kEtaAfterJob, 0: none) and the end it expected.
  bool waited = false;
  std::int64_t first_eta_after_job = 0;
  TimeMs first_eta_after_ms = 0;
};

// The cluster at one scheduling cycle.
struct Sample {
  TimeMs t_ms = 0;
  std::int64_t allocated_mgpu = 0;  // whole GPUs held count 1000, shared ones their slices
  std::int64_t pending_jobs = 0;
  std::int64_t pending_mgpu = 0;
  // Free healthy GPUs while jobs wait: capacity the waiting jobs could not use.
  std::int64_t idle_gpus_while_waiting = 0;
  std::int64_t down_gpus = 0;  // on failed nodes
};

struct SimResult {
  std::int64_t cluster_gpus = 0;
  // The cycle grid: cycles run at first_submit_ms + k * cycle_ms.
  TimeMs first_submit_ms = 0;
  TimeMs cycle_ms = 0;
  std::vector<JobOutcome> jobs;  // by id
  std::vector<Sample> samples;
  std::int64_t cycles = 0;
  std::int64_t node_failures = 0;  // failures that took effect
  double scheduler_ms = 0;         // wall time spent in Schedule(), for reference
  // With SimOptions::eta_forecast: forecasts run, the scheduler runs they
  // made, and their wall time.
  std::int64_t forecasts = 0;
  std::int64_t forecast_cycles = 0;
  double forecast_ms = 0;
  // Running jobs the scheduler took from its memo (sched/running_memo.h),
  // and resolved anew, over all cycles.
  std::uint64_t memo_hits = 0;
  std::uint64_t memo_misses = 0;
  // With SimOptions::verify_hints. Waiting decisions (one per job left
  // waiting per cycle), those whose reason held a hint the core found, and
  // what the check on the same snapshot made of them (verified hints are
  // shown, refuted ones dropped). Then each shown hint applied at the next
  // cycle the scheduler ran, to the job if it still waited: how often that
  // cycle placed it.
  std::int64_t waiting_decisions = 0;
  // Of them, those waiting for capacity (NoNodeFits, Fragmented): where a
  // change to the job could help, and hints are looked for.
  std::int64_t capacity_decisions = 0;
  std::int64_t hints_found = 0;
  std::int64_t hints_verified = 0;
  std::int64_t hints_refuted = 0;
  std::int64_t hints_next_checked = 0;
  std::int64_t hints_next_held = 0;
};

// What the simulator knows about a job that a real scheduler does not: its
// true remaining run time (an oracle), and the GPU time it has had so far.
struct JobProgress {
  TimeMs remaining_ms = 0;
  std::int64_t attained_gpu_ms = 0;
};
// Rewrites a snapshot before the scheduler sees it: how the research
// baselines (baselines.h) turn trace knowledge into order and priority.
using SnapshotAdjuster =
    std::function<void(sched::Snapshot&, const std::map<std::int64_t, JobProgress>&)>;

// Milli-GPUs a job's gang holds: whole GPUs, or the share of its slices (a
// slice by memory counts its share of an 80 GiB card).
std::int64_t GangMgpu(const SimJob& j);

Result<SimResult> Simulate(const std::vector<sched::NodeView>& nodes,
                           const std::vector<SimJob>& jobs, const model::Policy& policy,
                           const sched::Scheduler& scheduler, const SimOptions& options,
                           const SnapshotAdjuster& adjust = {});

// `count` nodes named PREFIX-0000.. with `gpus` GPUs of `model` each
// (80 GiB, one NVLink island, 128 CPUs, 1 TiB).
std::vector<sched::NodeView> UniformNodes(std::size_t count, std::uint32_t gpus,
                                          const std::string& model,
                                          const std::string& prefix = "node");

}  // namespace berth::sim
