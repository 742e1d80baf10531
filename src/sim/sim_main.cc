// berth-sim: replays a workload trace through Berth's scheduling core (and
// baselines) on a virtual clock and prints what each tenant would see.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/units.h"
#include "model/policy.h"
#include "sched/core_scheduler.h"
#include "sched/fifo_scheduler.h"
#include "sim/baselines.h"
#include "sim/engine.h"
#include "sim/fill.h"
#include "sim/history.h"
#include "sim/plot.h"
#include "sim/report.h"
#include "sim/service_replay.h"
#include "sim/trace.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "berth-sim: " << message << "\n";
  return 2;
}

// Tenants t00.. each guaranteed an equal share of the cluster, free to
// borrow the rest: Berth's default way of sharing among equals.
std::string EqualSharePolicy(std::uint32_t tenants, std::int64_t gpus, const std::string& queue) {
  std::string yaml = "queues:\n";
  for (std::uint32_t t = 0; t < tenants; ++t) {
    yaml += fmt::format(
        "  - name: {}\n    quota: {{gpus: {{guaranteed: {}}}}}\n    children: [{{name: "
        "{}}}]\n",
        berth::sim::TenantName(t, tenants), gpus / tenants, queue);
  }
  return yaml;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// Every flag, as given.
struct SimFlags {
  std::string itp;
  std::size_t limit = 0;
  std::uint32_t tenants = 1;
  std::int64_t gpus = 64;
  std::uint32_t per_node = 8;
  std::vector<std::string> schedulers{"fifo", "berth"};
  std::string policy_file;
  std::string cycle = "10s";
  std::string restart = "60s";
  std::string checkpoint = "0s";
  std::string reclaim_grace;         // "": the policy's
  std::string short_first_max_wait;  // "": the policy's
  bool no_predict = false;
  bool verify_hints = false;
  bool movable = false;
  std::string json_out;
  double runtime_factor = 0;
  std::string openb_pods;
  std::string openb_nodes;
  std::string dlrm;
  std::size_t dlrm_gpu_nodes = 470;
  std::size_t dlrm_cpu_nodes = 2250;
  bool fill = false;
  std::size_t fgd_exact_nodes = berth::sched::Cluster::kFgdExactNodes;
  std::string failures_file;
  double mtbf_hours = 0;
  double mttr_minutes = 60;
  std::uint64_t seed = 1;
  std::string timeseries_prefix;
  std::string jobs_prefix;
  bool oracle_running_ends = false;
  bool eta_forecast = false;
  std::string forecast_runs = "mean";
  std::string forecast_arrivals = "0s";
  std::size_t forecast_cycles = berth::sched::ForecastOptions{}.max_cycles;
  std::string plot_file;
  std::string history_file;
  std::vector<std::string> las = {"1h", "10h"};
  // --services: an inference service on an LLM request trace.
  std::string services;
  double service_rate_scale = 1;
  std::string service_spec;
  std::string service_span = "0s";
  std::vector<std::string> service_policies{"static-peak", "static-mean", "berth", "knative-like",
                                            "hpa-like"};
  std::string cold_start = "20s";
  std::int64_t prefill_us = berth::sim::ReplicaModel{}.prefill_us_per_token;
  std::int64_t decode_us = berth::sim::ReplicaModel{}.decode_us_per_token;
  std::uint32_t slowdown_pct = berth::sim::ReplicaModel{}.slowdown_pct;
  std::uint32_t max_concurrency = berth::sim::ReplicaModel{}.max_concurrency;
};

// --services and its flags (docs/services.md).
void AddServiceFlags(CLI::App& app, SimFlags& f) {
  auto* services = app.add_option(
      "--services", f.services,
      "Replay an inference service on an LLM request trace (AzureLLMInferenceTrace_code.csv): "
      "static provisioning against the autoscaler");
  app.add_option("--service-rate-scale", f.service_rate_scale,
                 "Requests at this many times the trace's rate (its shape over time kept)")
      ->capture_default_str()
      ->needs(services);
  app.add_option("--service-spec", f.service_spec,
                 "Service spec YAML (replicas, SLO, autoscaling); default: a code-completion "
                 "service (docs/services.md)")
      ->needs(services);
  app.add_option("--service-span", f.service_span,
                 "Replay only the trace's first span, e.g. 10m (0s: all)")
      ->capture_default_str()
      ->needs(services);
  app.add_option("--service-policies", f.service_policies,
                 "Comma-separated: static-peak, static-mean, berth, knative-like, hpa-like")
      ->delimiter(',')
      ->capture_default_str()
      ->needs(services);
  app.add_option("--cold-start", f.cold_start, "A new replica serves after this long")
      ->capture_default_str()
      ->needs(services);
  app.add_option("--prefill-us-per-token", f.prefill_us, "Prefill time per context token (µs)")
      ->capture_default_str()
      ->needs(services);
  app.add_option("--decode-us-per-token", f.decode_us, "Decode time per generated token (µs)")
      ->capture_default_str()
      ->needs(services);
  app.add_option("--batch-slowdown-pct", f.slowdown_pct,
                 "Each other request in flight on a replica slows a request by this much")
      ->capture_default_str()
      ->needs(services);
  app.add_option("--max-concurrency", f.max_concurrency,
                 "Requests one replica serves at once; the rest wait at the gateway")
      ->capture_default_str()
      ->needs(services);
}

// berth-sim --services: the replay of an LLM trace under each policy.
int RunServices(const SimFlags& f) {
  if (!f.itp.empty() || !f.openb_pods.empty() || !f.dlrm.empty() || !f.history_file.empty()) {
    return Fail("--services replays an inference service alone; give no job trace with it");
  }
  std::string spec_text(berth::sim::kReplayServiceSpec);
  if (!f.service_spec.empty()) {
    std::ifstream in(f.service_spec);
    if (!in) return Fail("cannot read --service-spec " + f.service_spec);
    std::stringstream ss;
    ss << in.rdbuf();
    spec_text = ss.str();
  }
  auto spec = berth::model::ParseServiceSpec(spec_text);
  if (!spec) return Fail("service spec: " + spec.error().field + ": " + spec.error().message);
  auto cold = berth::ParseDurationMs(f.cold_start);
  auto span = f.service_span == "0" ? berth::Result<std::int64_t>(0)
                                    : berth::ParseDurationMs(f.service_span);
  if (!cold || !span) return Fail("--cold-start and --service-span take durations such as 20s");
  if (!(f.service_rate_scale > 0) || f.service_rate_scale > 1000) {
    return Fail("--service-rate-scale must be above 0 and at most 1000");
  }
  if (f.max_concurrency == 0 || f.prefill_us < 0 || f.decode_us < 0 || f.slowdown_pct > 1000) {
    return Fail(
        "--max-concurrency must be at least 1, per-token times at least 0, and "
        "--batch-slowdown-pct at most 1000");
  }
  if (spec->slo.latency_p95_ms == 0) {
    return Fail("the service spec needs slo.latency_p95_ms: the replay reports against it");
  }
  auto trace = berth::sim::ReadAzureLlmFile(f.services, *span);
  if (!trace) return Fail(trace.error().message);
  const auto requests = berth::sim::ScaleRate(*trace, f.service_rate_scale, f.seed);
  berth::sim::ReplicaModel model;
  model.prefill_us_per_token = f.prefill_us;
  model.decode_us_per_token = f.decode_us;
  model.slowdown_pct = f.slowdown_pct;
  model.max_concurrency = f.max_concurrency;
  model.cold_start_ms = *cold;
  const auto sizes = berth::sim::SizeStatic(requests, model);
  std::vector<berth::sim::ServiceReplayResult> results;
  for (const auto& name : f.service_policies) {
    berth::sim::ServicePolicy policy;
    if (name == "static-peak") {
      policy = berth::sim::StaticPolicy(name, sizes.peak);
    } else if (name == "static-mean") {
      policy = berth::sim::StaticPolicy(name, sizes.mean);
    } else if (name == "berth") {
      policy = berth::sim::BerthPolicy(*spec);
    } else if (name == "knative-like") {
      policy = berth::sim::KnativeLikePolicy(*spec);
    } else if (name == "hpa-like") {
      policy = berth::sim::HpaLikePolicy(*spec);
    } else {
      return Fail("--service-policies: unknown policy '" + name +
                  "'; use static-peak, static-mean, berth, knative-like or hpa-like");
    }
    auto r = berth::sim::ReplayService(requests, model, policy, spec->slo.latency_p95_ms);
    if (!r) return Fail(name + ": " + r.error().message);
    results.push_back(std::move(*r));
  }
  const double span_s =
      requests.empty() ? 0 : static_cast<double>(requests.back().arrival_us) / 1e6;
  std::cout << fmt::format(
      "{} requests from {} ({} in the trace{}) at --service-rate-scale {} (seed {}): {:.1f} "
      "requests/s over {:.0f} s\n",
      requests.size(), std::filesystem::path(f.services).filename().string(), trace->size(),
      *span > 0 ? ", first " + berth::FormatDurationMs(*span) : "", f.service_rate_scale, f.seed,
      span_s > 0 ? static_cast<double>(requests.size()) / span_s : 0.0, span_s);
  std::cout << fmt::format(
      "replica: prefill {} us/token, decode {} us/token, +{}% per other request in flight, at "
      "most {} in flight, cold start {}\n",
      model.prefill_us_per_token, model.decode_us_per_token, model.slowdown_pct,
      model.max_concurrency, berth::FormatDurationMs(model.cold_start_ms));
  const auto& a = spec->autoscaling;
  std::cout << fmt::format(
      "service {}: replicas {}-{}, {} target {} at {}%, SLO: time to first token <= {} ms; "
      "static sizes for the busiest 10 s {} and for the mean {}\n\n",
      spec->name, spec->replicas.min, spec->replicas.max,
      berth::model::AutoscaleSignalName(a.signal), berth::model::FormatMilli(a.target_milli),
      a.target_utilization_pct, spec->slo.latency_p95_ms, sizes.peak, sizes.mean);
  std::cout << berth::sim::RenderServiceTable(results);
  if (!f.json_out.empty()) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : results) {
      all.push_back({{"policy", r.policy},
                     {"replicas", r.replicas},
                     {"requests", r.requests},
                     {"replica_hours", r.replica_hours},
                     {"max_replicas", r.max_replicas},
                     {"slo_ms", r.slo_ms},
                     {"slo_attainment", r.SloAttainment()},
                     {"ttft_p50_ms", r.ttft_p50_ms},
                     {"ttft_p95_ms", r.ttft_p95_ms},
                     {"ttft_p99_ms", r.ttft_p99_ms},
                     {"e2e_p99_ms", r.e2e_p99_ms},
                     {"cold_starts", r.cold_starts},
                     {"held_requests", r.held},
                     {"held_wait_s", r.held_wait_s},
                     {"held_wait_max_s", r.held_wait_max_s},
                     {"decisions", r.decisions}});
    }
    if (!WriteFile(f.json_out, all.dump(2) + "\n"))
      return Fail("cannot write --json " + f.json_out);
  }
  return 0;
}

