#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

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

struct CollectRho {
  std::vector<double> rho;
  Fairness Done() const {
    Fairness f;
    f.jobs = static_cast<std::int64_t>(rho.size());
    if (rho.empty()) return f;
    double sum = 0;
    std::int64_t over = 0;
    for (double r : rho) {
      sum += r;
      f.max_rho = std::max(f.max_rho, r);
      if (r > 1) ++over;
    }
    f.mean_rho = sum / static_cast<double>(rho.size());
    f.share_over_1 = static_cast<double>(over) / static_cast<double>(rho.size());
    return f;
  }
};

nlohmann::json FairnessJson(const Fairness& f) {
  return {{"jobs", f.jobs},
          {"mean_rho", f.mean_rho},
          {"max_rho", f.max_rho},
          {"share_rho_over_1", f.share_over_1}};
}

}  // namespace

double IsolatedSeconds(TimeMs duration_ms, std::int64_t gpus, std::int64_t cluster_gpus,
                       std::size_t tenants) {
  const double run_s = static_cast<double>(duration_ms) / 1000.0;
  if (tenants == 0 || cluster_gpus <= 0) return run_s;
  const double share = static_cast<double>(cluster_gpus) / static_cast<double>(tenants);
  return run_s * std::max(1.0, static_cast<double>(gpus) / share);
}

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
  std::set<std::string> tenant_names;
  for (const auto& o : result.jobs) tenant_names.insert(o.tenant);
  CollectRho all_rho;
  std::map<std::string, CollectRho> tenant_rho;
  for (const auto& o : result.jobs) {
    if (o.end_ms) {
      const double shared = static_cast<double>(*o.end_ms - o.submit_ms) / 1000.0;
      TimeMs grid_wait = 0;  // to the first cycle at or after the submit
      if (result.cycle_ms > 0 && o.submit_ms > result.first_submit_ms) {
        const TimeMs since = o.submit_ms - result.first_submit_ms;
        grid_wait = (since + result.cycle_ms - 1) / result.cycle_ms * result.cycle_ms - since;
      }
      const double isolated =
          static_cast<double>(grid_wait) / 1000.0 +
          IsolatedSeconds(o.duration_ms, o.gpus, result.cluster_gpus, tenant_names.size());
      const double rho = shared / std::max(isolated, 1e-3);
      all_rho.rho.push_back(rho);
      tenant_rho[o.tenant].rho.push_back(rho);
    }
    s.failures += o.failures;
    s.lost_gpu_hours_to_failures += static_cast<double>(o.lost_gpu_ms_to_failures) / 3.6e6;
    all.Add(o);
    tenants[o.tenant].Add(o);
    sizes[SizeClass(o.gpus)].Add(o);
    if (!o.first_start_ms) ++s.never_started;
    s.evictions += o.evictions;
    s.moves += o.moves;
    s.lost_gpu_hours += static_cast<double>(o.lost_gpu_ms) / 3.6e6;
    if (o.reclaim_waits > 0 || o.reclaim_waits_held_otherwise > 0) {
      auto& t = s.reclaim_by_tenant[o.tenant];
      t.waits += o.reclaim_waits;
      t.max_s = std::max(t.max_s, static_cast<double>(o.max_reclaim_wait_ms) / 1000.0);
      t.held_otherwise += o.reclaim_waits_held_otherwise;
      t.max_held_otherwise_s =
          std::max(t.max_held_otherwise_s,
                   static_cast<double>(o.max_reclaim_wait_held_otherwise_ms) / 1000.0);
    }
    s.reclaim_waits += o.reclaim_waits;
    s.max_reclaim_wait_s =
        std::max(s.max_reclaim_wait_s, static_cast<double>(o.max_reclaim_wait_ms) / 1000.0);
    s.reclaim_waits_held_otherwise += o.reclaim_waits_held_otherwise;
    s.max_reclaim_wait_held_otherwise_s =
        std::max(s.max_reclaim_wait_held_otherwise_s,
                 static_cast<double>(o.max_reclaim_wait_held_otherwise_ms) / 1000.0);
    s.waited += o.waited ? 1 : 0;
    if (o.first_eta_given_ms != 0) {
      const TimeMs promised = o.first_eta_ms - o.first_eta_given_ms;
      const bool hit = o.first_start_ms && std::abs(*o.first_start_ms - o.first_eta_ms) <=
                                               promised / 4 + result.cycle_ms;
      ++s.etas;
      s.eta_within_25 += hit ? 1 : 0;
      if (o.first_eta_predicted) {
        ++s.etas_predicted;
        s.eta_predicted_within_25 += hit ? 1 : 0;
      }
    }
    if (!any || o.submit_ms < first) first = o.submit_ms;
    if (o.end_ms) last = std::max(last, *o.end_ms);
    any = true;
  }
  if (s.waited > 0) s.eta_coverage = static_cast<double>(s.etas) / static_cast<double>(s.waited);
  if (s.etas > 0) s.eta_within_25 /= static_cast<double>(s.etas);
  if (s.etas_predicted > 0) {
    s.eta_predicted_within_25 /= static_cast<double>(s.etas_predicted);
  }
  s.all = all.Done();
  s.node_failures = result.node_failures;
  s.fairness = all_rho.Done();
  for (const auto& [k, c] : tenant_rho) s.fairness_by_tenant[k] = c.Done();
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
  s.hints_checked = result.waiting_decisions > 0 || result.hints_found > 0;
  s.waiting_decisions = result.waiting_decisions;
  s.hints_found = result.hints_found;
  s.hints_verified = result.hints_verified;
  s.hints_next_checked = result.hints_next_checked;
  auto share = [](std::int64_t part, std::int64_t whole) {
    return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  s.hinted_share = share(result.hints_verified, result.waiting_decisions);
  s.capacity_decisions = result.capacity_decisions;
  s.hinted_capacity_share = share(result.hints_verified, result.capacity_decisions);
  s.hints_verified_share = share(result.hints_verified, result.hints_found);
  s.hints_next_held_share = share(result.hints_next_held, result.hints_next_checked);
  s.cycles = result.cycles;
  s.scheduler_ms_per_cycle =
      result.cycles > 0 ? result.scheduler_ms / static_cast<double>(result.cycles) : 0;
  s.forecasts = result.forecasts;
  if (result.forecasts > 0) {
    s.forecast_cycles_mean =
        static_cast<double>(result.forecast_cycles) / static_cast<double>(result.forecasts);
    s.forecast_ms_mean = result.forecast_ms / static_cast<double>(result.forecasts);
  }
  return s;
}

