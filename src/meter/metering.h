// Usage records, reports and budgets (docs/metering.md): derives one
// model::UsageRecord per run of each replica from the store's runs, the
// nodes' inventory and the active policy's pools, prices it with the price
// versions, and checks tenants' budgets. The API reads through it; the
// controller asks it each pass (at most once a second) which tenants are
// over an enforced budget.
#pragma once

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/reason.h"
#include "model/usage.h"
#include "store/meter_store.h"
#include "store/store.h"
#include "store/telemetry_store.h"

namespace berth::server {
class AlertRouter;  // alerting.h
}

namespace berth::server {

class Meter {
 public:
  Meter(store::MeterStore& meter_store, store::Store& store)
      : meter_store_(meter_store), store_(store) {}

  store::MeterStore& meter_store() { return meter_store_; }
  // Where budget alerts are raised (under the first enabled `budget` rule);
  // null: none are. Set before the controller starts.
  void set_alerts(AlertRouter* alerts) { alerts_ = alerts; }

  // Where measured utilization comes from (null: unmeasured, used and idle
  // stay zero), and how long a run's GPUs must stay idle for its record to
  // be flagged an idle allocation.
  void set_telemetry(store::TelemetryStore* telemetry, std::int64_t idle_window_ms) {
    telemetry_ = telemetry;
    idle_window_ms_ = idle_window_ms;
  }
  bool measured() const { return telemetry_ != nullptr; }
  std::int64_t idle_window_ms() const { return idle_window_ms_; }

  // Every run's record clipped to [from, to) and priced; an open run ends at
  // `now` (when that is before `to`). Only runs of tenants in `scope` are
  // read; `tenant` empty: all of those. With `measure`
  // and telemetry, each piece is weighted by its GPUs' measured utilization
  // (model::MeasureRecord) and idle allocations are flagged. At most
  // `max_runs` runs are read (MeterStore::UsageRuns).
  [[nodiscard]] Result<std::vector<model::UsageRecord>> Records(
      TimeMs from, TimeMs to, const std::string& tenant, const model::TenantScope& scope,
      TimeMs now, bool measure = true,
      std::size_t max_runs = std::numeric_limits<std::int64_t>::max());
  // Fills records' measured figures from telemetry (see Records); records
  // must come from Records(from, to, ...). No telemetry: unchanged.
  [[nodiscard]] Status Measure(std::vector<model::UsageRecord>& records, TimeMs from, TimeMs to);
  [[nodiscard]] Result<std::vector<model::PriceVersion>> Prices();
  // Every budget of a tenant in `scope` against its tenant's usage in the
  // month of `now`.
  [[nodiscard]] Result<std::vector<model::BudgetState>> Budgets(TimeMs now,
                                                                const model::TenantScope& scope);
  // Budgets() plus an alert for each threshold crossed this month (once per
  // threshold per month). Returns the reason a low-priority job of each
  // tenant over an enforced budget waits with.
  [[nodiscard]] Result<std::map<std::string, model::Reason>> CheckBudgets(TimeMs now);

 private:
  store::MeterStore& meter_store_;
  store::Store& store_;
  AlertRouter* alerts_ = nullptr;
  store::TelemetryStore* telemetry_ = nullptr;
  std::int64_t idle_window_ms_ = 30 * 60 * 1000;
};

// The kOverBudget reason for a budget state.
model::Reason OverBudgetReason(const model::BudgetState& state, const std::string& currency);

}  // namespace berth::server
