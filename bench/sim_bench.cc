// berth-sim speed: how fast the simulator replays a workload through the
// unchanged scheduling core (CoreScheduler) on its virtual clock.
//
//   berth-sim-bench --dlrm FILE             the largest shipped trace, end to end
//   berth-sim-bench --itp FILE --gpus N     an ITP cluster on N GPUs
//   berth-sim-bench --synthetic-nodes N --hours H
//                                           N nodes x 8 GPUs kept about 80% busy
//                                           by 1-8 GPU jobs of 10 min to 2 h, for
//                                           H simulated hours
//
// Prints jobs, cycles, wall time, simulated jobs per wall second, simulated
// days per wall minute and peak RSS. --outcomes FILE also writes what was
// simulated (every job's outcome, every cycle's sample), so that two builds
// can be checked to simulate the same thing. Every job goes to one queue under the
// default policy: the figures are the engine's and the core's cost, not a
// policy's. Targets (issue 4): the largest trace in at most 10 s; a
// 10,000-node cluster at least one simulated day per wall minute.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sched/core_scheduler.h"
#include "sim/engine.h"
#include "sim/trace.h"

namespace {

using berth::TimeMs;
using berth::sim::SimJob;

std::vector<SimJob> Synthetic(std::size_t nodes, double hours, std::uint32_t seed) {
  // Shapes drawn uniformly: a mean of 23/8 GPUs, for 10 to 120 minutes (mean
  // 65); arrivals keep about 80% of the GPUs busy.
  static constexpr std::array<std::uint32_t, 8> kGpus{1, 1, 1, 2, 2, 4, 4, 8};
  std::mt19937 rng(seed);
  const double gpus = static_cast<double>(nodes) * 8;
  const double mean_gpus =
      static_cast<double>(std::accumulate(kGpus.begin(), kGpus.end(), 0U)) / kGpus.size();
  const double mean_s = 65 * 60;
  const double rate = 0.8 * gpus / (mean_gpus * mean_s);  // jobs per second
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<int> shape(0, 7);
  std::uniform_int_distribution<int> minutes(10, 120);
  std::vector<SimJob> jobs;
  double t = 0;
  while (t < hours * 3600) {
    t += gap(rng);
    SimJob j;
    j.id = static_cast<std::int64_t>(jobs.size()) + 1;
    j.name = std::to_string(j.id);
    j.submit_ms = static_cast<TimeMs>(t * 1000);
    j.duration_ms = TimeMs{minutes(rng)} * 60'000;
    j.resources.gpus = kGpus[static_cast<std::size_t>(shape(rng))];
    jobs.push_back(std::move(j));
  }
  return jobs;
}

void Report(const char* what, std::size_t jobs, const berth::sim::SimResult& r, double wall_s,
            TimeMs span_ms) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double sim_days = static_cast<double>(span_ms) / 86'400'000.0;
  std::printf(
      "%s: %zu jobs, %lld cycles, %lld GPUs: wall %.1f s (scheduler %.1f s), %.0f simulated "
      "jobs/s, "
      "%.2f simulated days per wall minute, peak RSS %ld MiB, running jobs from the memo %.1f%%\n",
      what, jobs, static_cast<long long>(r.cycles), static_cast<long long>(r.cluster_gpus), wall_s,
      r.scheduler_ms / 1000, static_cast<double>(jobs) / wall_s, sim_days / (wall_s / 60),
      ru.ru_maxrss / 1024,
      r.memo_hits + r.memo_misses > 0 ? 100.0 * static_cast<double>(r.memo_hits) /
                                            static_cast<double>(r.memo_hits + r.memo_misses)
                                      : 0.0);
}