void AddFlags(CLI::App& app, SimFlags& f) {
  auto* itp_opt = app.add_option(
      "--itp", f.itp, "Microsoft ITP trace CSV (job_id,submission_time,duration,num_gpu)");
  auto* pods_opt =
      app.add_option("--openb-pods", f.openb_pods,
                     "Alibaba OpenB pod list CSV (with --openb-nodes for the cluster)");
  auto* nodes_opt = app.add_option("--openb-nodes", f.openb_nodes, "Alibaba OpenB node list CSV");
  auto* dlrm_opt = app.add_option("--dlrm", f.dlrm,
                                  "Alibaba DLRM serving trace CSV (disaggregated_DLRM_trace.csv)");
  pods_opt->needs(nodes_opt)->excludes(itp_opt);
  nodes_opt->needs(pods_opt);
  app.add_option("--history", f.history_file,
                 "Berth's own job history (berth history export): its jobs, nodes and policy")
      ->excludes(itp_opt)
      ->excludes(pods_opt)
      ->excludes(dlrm_opt);
  dlrm_opt->excludes(itp_opt)->excludes(pods_opt);
  app.add_option("--dlrm-gpu-nodes", f.dlrm_gpu_nodes,
                 "DLRM cluster: 8-GPU nodes (128 CPUs, 1 TiB)")
      ->capture_default_str();
  app.add_option("--dlrm-cpu-nodes", f.dlrm_cpu_nodes, "DLRM cluster: CPU nodes (192 CPUs, 1 TiB)")
      ->capture_default_str();
  app.add_flag("--fill", f.fill,
               "OpenB fill mode (FGD): pods in trace order, no departures; unallocated and "
               "fragmented GPUs as the arrived demand reaches 50..100% of the cluster")
      ->needs(pods_opt);
  app.add_option("--fgd-exact-nodes", f.fgd_exact_nodes,
                 "berth, las: up to this many nodes FGD scores every node a replica fits, above "
                 "it a bounded candidate set (0: always bounded; docs/scheduling.md)")
      ->capture_default_str();
  app.add_option("--node-failures", f.failures_file, "Node failures CSV: time_s,node,down_s");
  app.add_option("--mtbf-hours", f.mtbf_hours,
                 "Random node failures: mean hours between failures per node (0: none)")
      ->capture_default_str();
  app.add_option("--mttr-minutes", f.mttr_minutes, "Random node failures: mean minutes to repair")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "Seed of the random node failures")->capture_default_str();
  app.add_option("--timeseries-csv", f.timeseries_prefix,
                 "Write PREFIX-<scheduler>.csv: allocation and queue at every cycle");
  app.add_option("--jobs-csv", f.jobs_prefix,
                 "Write PREFIX-<scheduler>.csv: each job's times and its first estimated start");
  app.add_flag("--eta-oracle-running", f.oracle_running_ends,
               "berth, diagnostic: estimates see running jobs' true ends (decisions unchanged)");
  app.add_flag("--eta-forecast", f.eta_forecast,
               "berth: first estimated starts from a forecast (the scheduler run forward)");
  app.add_option("--forecast-runs", f.forecast_runs,
                 "With --eta-forecast: how long runs last: predicted (the estimate's median or "
                 "quartile), mean (their key's mean), mean-of-placed (the mean for jobs the "
                 "forecast places, the prediction for running ones)")
      ->check(CLI::IsMember({"predicted", "mean", "mean-of-placed"}))
      ->capture_default_str();
  app.add_option("--forecast-arrivals", f.forecast_arrivals,
                 "With --eta-forecast: the past window whose arrivals the forecast sees coming "
                 "again (e.g. 1d); 0s: none")
      ->capture_default_str();
  app.add_option("--forecast-cycles", f.forecast_cycles,
                 "With --eta-forecast: scheduler runs per forecast at most")
      ->capture_default_str();
  app.add_option("--plot", f.plot_file, "Write an SVG of allocation and queue length over time");
  app.add_option("--limit", f.limit, "Replay only the first N jobs (0: all)");
  app.add_option("--tenants", f.tenants, "Spread the trace's jobs over N tenants (by job id hash)")
      ->capture_default_str();
  app.add_option("--gpus", f.gpus, "Cluster size in GPUs (whole nodes)")->capture_default_str();
  app.add_option("--gpus-per-node", f.per_node, "GPUs per node")->capture_default_str();
  app.add_option("--schedulers", f.schedulers,
                 "Comma-separated: fifo, berth, sjf-oracle, las (Tiresias-style), first-fit, "
                 "best-fit, spread (placement baselines)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--policy", f.policy_file,
                 "Policy YAML for berth (default: equal guaranteed shares per tenant)");
  app.add_option("--reclaim-grace", f.reclaim_grace,
                 "Overrides the policy's reclaim_grace for berth (a duration such as 30m)");
  app.add_option("--short-first-max-wait", f.short_first_max_wait,
                 "Overrides the policy's short_first_max_wait for berth (0s: submit order)");
  app.add_flag("--no-predict", f.no_predict,
               "berth without run-time predictions (as before issue 22 item 1)");
  app.add_flag("--verify-hints", f.verify_hints,
               "berth: check every \"would run now if\" hint by a second cycle with the change, "
               "and again at the next cycle; prints the shares (slower: two cycles per hint)");
  app.add_option("--cycle", f.cycle, "Scheduling cycle on the virtual clock")
      ->capture_default_str();
  app.add_option("--restart-overhead", f.restart, "Added to an evicted job's next run")
      ->capture_default_str();
  app.add_option("--checkpoint-interval", f.checkpoint,
                 "Running jobs checkpoint this often (0s: never)")
      ->capture_default_str();
  app.add_flag("--movable", f.movable,
               "Jobs that checkpoint (--checkpoint-interval) may be moved to make room for a gang "
               "(consolidation)");
  app.add_option("--las-thresholds", f.las,
                 "GPU-time thresholds of the las levels (GPU-hours as durations: 1h = 1 GPU-hour)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--max-runtime-factor", f.runtime_factor,
                 "Jobs declare a max runtime of F x their trace duration (F >= 1; 0: none, as in "
                 "the traces). Backfill and estimated starts need it")
      ->capture_default_str();
  app.add_option("--json", f.json_out, "Also write the summaries as JSON to this file");
  AddServiceFlags(app, f);
}

