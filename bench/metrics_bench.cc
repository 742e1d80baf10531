// /metrics render benchmark: RenderMetrics alone, no server or store. Builds
// an inventory of N nodes x 8 GPUs (two models, two pools), fills 3 in 4
// GPUs with running jobs (1, 2, 4 and 8 GPUs; four tenants of five queues),
// leaves some GPUs unhealthy or cordoned, adds pending jobs with reasons and
// counters with observations and a telemetry sample for every GPU (the DCGM
// gauges), then times full renders. Prints render time
// p50/p99, document size and line count for each size, and the same for
// the body of GET /v1/gpus (GpusJson, every GPU with its holder) over the
// same inventory.
//
//   berth-metrics-bench [--renders K] [--size NODES]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "api/metrics_render.h"
#include "api/render.h"

namespace {

using berth::server::ClusterView;
using berth::server::NodeStatus;
using berth::server::RenderMetrics;
using berth::server::ServerMetrics;

struct Inputs {
  std::vector<NodeStatus> nodes;
  std::vector<berth::store::JobRecord> holders;
  std::vector<berth::store::JobRecord> pending;
  berth::model::Policy policy;
  std::vector<berth::model::GpuSample> samples;  // one per GPU
};

Inputs Build(int node_count) {
  Inputs in;
  in.policy.pools.push_back({"inference", {{"pool", "inference"}}});
  in.policy.pools.push_back({"training", {{"pool", "training"}}});
  std::int64_t job_id = 1;
  const int shapes[] = {8, 4, 2, 1, 1};
  for (int n = 0; n < node_count; ++n) {
    NodeStatus s;
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    s.record.info.name = name;
    s.record.info.hostname = std::string(name) + ".cluster.local";
    s.record.info.labels = {{"pool", n % 10 == 0 ? "inference" : "training"}};
    s.record.state = berth::model::NodeState::kReady;
    for (std::uint32_t g = 0; g < 8; ++g) {
      berth::model::Gpu gpu;
      gpu.index = g;
      char uuid[48];
      std::snprintf(uuid, sizeof uuid, "GPU-%08d-%04u", n, g);
      gpu.uuid = uuid;
      gpu.model = n % 10 == 0 ? "L40S-48GB" : "H100-80GB";
      if (n % 97 == 0 && g == 7) gpu.health = berth::model::Health::kUnhealthy;
      berth::model::GpuSample sample;
      sample.node = name;
      sample.gpu = g;
      sample.uuid = gpu.uuid;
      sample.util_pct = (g * 13 + static_cast<std::uint32_t>(n)) % 101;
      sample.mem_util_pct = sample.util_pct / 2;
      sample.memory_total_bytes = std::uint64_t{80} << 30;
      sample.memory_used_bytes = sample.memory_total_bytes / 100 * sample.util_pct;
      sample.temperature_c = 40 + static_cast<std::int32_t>(g);
      sample.power_mw = 300'000 + sample.util_pct * 4'000;
      in.samples.push_back(std::move(sample));
      s.record.info.gpus.push_back(gpu);
    }
    if (n % 50 == 1) s.record.gpu_cordons[6] = berth::store::Cordon{};
    // Jobs fill GPUs 0..5 (3 in 4 of the node).
    std::uint32_t next = 0;
    for (int k = 0; next < 6; ++k) {
      const auto want = static_cast<std::uint32_t>(shapes[(n + k) % 5]);
      const std::uint32_t take = std::min(want, 6 - next);
      berth::store::JobRecord j;
      j.id = job_id++;
      j.state = berth::model::JobState::kRunning;
      j.spec.tenant = "tenant-" + std::to_string(j.id % 4);
      j.spec.queue = "queue-" + std::to_string(j.id % 5);
      berth::store::RunRecord r;
      r.node = name;
      r.state = berth::model::RunState::kRunning;
      for (std::uint32_t g = 0; g < take; ++g) r.gpu_indices.push_back(next + g);
      next += take;
      j.runs.push_back(std::move(r));
      in.holders.push_back(std::move(j));
    }
    in.nodes.push_back(std::move(s));
  }
  const berth::model::ReasonCode reasons[] = {berth::model::ReasonCode::kNoNodeFits,
                                              berth::model::ReasonCode::kBehindInQueue,
                                              berth::model::ReasonCode::kQueued};
  for (int p = 0; p < 2000; ++p) {
    berth::store::JobRecord j;
    j.id = job_id++;
    j.spec.tenant = "tenant-" + std::to_string(p % 4);
    j.spec.queue = "queue-" + std::to_string(p % 5);
    j.reason.code = reasons[p % 3];
    in.pending.push_back(std::move(j));
  }
  return in;
}

void Run(int node_count, int renders) {
  Inputs in = Build(node_count);
  ServerMetrics counters;
  for (int i = 0; i < 10000; ++i) {
    counters.ObserveQueueWait("tenant-" + std::to_string(i % 4), "queue-" + std::to_string(i % 5),
                              i % 3600);
    counters.ObserveCycle(0.001 * (i % 50), 1);
  }
  counters.CountOutcome("tenant-0", "Failed", "user_code");
  ClusterView view{&in.nodes, &in.holders, &in.pending, &in.policy};
  view.samples = &in.samples;
  view.telemetry_samples = 123'456;
  std::vector<double> ms;
  std::size_t bytes = 0;
  std::size_t lines = 0;
  for (int i = 0; i < renders; ++i) {
    const auto start = std::chrono::steady_clock::now();
    std::string text = RenderMetrics(view, counters);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    bytes = text.size();
    lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  }
  std::sort(ms.begin(), ms.end());
  const double p50 = ms[ms.size() / 2];
  const double p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  std::printf(
      "nodes=%d gpus=%d running_jobs=%zu pending=%zu renders=%d  render p50=%.2f ms p99=%.2f ms  "
      "document=%.1f KiB lines=%zu\n",
      node_count, node_count * 8, in.holders.size(), in.pending.size(), renders, p50, p99,
      static_cast<double>(bytes) / 1024.0, lines);

  std::vector<double> gpus_ms;
  std::size_t gpus_bytes = 0;
  for (int i = 0; i < renders; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const std::string body =
        berth::server::GpusJson(in.nodes, in.holders, [](std::string_view t) {
          return t != "tenant-3";  // a member of three tenants: one's holders hidden
        }).dump();
    gpus_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    gpus_bytes = body.size();
  }
  std::sort(gpus_ms.begin(), gpus_ms.end());
  std::printf("  GET /v1/gpus body: p50=%.2f ms p99=%.2f ms  %.1f KiB\n",
              gpus_ms[gpus_ms.size() / 2],
              gpus_ms[std::min(gpus_ms.size() - 1, gpus_ms.size() * 99 / 100)],
              static_cast<double>(gpus_bytes) / 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  int renders = 50;
  int size = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--renders") == 0 && i + 1 < argc) {
      renders = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      size = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: berth-metrics-bench [--renders K] [--size NODES]\n");
      return 2;
    }
  }
  if (size > 0) {
    Run(size, renders);
    return 0;
  }
  for (int nodes : {125, 1250}) Run(nodes, renders);
  return 0;
}
