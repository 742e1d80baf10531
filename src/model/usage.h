// Metering: what each run of each replica held, for how long, and what it
// cost (docs/metering.md). Pure value types and arithmetic, no I/O: the
// server builds UsageRecords from the store's runs, prices them with the
// price versions, and groups them into reports here.
//
// Exact by construction: GPU time is integer milli-GPU-milliseconds
// (1000 mGPU for one whole GPU, a slice's share for a shared one), money is
// integer micro-units of the price table's currency. A record is cut into
// pieces at every price change and every UTC midnight; each piece is priced
// once (rounded half up to a micro-unit) and a record's cost is the sum of
// its pieces, so any grouping (by tenant, day or month) sums whole pieces and
// the totals of a report equal the sum of its records exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace berth::model {

// Intermediate products (mGPU-ms x micro-units) need 128 bits.
__extension__ typedef __int128 Int128;

// Milli-GPU-milliseconds in one GPU-hour.
inline constexpr std::int64_t kMgpuMsPerGpuHour = std::int64_t{1000} * 3'600'000;
inline constexpr std::int64_t kMicrosPerUnit = 1'000'000;

// --- prices ---

// One line of a price table: `model` ("*" for any) in `pool` ("*" for any).
struct PriceEntry {
  std::string model;
  std::string pool = "*";
  std::int64_t micros_per_gpu_hour = 0;
  bool operator==(const PriceEntry&) const = default;
};

struct PriceTable {
  std::string currency = "USD";
  // For a GPU no entry matches.
  std::int64_t default_micros_per_gpu_hour = 0;
  std::vector<PriceEntry> prices;
  bool operator==(const PriceTable&) const = default;
};

// One applied version; versions are append-only and the newest whose
// applied_ms is at or before a moment is the one in effect then.
struct PriceVersion {
  std::int64_t version = 0;
  TimeMs applied_ms = 0;
  PriceTable table;
};

// YAML: `currency: USD`, `default: 1.00` (per GPU-hour), and
// `prices: [{model: H100-80GB, pool: default, per_gpu_hour: 2.50}]` (pool
// optional, "*" for any). Unknown keys, negative or malformed amounts and
// duplicate (model, pool) lines are errors naming the field.
Result<PriceTable> ParsePriceTable(std::string_view yaml);
// The largest amount ParseMoney takes, in whole units (10^18 micro-units).
inline constexpr std::int64_t kMaxMoneyUnits = 1'000'000'000'000;
// "2.50" -> 2'500'000; at most six decimals, from 0 to kMaxMoneyUnits.
// Errors name `field`.
Result<std::int64_t> ParseMoney(std::string_view text, const std::string& field);
// 2'500'000 -> "2.50"; keeps every significant decimal (at least two).
std::string FormatMoney(std::int64_t micros);
// The most specific line: model and pool, then model in any pool, then any
// model in the pool, then the default.
std::int64_t PriceFor(const PriceTable& table, std::string_view gpu_model, std::string_view pool);

// --- records ---

// A span of a record priced under one version (0: no price table yet), within
// one UTC day.
struct UsagePiece {
  TimeMs start_ms = 0;
  TimeMs end_ms = 0;
  std::int64_t mgpu_ms = 0;
  std::int64_t price_version = 0;
  std::int64_t micros_per_gpu_hour = 0;
  std::int64_t cost_micros = 0;
  // From GPU telemetry (MeasureRecord); zero when the piece was not sampled.
  bool measured = false;
  std::int64_t used_mgpu_ms = 0;  // mgpu_ms weighted by measured utilization
  std::int64_t idle_mgpu_ms = 0;  // mgpu_ms while utilization was under the idle threshold
  std::int64_t used_cost_micros = 0;
  std::int64_t idle_cost_micros = 0;
};

// What telemetry measured on a run's GPUs over a piece: sample counts, so
// the weighting is an exact quotient.
struct PieceMeasure {
  std::int64_t samples = 0;
  std::int64_t util_sum = 0;      // sum of whole-percent utilization readings
  std::int64_t idle_samples = 0;  // readings under the idle threshold
};