// The simulation's clock, restarts, checkpoints and node failures.
berth::Result<berth::sim::SimOptions> CheckOptions(const SimFlags& f) {
  auto fail = [](std::string message) {
    return berth::Result<berth::sim::SimOptions>(
        std::unexpected(berth::Error{berth::Code::kInvalidArgument, std::move(message), {}}));
  };
  berth::sim::SimOptions options;
  auto c = berth::ParseDurationMs(f.cycle);
  auto r = berth::ParseDurationMs(f.restart);
  auto k = berth::ParseDurationMs(f.checkpoint);
  if (!c || *c <= 0) return fail("--cycle takes a positive duration such as 10s");
  if (!r || !k)
    return fail("--restart-overhead and --checkpoint-interval take durations such as 60s");
  options.cycle_ms = *c;
  options.restart_overhead_ms = *r;
  options.checkpoint_interval_ms = *k;
  if (f.movable && *k <= 0)
    return fail("--movable needs --checkpoint-interval: only jobs that checkpoint move");
  options.movable = f.movable;
  if (!f.failures_file.empty()) {
    auto failures = berth::sim::ReadNodeFailuresFile(f.failures_file);
    if (!failures) return std::unexpected(failures.error());
    options.node_failures = std::move(*failures);
  }
  if (f.mtbf_hours < 0 || f.mttr_minutes <= 0)
    return fail("--mtbf-hours must be >= 0 and --mttr-minutes > 0");
  options.random_failures.mtbf_ms = static_cast<berth::TimeMs>(f.mtbf_hours * 3.6e6);
  options.random_failures.mttr_ms = static_cast<berth::TimeMs>(f.mttr_minutes * 6e4);
  options.random_failures.seed = f.seed;
  return options;
}

