// Scheduling-cycle benchmark: CoreScheduler alone, no server. Builds a
// cluster of N nodes × 8 GPUs (two NVLink islands each, two GPU models),
// 100 tenants with 5 queues each and guarantees that cover the cluster, and
// P pending jobs of mixed shapes (1, 2, 4, 8 GPUs; 2×8 gangs), then times
// full cycles on an empty cluster (every cycle places until the cluster is
// full and explains every job left). Prints cycle time p50/p99, placements
// per second, peak RSS, and the time per waiting job's reason.
// --runtimes gives 4 in 5 pending jobs a max runtime (10 minutes to a day),
// so waiting heads get estimated starts, reservations and backfill (the
// jobs placed in the cycle count as started now); without it no job has one
// and every estimate is "unknown".
//
// --fragmented starts from a used cluster instead: every node runs a 4-GPU
// job that does not checkpoint and a 2-GPU job that does, leaving two GPUs
// free; waiting 4-GPU jobs then fit only by moving a 2-GPU job
// (consolidation), and 8-GPU ones not even so. It measures what trying to
// make room costs a cycle. Its pending jobs are of every priority, so the
// high ones preempt the running normal ones: a preemption storm.
// --same-priority makes every pending job normal (nothing to preempt): a
// steady full cluster.
//
// --predictions gives every pending job a predicted run time (10 minutes to
// a day) and every running one started an hour ago a prediction, so jobs
// are ordered shortest predicted GPU time first and heads get predicted
// starts (sched/runtime_estimate.h); --no-short-first sets the policy's
// short_first_max_wait to 0 (submit order within a queue, as before it).
//
// --demand fills the snapshot's demand as berthd's snapshot builder does
// (DemandOf the pending and running jobs): with the bench's two GPU models
// and its A100 jobs, a job free to use any model is placed by FGD's score
// among the models (model-aware placement), which it measures.
//
// --slices makes every GPU a sharing one and one pending job in ten a
// quarter-GPU slice; with --demand the slices in the demand turn on FGD's
// score for every replica (docs/scheduling.md), which it measures.
//
// --size N P runs one size only (N nodes, P pending), e.g. under `perf stat`.
//
// --digest prints a hash of the last cycle's placements and evictions (job,
// nodes, GPUs, in plan order): two builds that place alike print the same,
// so a change meant to be faster only can be checked to decide the same.
//
// --forecast times one forecast of the snapshot (sched/forecast.h) with
// berthd's budget: at most 128 scheduler runs, and 2,000,000 / (pending +
// running) on a large snapshot (control/forecaster.h). With --runtimes the
// running jobs have ends to step to.
//
//   berth-sched-bench [--cycles K] [--quick] [--runtimes] [--fragmented]
//                     [--same-priority] [--max-reservations N] [--size N P]
//                     [--predictions] [--no-short-first] [--demand] [--slices]
//                     [--digest] [--forecast]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sched/core_scheduler.h"
#include "sched/forecast.h"

