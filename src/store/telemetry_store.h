// GPU telemetry history (docs/metering.md, "Telemetry"): what berthd keeps
// of the samples agents stream. Compact by construction:
//  * the newest raw sample of each GPU is kept in memory (for /metrics and
//    `berth gpus`);
//  * samples are folded in memory into one bucket per GPU, minute and set of
//    occupying runs; closed minutes are written to berth.db in one
//    transaction per flush (table telemetry_1m);
//  * minute buckets older than the minute retention are rolled up into hour
//    buckets (telemetry_1h) and deleted; hour buckets older than the hour
//    retention are deleted.
// Everything is integer sums and maxima, so averages over any window are
// exact quotients of what was sampled.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/telemetry.h"
#include "store/sqlite_db.h"

namespace berth::store {

// Readings of one GPU over one bucket (a minute or an hour) while one set of
// runs occupied it.
struct GpuBucket {
  std::string node;
  std::uint32_t gpu = 0;
  std::string uuid;
  TimeMs start_ms = 0;  // the bucket's first millisecond (minute- or hour-aligned)
  std::int64_t width_ms = 60'000;
  std::vector<std::string> run_ids;  // sorted; empty: no run held the GPU
  std::int64_t samples = 0;
  std::int64_t util_sum = 0;  // sum of util_pct over the samples
  std::uint32_t util_max = 0;
  std::int64_t mem_util_sum = 0;
  std::uint64_t memory_used_sum = 0;  // bytes, summed over the samples
  std::uint64_t memory_used_max = 0;
  std::uint64_t memory_total_bytes = 0;
  std::int32_t temperature_max_c = 0;
  std::uint64_t power_sum_mw = 0;
  std::uint64_t ecc_dbe_max = 0;
  std::uint32_t last_xid = 0;
  // Samples whose utilization was under the idle threshold.
  std::int64_t idle_samples = 0;
};

// A window's readings summed: what `berth job`, `berth usage` and the
// operations report show.
struct UtilSummary {
  std::int64_t samples = 0;
  std::int64_t util_sum = 0;
  std::uint32_t util_max = 0;
  std::int64_t mem_util_sum = 0;
  std::uint64_t memory_used_sum = 0;
  std::uint64_t memory_used_max = 0;
  std::uint64_t memory_total_bytes = 0;  // of one GPU (the largest seen)
  std::int64_t idle_samples = 0;
  TimeMs first_ms = 0;  // first sampled bucket's start; 0 when no samples
  TimeMs last_ms = 0;   // last sampled bucket's end
  // The longest stretch of adjacent time slots in which every bucket was
  // idle (all its samples under the idle threshold), in milliseconds of
  // bucket width: what flags an idle allocation. A slot is one bucket start
  // across the summed GPUs; a gap in sampling ends a stretch.
  std::int64_t longest_idle_ms = 0;
  // Adds another window's readings: sums add, maxima and the span widen.
  // longest_idle_ms is left alone (stretches do not add across windows).
  void Add(const UtilSummary& other);
  // Whole-percent averages; 0 when nothing was sampled.
  double AvgUtilPct() const;
  double AvgMemoryUsedBytes() const;
  // Share of samples under the idle threshold, 0-1.
  double IdleFraction() const;
};

struct TelemetryOptions {
  std::int64_t minute_retention_ms = std::int64_t{7} * 24 * 3600 * 1000;  // 7 days
  std::int64_t hour_retention_ms = std::int64_t{400} * 24 * 3600 * 1000;  // 400 days
  std::uint32_t idle_util_pct = 5;  // a sample under this is idle
};

class TelemetryStore {
 public:
  // Opens `<data_dir>/berth.db` on a connection of its own, creating the
  // telemetry tables if needed.
  static Result<std::unique_ptr<TelemetryStore>> Open(const StoreLocation& where,
                                                      TelemetryOptions options);
  ~TelemetryStore();

  // Folds samples into the open minute buckets and the latest-sample map.
  // Thread-safe; never touches the database (cheap enough to call from the
  // agent stream). A sample older than the newest flushed minute of its GPU
  // is counted in `late` and dropped.
  void Ingest(std::span<const model::GpuSample> samples);
  // Writes every bucket whose minute ended before `now`, then applies
  // retention (rolls minutes into hours, drops expired hours). berthd calls
  // it every few seconds; tests call it to make samples queryable.
  [[nodiscard]] Status Flush(TimeMs now);

  // The newest sample of every GPU that reported since berthd started.
  std::vector<model::GpuSample> Latest() const;

  // One GPU's buckets overlapping [from, to), oldest first: minute buckets
  // where kept, hour buckets before; merged to `step_ms` (a multiple of a
  // minute; 0: as stored). Includes unflushed minutes.
  [[nodiscard]] Result<std::vector<GpuBucket>> GpuHistory(const std::string& uuid, TimeMs from,
                                                          TimeMs to, std::int64_t step_ms);
  // Per run: its GPUs' readings over [from, to) (buckets whose run set
  // contains the run). Runs with no samples are absent. Includes unflushed
  // minutes.
  [[nodiscard]] Result<std::map<std::string, UtilSummary>> RunSummaries(
      std::span<const std::string> run_ids, TimeMs from, TimeMs to);
  // Every GPU's readings over [from, to), summed (the fleet's utilization).
  [[nodiscard]] Result<UtilSummary> FleetSummary(TimeMs from, TimeMs to);

  // Under this SM utilization a sample counts as idle (TelemetryOptions).
  std::uint32_t idle_util_pct() const;
  std::int64_t ingested() const;  // samples accepted since start
  std::int64_t late() const;      // samples dropped as late

 private:
  struct Impl;
  explicit TelemetryStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace berth::store