// What is replayed: the trace's jobs on its cluster.
struct Workload {
  std::vector<berth::sim::SimJob> jobs;
  std::vector<berth::sched::NodeView> nodes;
  std::int64_t gpus = 0;
  std::string trace;           // the file it came from
  std::string history_policy;  // the policy active at a history export
};

berth::Result<Workload> LoadWorkload(const SimFlags& f) {
  Workload w;
  w.gpus = f.gpus;
  w.trace = f.itp;
  berth::Result<std::vector<berth::sim::SimJob>> jobs = std::vector<berth::sim::SimJob>{};
  auto count_gpus = [&w] {
    w.gpus = 0;
    for (const auto& node : w.nodes) w.gpus += static_cast<std::int64_t>(node.gpus.size());
  };
  if (!f.itp.empty()) {
    jobs = berth::sim::ReadItpFile(f.itp, {f.tenants, f.per_node, f.limit});
    w.nodes = berth::sim::UniformNodes(static_cast<std::size_t>(f.gpus / f.per_node), f.per_node,
                                       "H100-80GB");
  } else if (!f.history_file.empty()) {
    auto h = berth::sim::ReadHistoryFile(f.history_file);
    if (!h) return std::unexpected(h.error());
    jobs = std::move(h->jobs);
    w.nodes = std::move(h->nodes);
    w.history_policy = h->policy_yaml;
    count_gpus();
    w.trace = f.history_file;
  } else if (!f.dlrm.empty()) {
    jobs = berth::sim::ReadDlrmFile(f.dlrm, {f.tenants, f.limit});
    w.nodes = berth::sim::DlrmNodes(f.dlrm_gpu_nodes, f.dlrm_cpu_nodes);
    w.gpus = static_cast<std::int64_t>(f.dlrm_gpu_nodes) * 8;
    w.trace = f.dlrm;
  } else {
    jobs = berth::sim::ReadOpenbPodsFile(f.openb_pods, {f.tenants, f.limit});
    auto n = berth::sim::ReadOpenbNodesFile(f.openb_nodes);
    if (!n) return std::unexpected(n.error());
    w.nodes = std::move(*n);
    count_gpus();
    w.trace = f.openb_pods;
  }
  if (!jobs) return std::unexpected(jobs.error());
  w.jobs = std::move(*jobs);
  return w;
}

