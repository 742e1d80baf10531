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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "berth-sim: replay a cluster trace through Berth's scheduling core on a virtual clock.\n"
      "Prints completion time, queueing delay, allocation and evictions per scheduler\n"
      "(docs/evaluation.md)."};
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
  bool movable = false;
  std::string json_out;
  double runtime_factor = 0;
  std::string openb_pods;
  std::string openb_nodes;
  std::string dlrm;
  std::size_t dlrm_gpu_nodes = 470;
  std::size_t dlrm_cpu_nodes = 2250;
  bool fill = false;
  std::string failures_file;
  double mtbf_hours = 0;
  double mttr_minutes = 60;
  std::uint64_t seed = 1;
  std::string timeseries_prefix;
  std::string plot_file;
  auto* itp_opt = app.add_option(
      "--itp", itp, "Microsoft ITP trace CSV (job_id,submission_time,duration,num_gpu)");
  auto* pods_opt =
      app.add_option("--openb-pods", openb_pods,
                     "Alibaba OpenB pod list CSV (with --openb-nodes for the cluster)");
  auto* nodes_opt = app.add_option("--openb-nodes", openb_nodes, "Alibaba OpenB node list CSV");
  auto* dlrm_opt = app.add_option("--dlrm", dlrm,
                                  "Alibaba DLRM serving trace CSV (disaggregated_DLRM_trace.csv)");
  pods_opt->needs(nodes_opt)->excludes(itp_opt);
  nodes_opt->needs(pods_opt);
  std::string history_file;
  app.add_option("--history", history_file,
                 "Berth's own job history (berth history export): its jobs, nodes and policy")
      ->excludes(itp_opt)
      ->excludes(pods_opt)
      ->excludes(dlrm_opt);
  std::string history_policy;  // the policy active at the export
  dlrm_opt->excludes(itp_opt)->excludes(pods_opt);
  app.add_option("--dlrm-gpu-nodes", dlrm_gpu_nodes, "DLRM cluster: 8-GPU nodes (128 CPUs, 1 TiB)")
      ->capture_default_str();
  app.add_option("--dlrm-cpu-nodes", dlrm_cpu_nodes, "DLRM cluster: CPU nodes (192 CPUs, 1 TiB)")
      ->capture_default_str();
  app.add_flag("--fill", fill,
               "OpenB fill mode (FGD): pods in trace order, no departures; unallocated and "
               "fragmented GPUs as the arrived demand reaches 50..100% of the cluster")
      ->needs(pods_opt);
  app.add_option("--node-failures", failures_file, "Node failures CSV: time_s,node,down_s");
  app.add_option("--mtbf-hours", mtbf_hours,
                 "Random node failures: mean hours between failures per node (0: none)")
      ->capture_default_str();
  app.add_option("--mttr-minutes", mttr_minutes, "Random node failures: mean minutes to repair")
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed of the random node failures")->capture_default_str();
  app.add_option("--timeseries-csv", timeseries_prefix,
                 "Write PREFIX-<scheduler>.csv: allocation and queue at every cycle");
  app.add_option("--plot", plot_file, "Write an SVG of allocation and queue length over time");
  app.add_option("--limit", limit, "Replay only the first N jobs (0: all)");
  app.add_option("--tenants", tenants, "Spread the trace's jobs over N tenants (by job id hash)")
      ->capture_default_str();
  app.add_option("--gpus", gpus, "Cluster size in GPUs (whole nodes)")->capture_default_str();
  app.add_option("--gpus-per-node", per_node, "GPUs per node")->capture_default_str();
  std::vector<std::string> las = {"1h", "10h"};
  app.add_option("--schedulers", schedulers,
                 "Comma-separated: fifo, berth, sjf-oracle, las (Tiresias-style), first-fit, "
                 "best-fit, spread (placement baselines)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--policy", policy_file,
                 "Policy YAML for berth (default: equal guaranteed shares per tenant)");
  app.add_option("--cycle", cycle, "Scheduling cycle on the virtual clock")->capture_default_str();
  app.add_option("--restart-overhead", restart, "Added to an evicted job's next run")
      ->capture_default_str();
  app.add_option("--checkpoint-interval", checkpoint,
                 "Running jobs checkpoint this often (0s: never)")
      ->capture_default_str();
  app.add_flag("--movable", movable,
               "Jobs that checkpoint (--checkpoint-interval) may be moved to make room for a gang "
               "(consolidation)");
  app.add_option("--las-thresholds", las,
                 "GPU-time thresholds of the las levels (GPU-hours as durations: 1h = 1 GPU-hour)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--max-runtime-factor", runtime_factor,
                 "Jobs declare a max runtime of F x their trace duration (F >= 1; 0: none, as in "
                 "the traces). Backfill and estimated starts need it")
      ->capture_default_str();
  app.add_option("--json", json_out, "Also write the summaries as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  if (itp.empty() && openb_pods.empty() && dlrm.empty() && history_file.empty()) {
    return Fail(
        "give a trace: --itp FILE, --openb-pods and --openb-nodes, --dlrm FILE, or --history FILE");
  }

  if (!itp.empty() && (gpus <= 0 || per_node == 0 || gpus % per_node != 0)) {
    return Fail("--gpus must be a positive multiple of --gpus-per-node");
  }
  berth::sim::SimOptions options;
  auto c = berth::ParseDurationMs(cycle);
  auto r = berth::ParseDurationMs(restart);
  auto k = berth::ParseDurationMs(checkpoint);
  if (!c || *c <= 0) return Fail("--cycle takes a positive duration such as 10s");
  if (!r || !k)
    return Fail("--restart-overhead and --checkpoint-interval take durations such as 60s");
  options.cycle_ms = *c;
  options.restart_overhead_ms = *r;
  options.checkpoint_interval_ms = *k;
  if (movable && *k <= 0)
    return Fail("--movable needs --checkpoint-interval: only jobs that checkpoint move");
  options.movable = movable;
  if (!failures_file.empty()) {
    auto f = berth::sim::ReadNodeFailuresFile(failures_file);
    if (!f) return Fail(f.error().message);
    options.node_failures = std::move(*f);
  }
  if (mtbf_hours < 0 || mttr_minutes <= 0)
    return Fail("--mtbf-hours must be >= 0 and --mttr-minutes > 0");
  options.random_failures.mtbf_ms = static_cast<berth::TimeMs>(mtbf_hours * 3.6e6);
  options.random_failures.mttr_ms = static_cast<berth::TimeMs>(mttr_minutes * 6e4);
  options.random_failures.seed = seed;

  berth::Result<std::vector<berth::sim::SimJob>> jobs = std::vector<berth::sim::SimJob>{};
  std::vector<berth::sched::NodeView> nodes;
  std::string trace = itp;
  if (!itp.empty()) {
    jobs = berth::sim::ReadItpFile(itp, {tenants, per_node, limit});
    nodes =
        berth::sim::UniformNodes(static_cast<std::size_t>(gpus / per_node), per_node, "H100-80GB");
  } else if (!history_file.empty()) {
    auto h = berth::sim::ReadHistoryFile(history_file);
    if (!h) return Fail(h.error().message);
    jobs = std::move(h->jobs);
    nodes = std::move(h->nodes);
    history_policy = h->policy_yaml;
    gpus = 0;
    for (const auto& node : nodes) gpus += static_cast<std::int64_t>(node.gpus.size());
    trace = history_file;
  } else if (!dlrm.empty()) {
    jobs = berth::sim::ReadDlrmFile(dlrm, {tenants, limit});
    nodes = berth::sim::DlrmNodes(dlrm_gpu_nodes, dlrm_cpu_nodes);
    gpus = static_cast<std::int64_t>(dlrm_gpu_nodes) * 8;
    trace = dlrm;
  } else {
    jobs = berth::sim::ReadOpenbPodsFile(openb_pods, {tenants, limit});
    auto n = berth::sim::ReadOpenbNodesFile(openb_nodes);
    if (!n) return Fail(n.error().message);
    nodes = std::move(*n);
    gpus = 0;
    for (const auto& node : nodes) gpus += static_cast<std::int64_t>(node.gpus.size());
    trace = openb_pods;
  }
  if (!jobs) return Fail(jobs.error().message);
  if (runtime_factor != 0 && runtime_factor < 1) {
    return Fail(
        "--max-runtime-factor must be 0 (none) or at least 1: berthd stops a job at its "
        "max runtime, and trace jobs must be allowed to finish");
  }
  for (auto& j : *jobs) {
    if (!history_file.empty() && runtime_factor == 0) break;  // keep the recorded limits
    j.max_runtime_ms =
        static_cast<berth::TimeMs>(static_cast<double>(j.duration_ms) * runtime_factor);
  }
  std::string policy_text = EqualSharePolicy(tenants, gpus, dlrm.empty() ? "training" : "serving");
  if (!policy_file.empty()) {
    std::ifstream in(policy_file);
    if (!in) return Fail("cannot read --policy " + policy_file);
    std::stringstream ss;
    ss << in.rdbuf();
    policy_text = ss.str();
  } else if (!history_policy.empty()) {
    policy_text = history_policy;
  }
  auto policy = tenants <= 1 && policy_file.empty() && history_policy.empty()
                    ? berth::Result<berth::model::Policy>(berth::model::DefaultPolicy())
                    : berth::model::ParsePolicy(policy_text);
  if (!policy) return Fail("policy: " + policy.error().field + ": " + policy.error().message);

  std::vector<std::int64_t> las_ms;
  for (const auto& t : las) {
    auto v = berth::ParseDurationMs(t);
    if (!v || *v <= 0) return Fail("--las-thresholds takes GPU-time durations such as 1h,10h");
    las_ms.push_back(*v);
  }
  const bool slices = std::any_of(jobs->begin(), jobs->end(), [](const berth::sim::SimJob& j) {
    return berth::model::IsSlice(j.resources);
  });
  std::vector<berth::sim::Summary> summaries;
  std::vector<berth::sim::FillResult> fills;
  std::vector<berth::sim::SimResult> results;  // kept for the plot
  for (const auto& name : schedulers) {
    berth::sched::FifoScheduler fifo;
    berth::sched::CoreScheduler core;
    berth::sim::PlacementBaseline first_fit(berth::sim::PlacementRule::kFirstFit);
    berth::sim::PlacementBaseline best_fit(berth::sim::PlacementRule::kBestFit);
    berth::sim::PlacementBaseline spread(berth::sim::PlacementRule::kSpread);
    const berth::sched::Scheduler* s = nullptr;
    berth::sim::SnapshotAdjuster adjust;
    if (slices && (name == "fifo" || name == "sjf-oracle")) {
      return Fail("--schedulers: " + name +
                  " runs on the FIFO scheduler, which does not place GPU slices, and this trace "
                  "has them; use berth or las");
    }
    if (name == "fifo") {
      s = &fifo;
      adjust = berth::sim::OneQueue();
    } else if (name == "berth") {
      s = &core;
    } else if (name == "sjf-oracle") {
      s = &fifo;
      adjust = berth::sim::ShortestJobFirstOracle();
    } else if (name == "las") {
      s = &core;
      adjust = berth::sim::LeastAttainedService(las_ms);
    } else if (name == "first-fit" || name == "best-fit" || name == "spread") {
      s = name == "first-fit" ? &first_fit : name == "best-fit" ? &best_fit : &spread;
      adjust = berth::sim::OneQueue();
    } else {
      return Fail("--schedulers: unknown scheduler '" + name +
                  "'; use fifo, berth, sjf-oracle, las, first-fit, best-fit or spread");
    }
    if (fill) {
      if (name == "las" || name == "sjf-oracle")
        return Fail("--fill: " + name + " orders a queue; fill places one pod at a time");
      auto f = berth::sim::Fill(nodes, *jobs, *s, name);
      if (!f) return Fail(name + ": " + f.error().message);
      fills.push_back(std::move(*f));
      continue;
    }
    auto result = berth::sim::Simulate(nodes, *jobs, *policy, *s, options, adjust);
    if (!result) return Fail(name + ": " + result.error().message);
    summaries.push_back(berth::sim::Summarize(name, *result));
    if (!timeseries_prefix.empty()) {
      const std::string path = timeseries_prefix + "-" + name + ".csv";
      if (!WriteFile(path, berth::sim::TimeSeriesCsv(result->samples)))
        return Fail("cannot write " + path);
    }
    results.push_back(std::move(*result));
  }
  std::cout << fmt::format("{} jobs from {} on {} GPUs ({} nodes), {} tenant(s)\n\n", jobs->size(),
                           trace, gpus, nodes.size(), tenants);
  if (fill) {
    std::cout << berth::sim::RenderFillTable(fills);
    if (!json_out.empty()) {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& f : fills) all.push_back(berth::sim::ToJson(f));
      if (!WriteFile(json_out, all.dump(2) + "\n")) return Fail("cannot write --json " + json_out);
    }
    return 0;
  }
  std::cout << berth::sim::RenderTable(summaries);
  if (!plot_file.empty()) {
    std::vector<berth::sim::PlotSeries> series;
    for (std::size_t i = 0; i < results.size(); ++i) {
      series.push_back({summaries[i].scheduler, &results[i].samples});
    }
    const std::string title =
        fmt::format("{} on {} GPUs", std::filesystem::path(trace).filename().string(), gpus);
    if (!WriteFile(plot_file, berth::sim::RenderSvg(series, gpus, title)))
      return Fail("cannot write --plot " + plot_file);
  }
  if (!json_out.empty()) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& s : summaries) all.push_back(berth::sim::ToJson(s));
    std::ofstream out(json_out);
    out << all.dump(2) << "\n";
    if (!out) return Fail("cannot write --json " + json_out);
  }
  return 0;
}
