// Run-time estimates without an oracle (issue 22, item 1): how long a job
// will hold its GPUs, predicted from the run times of finished jobs like it,
// as Helios' QSSF does. Pure: the caller (berthd's snapshot builder, the
// simulator's replay) feeds finished runs in and asks for predictions.
//
// A prediction names its basis: the most specific key with at least
// `min_samples` recent runs wins, in this order:
//   user + job name      the same job submitted again
//   user + shape         the user's jobs of the same GPUs x replicas
//   tenant + shape       the team's jobs of that shape
//   shape                anyone's jobs of that shape
//   none                 no key has enough runs: no prediction
// The statistic is the median of the key's recent runs (robust to the odd
// crash or runaway). Memory is bounded: each key keeps its `keep_per_key`
// most recent runs, and at most `max_keys` keys are kept (the least recently
// fed are forgotten first).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"

namespace berth::sched {

enum class RuntimeBasis : std::uint8_t {
  kNone = 0,
  kUserName = 1,
  kUserShape = 2,
  kTenantShape = 3,
  kShape = 4,
};
std::string_view RuntimeBasisName(RuntimeBasis b);  // "user+name", ...

// How a finished run ended. Only runs that say how long such a job runs are
// learnt from: a success, a failure (it would fail as soon again) and a run
// stopped at its declared max runtime (it would be stopped there again). A
// cancellation or an eviction cut the run short for reasons that are not the
// job's: it teaches nothing.
enum class RunEnd : std::uint8_t { kSucceeded, kFailed, kMaxRuntime, kCancelled, kEvicted };

// The shape a run is keyed by: whole GPUs per replica (0 for a slice or a
// CPU-only job) and replicas; a slice is its own shape.
struct RuntimeShape {
  std::uint32_t gpus = 0;
  std::uint32_t replicas = 1;
  bool slice = false;
};

struct RuntimeRecord {
  std::string tenant;
  std::string user;  // "" when unknown: the user keys are skipped
  std::string name;  // "" when unknown: user + name is skipped
  RuntimeShape shape;
  TimeMs runtime_ms = 0;
  RunEnd end = RunEnd::kSucceeded;
};

struct RuntimeQuery {
  std::string_view tenant;
  std::string_view user;
  std::string_view name;
  RuntimeShape shape;
};

struct RuntimePrediction {
  TimeMs runtime_ms = 0;  // 0: none (basis kNone)
  RuntimeBasis basis = RuntimeBasis::kNone;
  std::int32_t samples = 0;  // runs behind the statistic
  // The mean of the same runs: what a run of the key lasts on average. Run
  // times are skewed long, so it lies above the median; a forecast that
  // chains many runs (sched/forecast.h) sums means, not medians. 0: not
  // known (runtime_ms stands for it).
  TimeMs mean_ms = 0;
  bool known() const { return basis != RuntimeBasis::kNone; }
  TimeMs mean_or_runtime() const { return mean_ms > 0 ? mean_ms : runtime_ms; }
};

struct RuntimeHistoryOptions {
  std::size_t keep_per_key = 32;
  std::size_t min_samples = 3;
  std::size_t max_keys = 20'000;
};

class RuntimeHistory {
 public:
  explicit RuntimeHistory(RuntimeHistoryOptions options = {});

  // Learns from one finished run (ignored unless its end teaches something
  // and its run time is positive). Feed runs oldest first: the newest
  // `keep_per_key` of each key are what counts.
  void Add(const RuntimeRecord& run);
  [[nodiscard]] RuntimePrediction Predict(const RuntimeQuery& job) const;
  // A running job's whole run time, knowing it has already run `elapsed_ms`:
  // the lower quartile of the key's recent runs that lasted longer than that
  // (most runs are short, so a job that has outlived them is likely a long
  // one; the quartile, as the rest of a run is skewed long), from the most
  // specific key with `min_samples` such runs. None has them: Predict's
  // answer (ExpectedEndOf then treats an overrun).
  [[nodiscard]] RuntimePrediction PredictAfter(const RuntimeQuery& job, TimeMs elapsed_ms) const;

  // Changes whenever a run was learnt: predictions made at another version
  // may differ.
  std::uint64_t version() const { return version_; }
  std::size_t keys() const { return series_.size(); }
  const RuntimeHistoryOptions& options() const { return options_; }

 private:
  // One key's recent run times, oldest first, and their median (kept on
  // every Add: predictions far outnumber runs learnt).
  struct Series {
    std::vector<TimeMs> recent;  // ring of at most keep_per_key
    std::size_t next = 0;        // where the next run goes once full
    TimeMs median = 0;
    TimeMs mean = 0;
    std::uint64_t fed = 0;  // version_ when last fed
  };
  void Feed(std::string key, TimeMs runtime_ms);
  const Series* Find(const std::string& key) const;
  void Forget();

  RuntimeHistoryOptions options_;
  std::unordered_map<std::string, Series> series_;
  std::uint64_t version_ = 0;
};

// The key strings (exposed for tests): distinct per basis and value.
std::string RuntimeKey(RuntimeBasis basis, std::string_view tenant, std::string_view user,
                       std::string_view name, const RuntimeShape& shape);

// When a running job's GPUs are expected back: a declared max runtime wins
// (berthd stops the job there: a hard bound); else the prediction from its
// start. A job that has already run past its prediction is expected to run
// as long again as it has so far (now + elapsed: the longer a job has run,
// the longer it is likely to go on), flagged `overrun`. kNever-free: returns
// 0 when nothing is known.
struct ExpectedEnd {
  TimeMs end_ms = 0;  // 0: unknown
  bool predicted = false;
  bool overrun = false;
};
ExpectedEnd ExpectedEndOf(TimeMs now_ms, TimeMs started_at_ms, std::int64_t max_runtime_ms,
                          std::int64_t predicted_runtime_ms);

}  // namespace berth::sched