// --policy, else the history's own, else equal shares per tenant.
berth::Result<berth::model::Policy> LoadPolicy(const SimFlags& f, const Workload& w) {
  std::string policy_text =
      EqualSharePolicy(f.tenants, w.gpus, f.dlrm.empty() ? "training" : "serving");
  if (!f.policy_file.empty()) {
    std::ifstream in(f.policy_file);
    if (!in) {
      return std::unexpected(
          berth::Error{berth::Code::kInvalidArgument, "cannot read --policy " + f.policy_file, {}});
    }
    std::stringstream ss;
    ss << in.rdbuf();
    policy_text = ss.str();
  } else if (!w.history_policy.empty()) {
    policy_text = w.history_policy;
  }
  auto policy = f.tenants <= 1 && f.policy_file.empty() && w.history_policy.empty()
                    ? berth::Result<berth::model::Policy>(berth::model::DefaultPolicy())
                    : berth::model::ParsePolicy(policy_text);
  if (!policy) {
    return std::unexpected(
        berth::Error{berth::Code::kInvalidArgument,
                     "policy: " + policy.error().field + ": " + policy.error().message,
                     {}});
  }
  if (!f.reclaim_grace.empty()) {
    auto grace = berth::ParseDurationMs(f.reclaim_grace, berth::model::kMaxReclaimGraceMs);
    if (!grace) {
      return std::unexpected(berth::Error{
          berth::Code::kInvalidArgument, "--reclaim-grace: " + grace.error().message, {}});
    }
    policy->reclaim_grace_ms = *grace;
  }
  if (!f.short_first_max_wait.empty()) {
    auto wait = berth::ParseDurationMs(f.short_first_max_wait);
    if (!wait) {
      return std::unexpected(berth::Error{
          berth::Code::kInvalidArgument, "--short-first-max-wait: " + wait.error().message, {}});
    }
    policy->short_first_max_wait_ms = *wait;
  }
  return policy;
}

