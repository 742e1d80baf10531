// Explain-one-job benchmark: how long the scheduling core takes to decide
// and explain a single waiting job on a full cluster, and how long
// rendering that reason takes.
//
// The cluster: N nodes x 8 GPUs, each with 7 GPUs held by running jobs of
// 100 tenants (every tenant at its guarantee) and 1 GPU free, so a 16-GPU
// gang (2 x 8) sees 1 free GPU per node and N free in total: the reason is
// "fragmented", with a count per cause over every node, a search for a
// smaller replica shape that fits, and reclaim and preemption tried and
// found useless. One job alone costs less than the noise of a cycle, so the
// cycle runs with K such jobs, each the head of a queue of its own and each
// with a slightly different GPU-memory minimum (so no answer is reused from
// the cycle's explanation cache): per job = (cycle with K - cycle without) / K.
//
//   berth-explain-bench [--nodes N] [--jobs K] [--repeats R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "model/reason.h"
#include "sched/core_scheduler.h"

namespace {

using berth::sched::Snapshot;
using Clock = std::chrono::steady_clock;
constexpr int kLeaves = 20;  // per tenant: room for 2,000 queue heads

Snapshot FullCluster(int nodes) {
  Snapshot s;
  s.now_ms = 1'700'000'000'000;
  berth::model::Policy p = berth::model::DefaultPolicy();
  const std::int64_t per_tenant = std::int64_t{nodes} * 7 * 1000 / 100;
  for (int t = 0; t < 100; ++t) {
    berth::model::QueuePolicy top;
    top.path = "t" + std::to_string(t);
    top.tenant = top.path;
    berth::model::Quota q;
    q.guaranteed = per_tenant;
    top.quota[{berth::model::ResourceKind::kGpus, ""}] = q;
    p.queues.push_back(top);
    for (int l = 0; l < kLeaves; ++l) {
      berth::model::QueuePolicy leaf;
      leaf.path = top.path + "/q" + std::to_string(l);
      leaf.tenant = top.path;
      leaf.parent = top.path;
      p.queues.push_back(leaf);
    }
  }
  s.policy = p;
  std::int64_t id = 1;
  for (int n = 0; n < nodes; ++n) {
    berth::sched::NodeView v;
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    v.name = name;
    v.ready = true;
    v.cpu_millis_free = 128'000;
    v.memory_bytes_free = 1ULL << 40;
    for (std::uint32_t i = 0; i < 8; ++i) {
      berth::sched::GpuView g;
      g.index = i;
      g.uuid = v.name + "-" + std::to_string(i);
      g.model = "H100-80GB";
      g.memory_bytes = 80ULL << 30;
      g.free = i == 7;
      g.nvlink_island = i / 4;
      v.gpus.push_back(g);
    }
    berth::sched::RunningJob r;
    r.id = id++;
    r.tenant = "t" + std::to_string(n % 100);
    r.queue = "q0";
    r.started_at_ms = s.now_ms - 3'600'000;
    r.resources.gpus = 7;
    r.replicas.push_back({0, v.name, {0, 1, 2, 3, 4, 5, 6}});
    s.running.push_back(std::move(r));
    s.nodes.push_back(std::move(v));
  }
  return s;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 10'000;
  int jobs = 1000;
  int repeats = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--nodes") == 0) nodes = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--jobs") == 0) jobs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::atoi(argv[i + 1]);
  }
  if (nodes < 1 || repeats < 1 || jobs < 1 || jobs > 100 * kLeaves) {
    std::fprintf(stderr,
                 "usage: berth-explain-bench [--nodes N>=1] [--jobs 1..2000] [--repeats R>=1]\n");
    return 2;
  }
  const berth::sched::CoreScheduler core;
  Snapshot empty = FullCluster(nodes);
  Snapshot one = empty;
  for (int k = 0; k < jobs; ++k) {
    berth::sched::PendingJob job;
    job.id = 1'000'000 + k;
    job.tenant = "t" + std::to_string(k % 100);
    job.queue = "q" + std::to_string(k / 100);
    job.submitted_at_ms = one.now_ms - 60'000;
    job.replicas = 2;
    job.resources.gpus = 8;
    job.resources.gpu_memory_bytes = (1ULL << 30) + static_cast<std::uint64_t>(k);
    one.pending.push_back(job);
  }

  std::vector<double> base_ms;
  std::vector<double> with_ms;
  berth::sched::Plan plan;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    auto p0 = core.Schedule(empty);
    auto t1 = Clock::now();
    plan = core.Schedule(one);
    auto t2 = Clock::now();
    base_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    with_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    if (!p0.pending.empty()) return 1;
  }
  if (plan.pending.size() != static_cast<std::size_t>(jobs) || !plan.placements.empty()) {
    std::fprintf(stderr, "expected every job to wait\n");
    return 1;
  }
  const berth::model::Reason& reason = plan.pending.front().reason;
  std::vector<double> render_us;
  std::size_t chars = 0;
  for (int r = 0; r < 1000; ++r) {
    auto t0 = Clock::now();
    std::string en = berth::model::RenderReason(reason);
    std::string zh = berth::model::RenderReason(reason, berth::model::Lang::kZh);
    auto t1 = Clock::now();
    chars += en.size() + zh.size();
    render_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
  }
  std::vector<double> diff;
  for (int r = 0; r < repeats; ++r) diff.push_back((with_ms[r] - base_ms[r]) / jobs);
  std::printf(
      "berth-explain-bench: %d nodes x 8 GPUs, %zu running jobs, %d waiting 2x8 gangs, each the "
      "head of its own queue\n",
      nodes, empty.running.size(), jobs);
  std::printf("reason: %s\n", berth::model::RenderReason(reason).c_str());
  std::printf("cycle without the job   p50 %8.3f ms  p99 %8.3f ms\n", Percentile(base_ms, 50),
              Percentile(base_ms, 99));
  std::printf("cycle with the jobs     p50 %8.3f ms  p99 %8.3f ms\n", Percentile(with_ms, 50),
              Percentile(with_ms, 99));
  std::printf("explain one job         p50 %8.3f ms  p99 %8.3f ms  (difference / jobs)\n",
              Percentile(diff, 50), Percentile(diff, 99));
  std::printf("render one reason       p50 %8.3f us  p99 %8.3f us  (en and zh, %zu chars)\n",
              Percentile(render_us, 50), Percentile(render_us, 99), chars / 1000);
  return 0;
}