namespace {

using berth::sched::Snapshot;

struct Options {
  bool runtimes = false;
  bool fragmented = false;
  bool same_priority = false;  // every pending job normal: nothing to preempt
  int max_reservations = -1;   // -1: the policy default
  bool predictions = false;
  bool no_short_first = false;
  bool demand = false;
  bool slices = false;    // sharing GPUs, and one pending job in ten a quarter-GPU slice
  bool digest = false;    // print a hash of the last plan's placements
  bool forecast = false;  // time one forecast with berthd's budget
};

// FNV-1a over the plan's placements and evictions.
std::uint64_t Digest(const berth::sched::Plan& plan) {
  std::uint64_t h = 14695981039346656037ULL;
  auto mix = [&](std::string_view bytes) {
    for (unsigned char ch : bytes) h = (h ^ ch) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
  };
  for (const auto& p : plan.placements) {
    mix(std::to_string(p.job_id));
    for (const auto& rp : p.replicas) {
      mix(rp.node);
      for (std::uint32_t g : rp.gpu_indices) mix(std::to_string(g));
    }
  }
  for (const auto& e : plan.evictions) mix(std::to_string(e.job_id));
  return h;
}

Snapshot Build(int nodes, int pending, std::mt19937& rng, const Options& opt) {
  Snapshot s;
  s.now_ms = 1'700'000'000'000;
  for (int n = 0; n < nodes; ++n) {
    berth::sched::NodeView v;
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    v.name = name;
    v.ready = true;
    v.labels = {{"pool", n % 10 == 0 ? "inference" : "training"}};
    v.cpu_millis_free = 128'000;
    v.memory_bytes_free = 1ULL << 40;
    for (std::uint32_t i = 0; i < 8; ++i) {
      berth::sched::GpuView g{i,
                              v.name + "-" + std::to_string(i),
                              n % 4 == 0 ? "A100-80GB" : "H100-80GB",
                              80ULL << 30,
                              true,
                              true};
      g.nvlink_island = i / 4;
      g.sharing = opt.slices;
      v.gpus.push_back(g);
    }
    s.nodes.push_back(std::move(v));
  }
  if (opt.fragmented) {
    std::int64_t id = 100'000'000;
    for (int n = 0; n < nodes; ++n) {
      for (std::uint32_t first : {0U, 4U}) {
        berth::sched::RunningJob r;
        r.id = ++id;
        r.tenant = "t" + std::to_string(n % 100);
        r.queue = "q" + std::to_string(n % 5);
        r.started_at_ms = s.now_ms - 3'600'000;
        r.resources.gpus = first == 0 ? 4 : 2;
        r.checkpoints = first == 4;
        if (opt.predictions) {
          r.predicted = {std::int64_t{1'800'000} * (1 + n % 8), berth::sched::RuntimeBasis::kShape,
                         5};
        }
        berth::sched::ReplicaPlacement rp{0, s.nodes[static_cast<std::size_t>(n)].name, {}};
        for (std::uint32_t g = first; g < first + r.resources.gpus; ++g)
          rp.gpu_indices.push_back(g);
        r.replicas.push_back(rp);
        berth::sched::HoldGpus(s.nodes, r.resources, r.replicas, true);
        s.running.push_back(std::move(r));
      }
    }
  }
  berth::model::Policy p = berth::model::DefaultPolicy();
  std::int64_t per_tenant = std::int64_t{nodes} * 8 * 1000 / 100;
  for (int t = 0; t < 100; ++t) {
    berth::model::QueuePolicy top;
    top.path = "t" + std::to_string(t);
    top.tenant = top.path;
    berth::model::Quota q;
    q.guaranteed = per_tenant;
    q.weight = 1 + t % 3;
    top.quota[{berth::model::ResourceKind::kGpus, ""}] = q;
    p.queues.push_back(top);
    for (int c = 0; c < 5; ++c) {
      berth::model::QueuePolicy leaf;
      leaf.path = top.path + "/q" + std::to_string(c);
      leaf.tenant = top.tenant;
      leaf.parent = top.path;
      p.queues.push_back(leaf);
    }
  }
  if (opt.max_reservations >= 0) p.backfill.max_reservations = opt.max_reservations;
  if (opt.no_short_first) p.short_first_max_wait_ms = 0;
  s.policy = std::move(p);
  std::uniform_int_distribution<int> tenant(0, 99), queue(0, 4), shape(0, 9), prio(0, 3);
  for (int j = 0; j < pending; ++j) {
    berth::sched::PendingJob job;
    job.id = j + 1;
    job.tenant = "t" + std::to_string(tenant(rng));
    job.queue = "q" + std::to_string(queue(rng));
    job.priority = static_cast<berth::model::Priority>(prio(rng));
    if (opt.same_priority) job.priority = berth::model::Priority::kNormal;
    job.submitted_at_ms = s.now_ms - (pending - j);
    int k = shape(rng);
    job.resources.gpus = k < 4 ? 1 : k < 6 ? 2 : k < 8 ? 4 : 8;
    job.replicas = k == 9 ? 2 : 1;
    if (k == 3) job.resources.gpu_model = "A100-80GB";
    if (opt.slices && k == 0) job.resources.gpu_share_millis = 250;
    job.resources.cpu_millis = 4000 * job.resources.gpus;
    if (opt.runtimes && rng() % 5 != 0) {
      job.max_runtime_ms = std::int64_t{600'000} + static_cast<std::int64_t>(rng() % 86'400'000);
    }
    if (opt.predictions) {
      job.predicted = {std::int64_t{600'000} + static_cast<std::int64_t>(rng() % 86'400'000),
                       berth::sched::RuntimeBasis::kTenantShape, 5};
    }
    s.pending.push_back(std::move(job));
  }
  return s;
}

void Run(int nodes, int pending, int cycles, const Options& opt) {
  std::mt19937 rng(42);
  Snapshot s = Build(nodes, pending, rng, opt);
  if (opt.demand) s.demand = berth::sched::DemandOf(s.pending, s.running);
  berth::sched::CoreScheduler sched;
  std::vector<double> ms;
  std::vector<double> cpu_ms;  // process CPU time: steadier than wall time on a busy machine
  std::size_t placed = 0;
  std::size_t waiting = 0;
  std::size_t reserved = 0;
  std::size_t moved = 0;
  std::size_t evicted = 0;
  std::uint64_t digest = 0;
  for (int c = 0; c < cycles; ++c) {
    std::clock_t c0 = std::clock();
    auto t0 = std::chrono::steady_clock::now();
    berth::sched::Plan plan = sched.Schedule(s);
    auto t1 = std::chrono::steady_clock::now();
    std::clock_t c1 = std::clock();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    cpu_ms.push_back(1000.0 * static_cast<double>(c1 - c0) / CLOCKS_PER_SEC);
    placed = plan.placements.size();
    evicted = plan.evictions.size();
    moved = static_cast<std::size_t>(std::count_if(plan.placements.begin(), plan.placements.end(),
                                                   [](const auto& p) { return p.moved; }));
    waiting = plan.pending.size();
    reserved = plan.reservations.size();
    digest = Digest(plan);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu_ms.begin(), cpu_ms.end());
  double p50 = ms[ms.size() / 2];
  double p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "%6d nodes x 8 GPUs, %6d pending: cycle p50 %9.1f ms  p99 %9.1f ms  cpu p50 %9.1f ms  "
      "(%d cycles)  placed %6zu  waiting %6zu  reserved %3zu  placements/s %9.0f  peak RSS %6ld "
      "MiB  evicted %zu  moved %zu\n",
      nodes, pending, p50, p99, cpu_ms[cpu_ms.size() / 2], cycles, placed, waiting, reserved,
      p50 > 0 ? static_cast<double>(placed) / (p50 / 1000) : 0.0, ru.ru_maxrss / 1024, evicted,
      moved);
  if (opt.digest) std::printf("plan digest %016llx\n", static_cast<unsigned long long>(digest));
  if (opt.forecast) {
    const std::size_t jobs = s.pending.size() + s.running.size();
    berth::sched::ForecastOptions fo;
    fo.max_cycles = std::clamp<std::size_t>(2'000'000 / std::max<std::size_t>(1, jobs), 2, 128);
    std::clock_t c0 = std::clock();
    auto t0 = std::chrono::steady_clock::now();
    const berth::sched::Forecast f = berth::sched::ForecastStarts(sched, s, fo);
    auto t1 = std::chrono::steady_clock::now();
    std::clock_t c1 = std::clock();
    std::printf(
        "forecast: %zu scheduler runs (budget %zu), %zu starts foreseen, wall %.1f ms, "
        "cpu %.1f ms, ended %d\n",
        f.cycles, fo.max_cycles, f.start_ms.size(),
        std::chrono::duration<double, std::milli>(t1 - t0).count(),
        1000.0 * static_cast<double>(c1 - c0) / CLOCKS_PER_SEC, static_cast<int>(f.end));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int cycles = 5;
  bool quick = false;
  Options opt;
  int only_nodes = 0;
  int only_pending = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0 && i + 2 < argc) {
      only_nodes = std::atoi(argv[++i]);
      only_pending = std::atoi(argv[++i]);
    }
    if (std::strcmp(argv[i], "--cycles") == 0 && i + 1 < argc) cycles = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--runtimes") == 0) opt.runtimes = true;
    if (std::strcmp(argv[i], "--fragmented") == 0) opt.fragmented = true;
    if (std::strcmp(argv[i], "--predictions") == 0) opt.predictions = true;
    if (std::strcmp(argv[i], "--no-short-first") == 0) opt.no_short_first = true;
    if (std::strcmp(argv[i], "--same-priority") == 0) opt.same_priority = true;
    if (std::strcmp(argv[i], "--demand") == 0) opt.demand = true;
    if (std::strcmp(argv[i], "--slices") == 0) opt.slices = true;
    if (std::strcmp(argv[i], "--forecast") == 0) opt.forecast = true;
    if (std::strcmp(argv[i], "--digest") == 0) opt.digest = true;
    if (std::strcmp(argv[i], "--max-reservations") == 0 && i + 1 < argc) {
      opt.max_reservations = std::atoi(argv[++i]);
    }
  }
  if (only_nodes > 0) {
    Run(only_nodes, only_pending, cycles, opt);
    return 0;
  }
  Run(1'000, 10'000, cycles, opt);
  if (!quick) {
    Run(1'000, 100'000, cycles, opt);
    // At least three cycles: the first one of a size pays the page faults of
    // growing the heap, so one cycle alone is the cold time, not the p50
    // (p99 is the slowest cycle, the cold one).
    Run(10'000, 10'000, std::max(3, cycles / 5), opt);
    Run(10'000, 100'000, std::max(3, cycles / 5), opt);
  }
  return 0;
}