// The schedulers a run compares, built once; Pick names the one to use and
// how the snapshot is adjusted for it (a baseline's single queue, an
// oracle's order).
struct Schedulers {
  explicit Schedulers(const berth::sched::CoreOptions& options) : core(options) {}
  berth::sched::FifoScheduler fifo;
  berth::sched::CoreScheduler core;
  berth::sim::PlacementBaseline first_fit{berth::sim::PlacementRule::kFirstFit};
  berth::sim::PlacementBaseline best_fit{berth::sim::PlacementRule::kBestFit};
  berth::sim::PlacementBaseline spread{berth::sim::PlacementRule::kSpread};

  berth::Result<std::pair<const berth::sched::Scheduler*, berth::sim::SnapshotAdjuster>> Pick(
      const std::string& name, const std::vector<std::int64_t>& las_ms, bool slices) const {
    auto fail = [](std::string message) {
      return std::unexpected(berth::Error{berth::Code::kInvalidArgument, std::move(message), {}});
    };
    if (slices && (name == "fifo" || name == "sjf-oracle")) {
      return fail("--schedulers: " + name +
                  " runs on the FIFO scheduler, which does not place GPU slices, and this trace "
                  "has them; use berth or las");
    }
    if (name == "fifo") return std::pair{&fifo, berth::sim::OneQueue()};
    if (name == "berth") return std::pair{&core, berth::sim::SnapshotAdjuster{}};
    if (name == "sjf-oracle") return std::pair{&fifo, berth::sim::ShortestJobFirstOracle()};
    if (name == "las") return std::pair{&core, berth::sim::LeastAttainedService(las_ms)};
    if (name == "first-fit") return std::pair{&first_fit, berth::sim::OneQueue()};
    if (name == "best-fit") return std::pair{&best_fit, berth::sim::OneQueue()};
    if (name == "spread") return std::pair{&spread, berth::sim::OneQueue()};
    return fail("--schedulers: unknown scheduler '" + name +
                "'; use fifo, berth, sjf-oracle, las, first-fit, best-fit or spread");
  }
};