// One run of one replica: what it held, where, for whom and from when.
struct UsageRecord {
  std::string run_id;
  std::int64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::string tenant;
  std::string queue;
  std::string user;     // the job's submitted_by; "" for jobs before schema 5
  std::string service;  // a service's replica: its service's name; else ""
  std::string pool;     // "" when no pool of the policy matches the node
  std::string node;
  std::vector<std::string> gpu_uuids;
  std::string gpu_model;
  std::int64_t mgpu = 0;  // 1000 per whole GPU; a slice's share
  TimeMs start_ms = 0;
  TimeMs end_ms = 0;  // for an open record, the moment it was reported
  bool open = false;  // still running
  // How it ended: "" (open or succeeded), a stopped_for ("preempted", ...),
  // or the failure class of a failed run.
  std::string outcome;
  // Filled by PriceRecord.
  std::vector<UsagePiece> pieces;
  std::int64_t mgpu_ms = 0;
  std::int64_t cost_micros = 0;
  // Filled by MeasureRecord: sums of the measured pieces.
  std::int64_t measured_mgpu_ms = 0;  // allocated time that telemetry covered
  std::int64_t used_mgpu_ms = 0;
  std::int64_t idle_mgpu_ms = 0;
  std::int64_t used_cost_micros = 0;
  std::int64_t idle_cost_micros = 0;
  // The longest stretch its GPUs stayed under the idle threshold, and whether
  // that reached the idle window (an idle allocation).
  std::int64_t longest_idle_ms = 0;
  bool idle = false;
};

// Cuts the record into pieces at price changes (`versions` oldest first) and
// UTC midnights, prices each and sums them.
void PriceRecord(UsageRecord& record, const std::vector<PriceVersion>& versions);
// The record's part inside [from, to) (re-priced), or nullopt if none.
std::optional<UsageRecord> ClipRecord(const UsageRecord& record, TimeMs from, TimeMs to,
                                      const std::vector<PriceVersion>& versions);
// Weights each priced piece by what telemetry measured over it (`measures`,
// one per piece in order; nullopt or no samples: unmeasured) and sums the
// record. used = mgpu_ms x util_sum / (100 x samples), idle = mgpu_ms x
// idle_samples / samples, and the same fractions of the piece's cost, each
// rounded down, so rows and totals reconcile exactly with the records.
void MeasureRecord(UsageRecord& record, const std::vector<std::optional<PieceMeasure>>& measures);

// --- reports ---

// kService: "tenant/name" of the inference service a replica runs for; ""
// for every other job.
enum class UsageKey { kTenant, kQueue, kUser, kPool, kModel, kNode, kDay, kMonth, kService };
std::string_view UsageKeyName(UsageKey key);
// "tenant,day" (or repeated values joined by commas); unknown names are an
// error listing the valid ones.
Result<std::vector<UsageKey>> ParseUsageKeys(std::string_view text);

struct UsageRow {
  std::vector<std::string> key;  // one value per UsageKey, in order
  std::int64_t mgpu_ms = 0;
  std::int64_t cost_micros = 0;
  std::int64_t measured_mgpu_ms = 0;
  std::int64_t used_mgpu_ms = 0;
  std::int64_t idle_mgpu_ms = 0;
  std::int64_t used_cost_micros = 0;
  std::int64_t idle_cost_micros = 0;
  std::int64_t runs = 0;       // distinct runs with a piece in the row
  std::int64_t idle_runs = 0;  // distinct idle allocations (UsageRecord::idle) in the row
};

struct UsageReport {
  std::vector<UsageKey> keys;
  std::vector<UsageRow> rows;  // sorted by key
  UsageRow total;              // key empty
};

// Groups the pieces of priced records by `keys`.
UsageReport Aggregate(const std::vector<UsageRecord>& records, const std::vector<UsageKey>& keys);

// --- calendar (UTC) ---
std::string DayOf(TimeMs t);    // "2026-11-30"
std::string MonthOf(TimeMs t);  // "2026-11"
TimeMs DayStart(TimeMs t);
TimeMs MonthStart(TimeMs t);
TimeMs NextMonthStart(TimeMs t);

// --- budgets ---

// A tenant's monthly budget: GPU-hours (as mGPU-ms) or money, not both.
struct Budget {
  std::string tenant;
  std::optional<std::int64_t> mgpu_ms;
  std::optional<std::int64_t> cost_micros;
  std::vector<std::int32_t> alert_percents;  // ascending, e.g. 50, 80, 100
  bool enforce = false;                      // low-priority jobs wait when over
  TimeMs set_ms = 0;
  std::string set_by;
};

// A budget against one month's usage. Used and limit share one scale:
// micro-GPU-hours or micro-units of money.
struct BudgetState {
  Budget budget;
  std::string month;
  std::int64_t used_micros = 0;
  std::int64_t limit_micros = 0;
  bool over = false;                           // used >= limit
  std::vector<std::int32_t> crossed_percents;  // alert thresholds reached
};
BudgetState EvaluateBudget(const Budget& budget, std::string month, std::int64_t used_mgpu_ms,
                           std::int64_t used_cost_micros);

}  // namespace berth::model
