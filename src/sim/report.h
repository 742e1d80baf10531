// What berth-sim prints: completion time and queueing delay (mean, p50, p95,
// p99) overall, per tenant and per job-size class, makespan, evictions and
// the GPU-hours they threw away, allocation and idle-while-waiting GPUs.
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

struct Summary {
  std::string scheduler;
  std::int64_t cluster_gpus = 0;
  Group all;
  std::map<std::string, Group> by_tenant;
  std::map<std::string, Group> by_size;  // "1", "2-4", "8", "9-32", "33+" GPUs
  double makespan_s = 0;                 // first submit to last end
  std::int64_t never_started = 0;
  std::int64_t evictions = 0;
  double lost_gpu_hours = 0;
  double mean_allocation = 0;  // allocated / cluster GPUs, averaged over time
  // Mean free GPUs while some job waited (time-weighted): capacity the
  // waiting jobs could not use (fragmentation, gang or quota limits).
  double mean_idle_gpus_while_waiting = 0;
  std::int64_t cycles = 0;
  double scheduler_ms_per_cycle = 0;
};

Summary Summarize(const std::string& scheduler, const SimResult& result);
nlohmann::json ToJson(const Summary& s);
// One table comparing summaries side by side (overall), then per tenant.
std::string RenderTable(const std::vector<Summary>& summaries);

}  // namespace berth::sim