// Every decision the run made, one line per job and per cycle sample: two
// builds that print the same file simulated the same thing (how a speed-up
// is checked to change no result).
bool WriteOutcomes(const std::string& path, const berth::sim::SimResult& r) {
  std::ofstream out(path);
  if (!out) return false;
  for (const auto& o : r.jobs) {
    out << "job " << o.id << ' ' << o.first_start_ms.value_or(-1) << ' ' << o.end_ms.value_or(-1)
        << ' ' << o.evictions << ' ' << o.moves << ' ' << o.lost_gpu_ms << ' ' << o.failures << ' '
        << o.lost_gpu_ms_to_failures;
    for (const auto& rp : o.first_placement) {
      out << ' ' << rp.node << ':';
      for (auto g : rp.gpu_indices) out << g << ',';
    }
    out << '\n';
  }
  for (const auto& s : r.samples) {
    out << "sample " << s.t_ms << ' ' << s.allocated_mgpu << ' ' << s.pending_jobs << ' '
        << s.pending_mgpu << ' ' << s.idle_gpus_while_waiting << ' ' << s.down_gpus << '\n';
  }
  out << "cycles " << r.cycles << " failures " << r.node_failures << '\n';
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-sim speed"};
  std::string dlrm;
  std::string itp;
  std::size_t gpus = 64;
  std::size_t synthetic_nodes = 0;
  double hours = 2;
  TimeMs cycle_s = 10;
  app.add_option("--dlrm", dlrm, "Alibaba DLRM trace CSV");
  app.add_option("--itp", itp, "Microsoft ITP cluster CSV");
  app.add_option("--gpus", gpus, "cluster GPUs for --itp (8 per node)");
  app.add_option("--synthetic-nodes", synthetic_nodes, "nodes of the synthetic cluster");
  app.add_option("--hours", hours, "simulated hours of the synthetic cluster");
  app.add_option("--cycle", cycle_s, "scheduling cycle, seconds");
  std::string outcomes;
  app.add_option("--outcomes", outcomes,
                 "write every job's outcome and every cycle's sample to this file (to compare "
                 "two builds' results)");
  CLI11_PARSE(app, argc, argv);

  std::vector<SimJob> jobs;
  std::vector<berth::sched::NodeView> nodes;
  const char* what = "";
  if (!dlrm.empty()) {
    auto read = berth::sim::ReadDlrmFile(dlrm, {});
    if (!read) {
      std::fprintf(stderr, "--dlrm: %s\n", read.error().message.c_str());
      return 1;
    }
    jobs = std::move(*read);
    nodes = berth::sim::DlrmNodes(470, 2250);
    what = "dlrm";
  } else if (!itp.empty()) {
    auto read = berth::sim::ReadItpFile(itp, {});
    if (!read) {
      std::fprintf(stderr, "--itp: %s\n", read.error().message.c_str());
      return 1;
    }
    jobs = std::move(*read);
    nodes = berth::sim::UniformNodes((gpus + 7) / 8, 8, "H100-80GB");
    what = "itp";
  } else if (synthetic_nodes > 0) {
    jobs = Synthetic(synthetic_nodes, hours, 7);
    nodes = berth::sim::UniformNodes(synthetic_nodes, 8, "H100-80GB");
    what = "synthetic";
  } else {
    std::fprintf(stderr, "give --dlrm FILE, --itp FILE or --synthetic-nodes N\n");
    return 2;
  }
  for (auto& j : jobs) {
    j.tenant = "default";
    j.queue = "default";
  }
  berth::sim::SimOptions options;
  options.cycle_ms = cycle_s * 1000;
  if (synthetic_nodes > 0) options.horizon_ms = static_cast<TimeMs>(hours * 3'600'000);
  berth::sched::CoreScheduler core;
  auto t0 = std::chrono::steady_clock::now();
  auto result = berth::sim::Simulate(nodes, jobs, berth::model::DefaultPolicy(), core, options);
  auto t1 = std::chrono::steady_clock::now();
  if (!result) {
    std::fprintf(stderr, "simulate: %s\n", result.error().message.c_str());
    return 1;
  }
  TimeMs first = jobs.empty() ? 0 : jobs.front().submit_ms;
  TimeMs last = first;
  for (const auto& o : result->jobs) {
    if (o.end_ms) last = std::max(last, *o.end_ms);
  }
  if (options.horizon_ms > 0) last = first + options.horizon_ms;
  if (!outcomes.empty() && !WriteOutcomes(outcomes, *result)) {
    std::fprintf(stderr, "--outcomes: cannot write %s\n", outcomes.c_str());
    return 1;
  }
  Report(what, jobs.size(), *result, std::chrono::duration<double>(t1 - t0).count(), last - first);
  return 0;
}
