// GPU telemetry (docs/metering.md, "Telemetry"): what an agent samples on
// each GPU at its telemetry interval, and the load profile a job declares so
// the simulated GPU provider has something true-to-life to report.
//
// Units are integers so sums stay exact: utilization in whole percent,
// memory in bytes, temperature in degrees Celsius, power in milliwatts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"

namespace berth::model {

// One reading of one GPU. `run_ids` are the runs occupying the GPU when it
// was read (several for a shared GPU's slices; empty when idle), as the
// agent knows them from its start orders.
struct GpuSample {
  TimeMs at_ms = 0;
  std::string node;
  std::uint32_t gpu = 0;  // node-local index
  std::string uuid;
  std::uint32_t util_pct = 0;      // SM utilization, 0-100
  std::uint32_t mem_util_pct = 0;  // memory controller utilization, 0-100
  std::uint64_t memory_used_bytes = 0;
  std::uint64_t memory_total_bytes = 0;
  std::int32_t temperature_c = 0;
  std::uint32_t power_mw = 0;
  std::uint64_t ecc_sbe_total = 0;  // volatile single-bit errors since boot
  std::uint64_t ecc_dbe_total = 0;  // volatile double-bit errors since boot
  std::uint32_t last_xid = 0;       // the last Xid event seen, 0: none
  std::vector<std::string> run_ids;
  bool operator==(const GpuSample&) const = default;
};

// How a job loads its GPUs, declared in its spec (`load:`) and honoured only
// by the simulated GPU provider; real GPUs report what they measure. The
// default (no `load:` block) is a steady 80% with 50% of memory.
enum class LoadPattern {
  kSteady,    // util_pct throughout
  kPeriodic,  // util_pct for the first half of every period_ms, idle_util_pct after
  kIdle,      // idle_util_pct throughout (an allocation nobody uses)
};

struct LoadProfile {
  LoadPattern pattern = LoadPattern::kSteady;
  std::uint32_t util_pct = 80;
  std::uint32_t idle_util_pct = 0;
  std::uint32_t memory_pct = 50;  // of each GPU's (or slice's) memory
  std::int64_t period_ms = 60'000;
  // After this long the run's GPUs go idle (a notebook left open); 0: never.
  std::int64_t idle_after_ms = 0;
  bool operator==(const LoadProfile&) const = default;
};

// What the simulated provider reads for a GPU running under `profile`,
// `elapsed_ms` after the run started: utilization in percent.
std::uint32_t ProfileUtilization(const LoadProfile& profile, std::int64_t elapsed_ms);

}  // namespace berth::model
