// Berth's own job history as a berth-sim workload: the document berthd's
// GET /v1/history returns and `berth history export` writes (docs/api.md
// describes its fields). Policy preview on berthd reads it through the same
// function, so a preview and an offline replay of an export agree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "sched/snapshot.h"
#include "sim/trace.h"

namespace berth::sim {

// The `format` value of a history document this reader understands.
inline constexpr std::string_view kHistoryFormat = "berth-history/1";

struct History {
  TimeMs since_ms = 0;
  TimeMs until_ms = 0;
  TimeMs exported_ms = 0;
  // The policy that was active at the export, verbatim (may be empty).
  std::int64_t policy_version = 0;
  std::string policy_yaml;
  // Every node of the export, each counted ready: a replay asks what the
  // inventory would have done, not what one lease said at one instant.
  std::vector<sched::NodeView> nodes;
  // Jobs that ran, in submit order, ids 1..; `name` is the Berth job id.
  std::vector<SimJob> jobs;
  // Sim job id -> the GPU model its last started run held ("" if CPU-only
  // or unknown): what a price table charges for a job that named no model.
  std::map<std::int64_t, std::string> gpu_model;
  // Jobs in the window that no run ever started (still pending, cancelled
  // while pending, failed to start): they have no run time to replay.
  std::int64_t never_ran = 0;
  // Jobs still running at the export: their run time counts up to
  // exported_ms, a lower bound (the replay ends them there).
  std::int64_t still_running = 0;
};

// The run time a job's history gives it: the sum over its attempts of each
// attempt's span (earliest replica start to latest replica end), leaving
// out attempts that were evicted (stopped_for "preempted" or "reclaimed"):
// the history does not say when a job last checkpointed, so an evicted
// attempt's work counts as thrown away, and the replay makes its own
// evictions. A run still going ends at
// `exported_ms`. Runs that never started count nothing.
Result<History> ReadHistory(const nlohmann::json& doc);
Result<History> ReadHistoryFile(const std::filesystem::path& path);

}  // namespace berth::sim
