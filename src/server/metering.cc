#include "server/metering.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/alerting.h"

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
  if (!run.stopped_for.empty()) return run.stopped_for;
  if (!run.failure_class.empty()) return run.failure_class;
  if (run.exit_code.value_or(0) != 0 || run.signal.value_or(0) != 0) return "failed";
  return "succeeded";
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
                                                       const std::string& tenant, TimeMs now) {
  auto runs = meter_store_.UsageRuns(from, std::min(to, now + 1), tenant);
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
  return out;
}

Result<std::vector<model::BudgetState>> Meter::Budgets(TimeMs now) {
  auto budgets = meter_store_.ListBudgets();
  if (!budgets) return std::unexpected(budgets.error());
  std::vector<model::BudgetState> out;
  if (budgets->empty()) return out;
  const TimeMs from = model::MonthStart(now);
  auto records = Records(from, now, "", now);
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
  auto states = Budgets(now);
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
      if (pct >= 100) alert.severity = "critical";
      auto id =
          alerts_->Raise(model::AlertKind::kBudget, std::move(alert), store::AlertDedupe::kEver);
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
