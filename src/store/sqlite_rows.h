// Row readers shared by the SQLite store's files: the column lists of the
// jobs and runs tables as the store selects them, and the functions that
// turn one selected row into a JobRecord or RunRecord. Internal to
// src/store/.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/sqlite_db.h"
#include "store/store.h"

namespace berth::store {

inline constexpr std::string_view kRunColumns =
    "run_id, job_id, replica, attempt, node, gpu_indices, gpu_uuids, state, pid, started_ms, "
    "finished_ms, exit_code, signal, stopped_for, start_error, stop_requested, gpu_share_millis, "
    "gpu_share_bytes, last_checkpoint_ms, clean_stop, failure_class, stop_detail, port, ready, "
    "probe_detail, ready_changed_ms";

inline constexpr std::string_view kJobColumns =
    "id, spec, state, reason, submitted_ms, started_ms, finished_ms, exit_code, signal, "
    "cancel_requested, policy_version, failures, retry_after_ms, submitted_by, cancelled_by, "
    "attempts";

// A row limit as LIMIT takes it: the largest int64 for a limit past what
// an int64 holds (the filters' default, "no limit"). Not -1, which SQLite
// reads as "none" but PostgreSQL refuses.
inline std::int64_t SqlLimit(std::size_t limit) {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(std::min(limit, kMax));
}

// A reason as the jobs table keeps it: JSON without the message, which is
// rendered at read time, in the reader's language.
std::string ReasonText(const model::Reason& r);

// A row selected with kRunColumns.
RunRecord ReadRun(const Statement& st);

// A row selected with kJobColumns. `specs`, when given, caches parsed specs
// by id (SqliteStore::specs_): only for rows read outside any write
// transaction, which are committed and so keep their id and spec for good.
JobRecord ReadJob(const Statement& st,
                  std::unordered_map<std::int64_t, model::JobSpec>* specs = nullptr);

// Fills every job's `runs` (ordered by attempt, replica) with one query per
// 1,000 jobs rather than one per job.
[[nodiscard]] Status LoadRunsOf(Database& db, std::vector<JobRecord>& jobs);

}  // namespace berth::store