nlohmann::json ToJson(const Summary& s) {
  nlohmann::json j{{"scheduler", s.scheduler},
                   {"cluster_gpus", s.cluster_gpus},
                   {"all", GroupJson(s.all)},
                   {"makespan_s", s.makespan_s},
                   {"never_started", s.never_started},
                   {"evictions", s.evictions},
                   {"moves", s.moves},
                   {"lost_gpu_hours", s.lost_gpu_hours},
                   {"reclaim_waits", s.reclaim_waits},
                   {"max_reclaim_wait_s", s.max_reclaim_wait_s},
                   {"reclaim_waits_held_otherwise", s.reclaim_waits_held_otherwise},
                   {"max_reclaim_wait_held_otherwise_s", s.max_reclaim_wait_held_otherwise_s},
                   {"etas", s.etas},
                   {"eta_within_25", s.eta_within_25},
                   {"waited", s.waited},
                   {"eta_coverage", s.eta_coverage},
                   {"etas_predicted", s.etas_predicted},
                   {"eta_predicted_within_25", s.eta_predicted_within_25},
                   {"node_failures", s.node_failures},
                   {"failures", s.failures},
                   {"lost_gpu_hours_to_failures", s.lost_gpu_hours_to_failures},
                   {"fairness", FairnessJson(s.fairness)},
                   {"mean_allocation", s.mean_allocation},
                   {"mean_idle_gpus_while_waiting", s.mean_idle_gpus_while_waiting},
                   {"cycles", s.cycles},
                   {"scheduler_ms_per_cycle", s.scheduler_ms_per_cycle}};
  if (s.forecasts > 0) {
    j["forecast"] = {{"forecasts", s.forecasts},
                     {"cycles_mean", s.forecast_cycles_mean},
                     {"ms_mean", s.forecast_ms_mean}};
  }
  if (s.hints_checked) {
    j["hints"] = {{"waiting_decisions", s.waiting_decisions},
                  {"capacity_decisions", s.capacity_decisions},
                  {"hinted_capacity_share", s.hinted_capacity_share},
                  {"found", s.hints_found},
                  {"verified", s.hints_verified},
                  {"next_cycle_checked", s.hints_next_checked},
                  {"hinted_share", s.hinted_share},
                  {"verified_share", s.hints_verified_share},
                  {"next_cycle_held_share", s.hints_next_held_share}};
  }
  for (const auto& [k, g] : s.by_tenant) j["by_tenant"][k] = GroupJson(g);
  for (const auto& [k, w] : s.reclaim_by_tenant) {
    j["reclaim_by_tenant"][k] = {{"reclaim_waits", w.waits},
                                 {"max_reclaim_wait_s", w.max_s},
                                 {"reclaim_waits_held_otherwise", w.held_otherwise},
                                 {"max_reclaim_wait_held_otherwise_s", w.max_held_otherwise_s}};
  }
  for (const auto& [k, g] : s.by_size) j["by_size_gpus"][k] = GroupJson(g);
  for (const auto& [k, f] : s.fairness_by_tenant) j["fairness_by_tenant"][k] = FairnessJson(f);
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
  const bool failed = std::any_of(summaries.begin(), summaries.end(),
                                  [](const Summary& s) { return s.node_failures > 0; });
  if (failed) {
    out += fmt::format("\n{:<10} {:>13} {:>9} {:>14} {:>13}\n", "SCHEDULER", "NODE_FAILURES",
                       "JOBS_HIT", "LOST_GPU_H_FAIL", "LOST_GPU_H_EVICT");
    for (const auto& s : summaries) {
      out += fmt::format("{:<10} {:>13} {:>9} {:>14.1f} {:>13.1f}\n", s.scheduler, s.node_failures,
                         s.failures, s.lost_gpu_hours_to_failures, s.lost_gpu_hours);
    }
  }
  if (std::any_of(summaries.begin(), summaries.end(),
                  [](const Summary& s) { return s.hints_checked; })) {
    out += fmt::format("\n{:<10} {:>9} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>10} {:>9}\n",
                       "SCHEDULER", "WAITING", "HINTED", "CAPACITY", "HINTED", "FOUND", "VERIFIED",
                       "NEXT_CHK", "NEXT_HELD", "ETA_25%");
    for (const auto& s : summaries) {
      if (!s.hints_checked) continue;
      out += fmt::format(
          "{:<10} {:>9} {:>6.1f}% {:>9} {:>6.1f}% {:>7} {:>8.1f}% {:>9} {:>9.1f}% {:>8.1f}%\n",
          s.scheduler, s.waiting_decisions, 100.0 * s.hinted_share, s.capacity_decisions,
          100.0 * s.hinted_capacity_share, s.hints_found, 100.0 * s.hints_verified_share,
          s.hints_next_checked, 100.0 * s.hints_next_held_share, 100.0 * s.eta_within_25);
    }
    out +=
        "(WAITING: decisions leaving a job waiting, one per job per cycle; HINTED: of them, with a "
        "\"would run now if\" shown; CAPACITY: of them, waiting for capacity (NoNodeFits, "
        "Fragmented), and HINTED the share of those with a hint shown; VERIFIED: of the hints "
        "the core found, those a second cycle with the change bore out; NEXT_HELD: of the shown "
        "hints whose job still waited at the next cycle, those that cycle placed with the "
        "change)\n";
  }
  out += fmt::format("\n{:<10} {:<8} {:>6} {:>9} {:>9} {:>9} {:>8} {:>8} {:>6}\n", "SCHEDULER",
                     "TENANT", "JOBS", "JCT_AVG", "WAIT_AVG", "WAIT_P99", "RHO_AVG", "RHO_MAX",
                     "RHO>1");
  for (const auto& s : summaries) {
    for (const auto& [t, g] : s.by_tenant) {
      const auto f = s.fairness_by_tenant.find(t);
      const Fairness rho = f == s.fairness_by_tenant.end() ? Fairness{} : f->second;
      out +=
          fmt::format("{:<10} {:<8} {:>6} {:>9.0f} {:>9.0f} {:>9.0f} {:>8.2f} {:>8.1f} {:>5.0f}%\n",
                      s.scheduler, t, g.jobs, g.jct.mean_s, g.wait.mean_s, g.wait.p99_s,
                      rho.mean_rho, rho.max_rho, 100.0 * rho.share_over_1);
    }
  }
  out +=
      "(RHO: finish-time fairness, completion time over that on an isolated 1/N share of the "
      "cluster; > 1 is worse off than alone)\n";
  if (std::any_of(summaries.begin(), summaries.end(),
                  [](const Summary& s) { return !s.reclaim_by_tenant.empty(); })) {
    out += fmt::format("\n{:<10} {:<8} {:>13} {:>13} {:>14} {:>14}\n", "SCHEDULER", "TENANT",
                       "RECLAIM_WAITS", "LONGEST_H", "HELD_OTHERWISE", "LONGEST_H");
    for (const auto& s : summaries) {
      for (const auto& [t, w] : s.reclaim_by_tenant) {
        out +=
            fmt::format("{:<10} {:<8} {:>13} {:>13.2f} {:>14} {:>14.2f}\n", s.scheduler, t, w.waits,
                        w.max_s / 3600.0, w.held_otherwise, w.max_held_otherwise_s / 3600.0);
      }
    }
    out +=
        "(RECLAIM_WAITS: starts after the job first needed to reclaim lent GPUs; the longest "
        "wait from that first need is bounded by the policy's reclaim_grace plus one cycle. "
        "HELD_OTHERWISE: such jobs also held back in some cycle by their queue's order or "
        "quota, which the grace does not bound)\n";
  }
  return out;
}

}  // namespace berth::sim
