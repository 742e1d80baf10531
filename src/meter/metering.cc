#include "meter/metering.h"

#include <fmt/format.h>

#include <algorithm>

#include "meter/alerting.h"

namespace berth::server {
namespace {

bool Matches(const std::map<std::string, std::string>& labels,
             const std::map<std::string, std::string>& selector) {
  return std::all_of(selector.begin(), selector.end(), [&](const auto& kv) {
    auto it = labels.find(kv.first);
    return it != labels.end() && it->second == kv.second;
  });
}

std::string Outcome(const store::UsageRun& run) {
  if (!run.finished_ms) return "running";
  if (run.stopped_for != model::StopCause::kNone) {
    return std::string(model::StopCauseName(run.stopped_for));
  }
  if (!run.failure_class.empty()) return run.failure_class;
  if (run.exit_code.value_or(0) != 0 || run.signal.value_or(0) != 0) return "failed";
  return "succeeded";
}

// The start of the telemetry minute bucket holding `t`.
TimeMs FloorMinute(TimeMs t) {
  return t - ((t % 60'000) + 60'000) % 60'000;
}

std::string Unit(const model::Budget& b, const std::string& currency) {
  return b.mgpu_ms ? "GPU-hours" : currency;
}

}  // namespace

Result<std::vector<model::PriceVersion>> Meter::Prices() {
  auto stored = meter_store_.PriceVersions();
  if (!stored) return std::unexpected(stored.error());
  std::vector<model::PriceVersion> out;
  out.reserve(stored->size());
  for (auto& v : *stored) out.push_back(std::move(v.price));
  return out;
}

Result<std::vector<model::UsageRecord>> Meter::Records(TimeMs from, TimeMs to,
                                                       const std::string& tenant,
                                                       const model::TenantScope& scope, TimeMs now,
                                                       bool measure, std::size_t max_runs) {
  auto runs = meter_store_.UsageRuns(from, std::min(to, now + 1), tenant, scope, max_runs);
  if (!runs) return std::unexpected(runs.error());
  auto nodes = store_.ListNodes();
  if (!nodes) return std::unexpected(nodes.error());
  auto policy = store_.ActivePolicy();
  if (!policy) return std::unexpected(policy.error());
  auto prices = Prices();
  if (!prices) return std::unexpected(prices.error());
  std::map<std::string, const model::NodeInfo*> by_name;
  for (const auto& n : *nodes) by_name[n.info.name] = &n.info;

  std::vector<model::UsageRecord> out;
  out.reserve(runs->size());
  for (auto& run : *runs) {
    model::UsageRecord r;
    r.run_id = run.run_id;
    r.job_id = run.job_id;
    r.replica = run.replica;
    r.attempt = run.attempt;
    r.tenant = run.tenant;
    r.queue = run.queue;
    r.user = run.user;
    r.service = run.service;
    r.node = run.node;
    r.gpu_uuids = run.gpu_uuids;
    r.start_ms = run.started_ms;
    r.open = !run.finished_ms.has_value();
    r.end_ms = run.finished_ms.value_or(std::max(now, run.started_ms));
    r.outcome = Outcome(run);
    r.pool = run.job_pool;
    std::uint64_t gpu_memory = 0;
    if (auto it = by_name.find(run.node); it != by_name.end()) {
      const model::NodeInfo& info = *it->second;
      if (r.pool.empty()) {
        for (const auto& p : policy->policy.pools) {
          if (Matches(info.labels, p.selector)) {
            r.pool = p.name;
            break;
          }
        }
      }
      if (!run.gpu_indices.empty()) {
        for (const auto& g : info.gpus) {
          if (g.index == run.gpu_indices.front()) {
            r.gpu_model = g.model;
            gpu_memory = g.memory_bytes;
          }
        }
      }
    }
    if (run.gpu_share_millis > 0) {
      r.mgpu = run.gpu_share_millis;
    } else if (run.gpu_share_bytes > 0 && gpu_memory > 0) {
      // A memory slice is priced by its share of the card's memory.
      r.mgpu = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(run.gpu_share_bytes * 1000 / gpu_memory));
    } else {
      r.mgpu = static_cast<std::int64_t>(run.gpu_indices.size()) * 1000;
    }
    auto clipped = model::ClipRecord(r, from, to, *prices);
    if (clipped) out.push_back(std::move(*clipped));
  }
  if (measure) BERTH_RETURN_IF_ERROR(Measure(out, from, to));
  return out;
}

// A piece's measure comes from the telemetry buckets whose start lies in the
// piece's window, its start floored to the minute (so a bucket straddling a
// price change or the window's start informs the pieces on both sides; hour
// buckets, kept past the minute retention, count from the first whole hour). Pieces are cut at UTC
// midnights, price changes and the run's own start and end; a run has no buckets outside its life,
// so every piece can be measured over its day-and-price window clipped to [from, to) instead of its
// exact span. Those windows are shared by all runs, so the store is asked once per window (about
// one per day and price version), not once per piece.
Status Meter::Measure(std::vector<model::UsageRecord>& records, TimeMs from, TimeMs to) {
  if (telemetry_ == nullptr || records.empty()) return {};
  auto prices = Prices();
  if (!prices) return std::unexpected(prices.error());
  auto window_of = [&](const model::UsagePiece& p) {
    TimeMs lo = std::max(from, model::DayStart(p.start_ms));
    TimeMs hi = std::min(to, model::DayStart(p.start_ms) + 24 * 3600 * 1000);
    for (const auto& v : *prices) {
      if (v.applied_ms <= p.start_ms) lo = std::max(lo, v.applied_ms);
      if (v.applied_ms >= p.end_ms) hi = std::min(hi, v.applied_ms);
    }
    // Buckets start on the minute: the one holding `lo` starts before it.
    return std::pair{FloorMinute(lo), hi};
  };
  std::map<std::pair<TimeMs, TimeMs>, std::vector<std::string>> runs_by_window;
  std::vector<std::string> all_runs;
  for (const auto& r : records) {
    all_runs.push_back(r.run_id);
    for (const auto& p : r.pieces) runs_by_window[window_of(p)].push_back(r.run_id);
  }
  std::map<std::pair<TimeMs, TimeMs>, std::map<std::string, store::UtilSummary>> measured;
  for (const auto& [window, ids] : runs_by_window) {
    auto summaries = telemetry_->RunSummaries(ids, window.first, window.second);
    if (!summaries) return std::unexpected(summaries.error());
    measured[window] = std::move(*summaries);
  }
  auto whole = telemetry_->RunSummaries(all_runs, FloorMinute(from), to);
  if (!whole) return std::unexpected(whole.error());
  for (auto& r : records) {
    std::vector<std::optional<model::PieceMeasure>> measures;
    measures.reserve(r.pieces.size());
    for (const auto& p : r.pieces) {
      const auto& in_window = measured[window_of(p)];
      auto it = in_window.find(r.run_id);
      if (it == in_window.end()) {
        measures.emplace_back(std::nullopt);
        continue;
      }
      measures.push_back(model::PieceMeasure{.samples = it->second.samples,
                                             .util_sum = it->second.util_sum,
                                             .idle_samples = it->second.idle_samples});
    }
    model::MeasureRecord(r, measures);
    if (auto it = whole->find(r.run_id); it != whole->end()) {
      r.longest_idle_ms = it->second.longest_idle_ms;
      r.idle = idle_window_ms_ > 0 && r.longest_idle_ms >= idle_window_ms_;
    }
  }
  return {};
}

Result<std::vector<model::BudgetState>> Meter::Budgets(TimeMs now,
                                                       const model::TenantScope& scope) {
  auto budgets = meter_store_.ListBudgets(scope);
  if (!budgets) return std::unexpected(budgets.error());
  std::vector<model::BudgetState> out;
  if (budgets->empty()) return out;
  const TimeMs from = model::MonthStart(now);
  auto records = Records(from, now, "", scope, now, /*measure=*/false);
  if (!records) return std::unexpected(records.error());
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> used;  // mgpu_ms, cost
  for (const auto& r : *records) {
    used[r.tenant].first += r.mgpu_ms;
    used[r.tenant].second += r.cost_micros;
  }
  for (const auto& b : *budgets) {
    const auto& u = used[b.tenant];
    out.push_back(model::EvaluateBudget(b, model::MonthOf(now), u.first, u.second));
  }
  return out;
}

Result<std::map<std::string, model::Reason>> Meter::CheckBudgets(TimeMs now) {
  std::map<std::string, model::Reason> over;
  auto states = Budgets(now, model::TenantScope::All());
  if (!states) return std::unexpected(states.error());
  if (states->empty()) return over;
  std::string currency = "USD";
  auto prices = Prices();
  if (!prices) return std::unexpected(prices.error());
  if (!prices->empty()) currency = prices->back().table.currency;
  for (const auto& s : *states) {
    for (std::int32_t pct : s.crossed_percents) {
      const std::string message =
          fmt::format("tenant {} reached {}% of its budget for {}: used {} of {} {}{}",
                      s.budget.tenant, pct, s.month, model::FormatMoney(s.used_micros),
                      model::FormatMoney(s.limit_micros), Unit(s.budget, currency),
                      s.budget.enforce && pct >= 100
                          ? "; its new low-priority jobs wait until next month or a larger budget"
                          : "");
      if (alerts_ == nullptr) continue;
      // Once per threshold per month, whether or not the last one was resolved.
      store::Alert alert;
      alert.subject = fmt::format("{}/{}/{}", s.budget.tenant, s.month, pct);
      alert.message = message;
      alert.raised_ms = now;
      // The rule's severity below 100%; a budget used up is critical.
      std::optional<model::AlertSeverity> severity;
      if (pct >= 100) severity = model::AlertSeverity::kCritical;
      auto id = alerts_->Raise(model::AlertRuleKind::kBudget, std::move(alert),
                               store::AlertDedupe::kEver, severity);
      if (!id) return std::unexpected(id.error());
    }
    if (s.over && s.budget.enforce) over[s.budget.tenant] = OverBudgetReason(s, currency);
  }
  return over;
}

model::Reason OverBudgetReason(const model::BudgetState& s, const std::string& currency) {
  model::Reason r;
  r.code = model::ReasonCode::kOverBudget;
  r.counts[std::string(model::kBudgetUsed)] = s.used_micros;
  r.counts[std::string(model::kBudgetLimit)] = s.limit_micros;
  r.detail = fmt::format("{} {}", s.month, Unit(s.budget, currency));
  return r;
}

}  // namespace berth::server
