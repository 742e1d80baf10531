#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace berth::sim {
namespace {

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

Distribution Distribute(std::vector<double> v) {
  Distribution d;
  d.count = static_cast<std::int64_t>(v.size());
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  d.mean_s = sum / static_cast<double>(v.size());
  d.p50_s = Percentile(v, 50);
  d.p95_s = Percentile(v, 95);
  d.p99_s = Percentile(v, 99);
  return d;
}

struct Collect {
  std::int64_t jobs = 0;
  std::int64_t finished = 0;
  std::vector<double> jct;
  std::vector<double> wait;
  void Add(const JobOutcome& o) {
    ++jobs;
    if (o.end_ms) {
      ++finished;
      jct.push_back(static_cast<double>(*o.end_ms - o.submit_ms) / 1000.0);
    }
    if (o.first_start_ms)
      wait.push_back(static_cast<double>(*o.first_start_ms - o.submit_ms) / 1000.0);
  }
  Group Done() const { return {jobs, finished, Distribute(jct), Distribute(wait)}; }
};

std::string SizeClass(std::int64_t gpus) {
  if (gpus <= 1) return "1";
  if (gpus <= 4) return "2-4";
  if (gpus <= 8) return "8";
  if (gpus <= 32) return "9-32";
  return "33+";
}

nlohmann::json DistJson(const Distribution& d) {
  return {{"count", d.count},
          {"mean_s", d.mean_s},
          {"p50_s", d.p50_s},
          {"p95_s", d.p95_s},
          {"p99_s", d.p99_s}};
}

nlohmann::json GroupJson(const Group& g) {
  return {{"jobs", g.jobs},
          {"finished", g.finished},
          {"jct", DistJson(g.jct)},
          {"wait", DistJson(g.wait)}};
}

}  // namespace

Summary Summarize(const std::string& scheduler, const SimResult& result) {
  Summary s;
  s.scheduler = scheduler;
  s.cluster_gpus = result.cluster_gpus;
  Collect all;
  std::map<std::string, Collect> tenants;
  std::map<std::string, Collect> sizes;
  TimeMs first = 0;
  TimeMs last = 0;
  bool any = false;
  for (const auto& o : result.jobs) {
    all.Add(o);
    tenants[o.tenant].Add(o);
    sizes[SizeClass(o.gpus)].Add(o);
    if (!o.first_start_ms) ++s.never_started;
    s.evictions += o.evictions;
    s.lost_gpu_hours += static_cast<double>(o.lost_gpu_ms) / 3.6e6;
    if (!any || o.submit_ms < first) first = o.submit_ms;
    if (o.end_ms) last = std::max(last, *o.end_ms);
    any = true;
  }
  s.all = all.Done();
  for (const auto& [k, c] : tenants) s.by_tenant[k] = c.Done();
  for (const auto& [k, c] : sizes) s.by_size[k] = c.Done();
  s.makespan_s = any ? static_cast<double>(last - first) / 1000.0 : 0;
  // Time-weighted over the samples: each holds until the next.
  double span = 0;
  double alloc = 0;
  double idle = 0;
  for (std::size_t i = 0; i + 1 < result.samples.size(); ++i) {
    const auto& a = result.samples[i];
    auto dt = static_cast<double>(result.samples[i + 1].t_ms - a.t_ms);
    span += dt;
    alloc += dt * static_cast<double>(a.allocated_mgpu) / 1000.0;
    idle += dt * static_cast<double>(a.idle_gpus_while_waiting);
  }
  if (span > 0 && result.cluster_gpus > 0) {
    s.mean_allocation = alloc / span / static_cast<double>(result.cluster_gpus);
    s.mean_idle_gpus_while_waiting = idle / span;
  }
  s.cycles = result.cycles;
  s.scheduler_ms_per_cycle =
      result.cycles > 0 ? result.scheduler_ms / static_cast<double>(result.cycles) : 0;
  return s;
}

nlohmann::json ToJson(const Summary& s) {
  nlohmann::json j{{"scheduler", s.scheduler},
                   {"cluster_gpus", s.cluster_gpus},
                   {"all", GroupJson(s.all)},
                   {"makespan_s", s.makespan_s},
                   {"never_started", s.never_started},
                   {"evictions", s.evictions},
                   {"lost_gpu_hours", s.lost_gpu_hours},
                   {"mean_allocation", s.mean_allocation},
                   {"mean_idle_gpus_while_waiting", s.mean_idle_gpus_while_waiting},
                   {"cycles", s.cycles},
                   {"scheduler_ms_per_cycle", s.scheduler_ms_per_cycle}};
  for (const auto& [k, g] : s.by_tenant) j["by_tenant"][k] = GroupJson(g);
  for (const auto& [k, g] : s.by_size) j["by_size_gpus"][k] = GroupJson(g);
  return j;
}

std::string RenderTable(const std::vector<Summary>& summaries) {
  std::string out = fmt::format(
      "{:<10} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>8} {:>6}\n",
      "SCHEDULER", "JOBS", "DONE", "JCT_AVG", "JCT_P50", "JCT_P99", "WAIT_AVG", "WAIT_P50",
      "WAIT_P99", "MAKESPAN", "ALLOC", "EVICTED", "IDLE");
  for (const auto& s : summaries) {
    out += fmt::format(
        "{:<10} {:>6} {:>7} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} "
        "{:>5.1f}% {:>8} {:>6.1f}\n",
        s.scheduler, s.all.jobs, s.all.finished, s.all.jct.mean_s, s.all.jct.p50_s, s.all.jct.p99_s,
        s.all.wait.mean_s, s.all.wait.p50_s, s.all.wait.p99_s, s.makespan_s,
        100.0 * s.mean_allocation, s.evictions, s.mean_idle_gpus_while_waiting);
  }
  out += "(seconds; ALLOC: mean share of GPUs allocated; IDLE: mean free GPUs while jobs wait)\n";
  if (!summaries.empty() && summaries.front().by_tenant.size() > 1) {
    out += fmt::format("\n{:<10} {:<8} {:>6} {:>9} {:>9} {:>9}\n", "SCHEDULER", "TENANT", "JOBS",
                       "JCT_AVG", "WAIT_AVG", "WAIT_P99");
    for (const auto& s : summaries) {
      for (const auto& [t, g] : s.by_tenant) {
        out += fmt::format("{:<10} {:<8} {:>6} {:>9.0f} {:>9.0f} {:>9.0f}\n", s.scheduler, t,
                           g.jobs, g.jct.mean_s, g.wait.mean_s, g.wait.p99_s);
      }
    }
  }
  return out;
}

}  // namespace berth::sim
