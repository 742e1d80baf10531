// Feeds berthd's run-time predictor (sched/runtime_estimate.h) from the
// store's finished jobs, bounded and incremental: the first refresh reads
// the newest `initial_jobs` finished jobs, later ones (at most one per
// `refresh_ms`) the newest `batch_jobs`, and only jobs finished after the
// last one learnt are fed. A job that finishes while more than
// `batch_jobs` jobs of higher id finish within one refresh is missed: a
// prediction loses one sample, never correctness.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "common/clock.h"
#include "common/status.h"
#include "sched/runtime_estimate.h"
#include "store/store.h"

namespace berth::server {

struct RuntimeFeedOptions {
  std::size_t initial_jobs = 5'000;
  std::size_t batch_jobs = 500;
  TimeMs refresh_ms = 60'000;
  sched::RuntimeHistoryOptions history{};
};

// What a finished job teaches: its tenant, submitter, name and shape, and
// the length of its last attempt (from its runs; the job's own start and
// end when it has none). nullopt: nothing (not finished, never started).
std::optional<sched::RuntimeRecord> RuntimeRecordOf(const store::JobRecord& job);

class RuntimeFeed {
 public:
  explicit RuntimeFeed(RuntimeFeedOptions options = {});
  // Reads what finished since the last refresh, unless the last one was
  // less than refresh_ms ago.
  Status Refresh(store::JobStore& store, TimeMs now);
  const sched::RuntimeHistory& history() const { return history_; }

 private:
  RuntimeFeedOptions options_;
  sched::RuntimeHistory history_;
  bool started_ = false;
  TimeMs last_refresh_ms_ = 0;
  TimeMs fed_until_ms_ = 0;            // the latest finish learnt
  std::set<std::int64_t> fed_at_end_;  // jobs learnt that finished at fed_until_ms_
};

}  // namespace berth::server