// The summaries' table, the plot and the JSON.
int Report(const SimFlags& f, const Workload& w, const std::vector<berth::sim::Summary>& summaries,
           const std::vector<berth::sim::SimResult>& results) {
  std::cout << berth::sim::RenderTable(summaries);
  if (!f.plot_file.empty()) {
    std::vector<berth::sim::PlotSeries> series;
    for (std::size_t i = 0; i < results.size(); ++i) {
      series.push_back({summaries[i].scheduler, &results[i].samples});
    }
    const std::string title =
        fmt::format("{} on {} GPUs", std::filesystem::path(w.trace).filename().string(), w.gpus);
    if (!WriteFile(f.plot_file, berth::sim::RenderSvg(series, w.gpus, title)))
      return Fail("cannot write --plot " + f.plot_file);
  }
  if (!f.json_out.empty()) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& s : summaries) all.push_back(berth::sim::ToJson(s));
    std::ofstream out(f.json_out);
    out << all.dump(2) << "\n";
    if (!out) return Fail("cannot write --json " + f.json_out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "berth-sim: replay a cluster trace through Berth's scheduling core on a virtual clock.\n"
      "Prints completion time, queueing delay, allocation and evictions per scheduler\n"
      "(docs/evaluation.md)."};
  SimFlags f;
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  if (!f.services.empty()) return RunServices(f);
  if (f.itp.empty() && f.openb_pods.empty() && f.dlrm.empty() && f.history_file.empty()) {
    return Fail(
        "give a trace: --itp FILE, --openb-pods and --openb-nodes, --dlrm FILE, --history FILE, "
        "or --services FILE");
  }
  if (!f.itp.empty() && (f.gpus <= 0 || f.per_node == 0 || f.gpus % f.per_node != 0)) {
    return Fail("--gpus must be a positive multiple of --gpus-per-node");
  }
  auto options = CheckOptions(f);
  if (!options) return Fail(options.error().message);
  auto workload = LoadWorkload(f);
  if (!workload) return Fail(workload.error().message);
  Workload& w = *workload;
  if (f.runtime_factor != 0 && f.runtime_factor < 1) {
    return Fail(
        "--max-runtime-factor must be 0 (none) or at least 1: berthd stops a job at its "
        "max runtime, and trace jobs must be allowed to finish");
  }
  for (auto& j : w.jobs) {
    if (!f.history_file.empty() && f.runtime_factor == 0) break;  // keep the recorded limits
    j.max_runtime_ms =
        static_cast<berth::TimeMs>(static_cast<double>(j.duration_ms) * f.runtime_factor);
  }
  auto policy = LoadPolicy(f, w);
  if (!policy) return Fail(policy.error().message);

  std::vector<std::int64_t> las_ms;
  for (const auto& t : f.las) {
    auto v = berth::ParseDurationMs(t);
    if (!v || *v <= 0) return Fail("--las-thresholds takes GPU-time durations such as 1h,10h");
    las_ms.push_back(*v);
  }
  const bool slices = std::any_of(w.jobs.begin(), w.jobs.end(), [](const berth::sim::SimJob& j) {
    return berth::model::IsSlice(j.resources);
  });
  std::vector<berth::sim::Summary> summaries;
  std::vector<berth::sim::FillResult> fills;
  std::vector<berth::sim::SimResult> results;  // kept for the plot
  const Schedulers schedulers(berth::sched::CoreOptions{f.fgd_exact_nodes});
  for (const auto& name : f.schedulers) {
    auto picked = schedulers.Pick(name, las_ms, slices);
    if (!picked) return Fail(picked.error().message);
    const auto& [s, adjust] = *picked;
    if (f.fill) {
      if (name == "las" || name == "sjf-oracle")
        return Fail("--fill: " + name + " orders a queue; fill places one pod at a time");
      auto filled = berth::sim::Fill(w.nodes, w.jobs, *s, name);
      if (!filled) return Fail(name + ": " + filled.error().message);
      fills.push_back(std::move(*filled));
      continue;
    }
    auto forecast_arrivals_ms = berth::ParseDurationMs(f.forecast_arrivals);
    if (f.forecast_arrivals == "0") forecast_arrivals_ms = 0;
    if (!forecast_arrivals_ms || *forecast_arrivals_ms < 0)
      return Fail("--forecast-arrivals '" + f.forecast_arrivals + "': give a duration such as 1d");
    // Berth learns run times from the replay's finished jobs, as berthd
    // from its store; the baselines order by their own rules.
    berth::sim::SimOptions run_options = *options;
    run_options.predict_runtimes = name == "berth" && !f.no_predict;
    run_options.verify_hints = name == "berth" && f.verify_hints;
    run_options.oracle_running_ends = name == "berth" && f.oracle_running_ends;
    run_options.eta_forecast = name == "berth" && f.eta_forecast;
    run_options.forecast.max_cycles = f.forecast_cycles;
    using Runs = berth::sched::ForecastOptions::Runs;
    run_options.forecast.runs = f.forecast_runs == "predicted" ? Runs::kPredicted
                                : f.forecast_runs == "mean"    ? Runs::kMean
                                                               : Runs::kMeanOfPlaced;
    run_options.forecast_arrivals_window_ms = *forecast_arrivals_ms;
    auto result = berth::sim::Simulate(w.nodes, w.jobs, *policy, *s, run_options, adjust);
    if (!result) return Fail(name + ": " + result.error().message);
    summaries.push_back(berth::sim::Summarize(name, *result));
    if (!f.timeseries_prefix.empty()) {
      const std::string path = f.timeseries_prefix + "-" + name + ".csv";
      if (!WriteFile(path, berth::sim::TimeSeriesCsv(result->samples)))
        return Fail("cannot write " + path);
    }
    if (!f.jobs_prefix.empty()) {
      const std::string path = f.jobs_prefix + "-" + name + ".csv";
      if (!WriteFile(path, berth::sim::JobsCsv(result->jobs))) return Fail("cannot write " + path);
    }
    results.push_back(std::move(*result));
  }
  std::cout << fmt::format("{} jobs from {} on {} GPUs ({} nodes), {} tenant(s)\n\n", w.jobs.size(),
                           w.trace, w.gpus, w.nodes.size(), f.tenants);
  if (f.fill) {
    std::cout << berth::sim::RenderFillTable(fills);
    if (!f.json_out.empty()) {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& r : fills) all.push_back(berth::sim::ToJson(r));
      if (!WriteFile(f.json_out, all.dump(2) + "\n"))
        return Fail("cannot write --json " + f.json_out);
    }
    return 0;
  }
  return Report(f, w, summaries, results);
}
