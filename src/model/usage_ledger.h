// Decayed GPU usage per leaf queue: the fair-share input that makes a tenant
// who used a lot recently yield to one who did not (docs/scheduling.md).
//
// Usage is GPU time weighted by its age: a milli-GPU held over [s, e]
// contributes the integral of 2^-((now - t) / half_life) dt over [s, e],
// in milli-GPU-seconds. Finished runs are folded into one decaying total
// per queue; running ones are added at each read. Rebuilt from the store's
// run history when berthd starts or the policy's half-life changes, so it
// survives restarts without a table of its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"

namespace berth::model {

// GPU time of one run: `mgpu` milli-GPUs from `start_ms` to `end_ms`.
struct UsageInterval {
  std::string queue;  // "tenant/queue"
  std::int64_t mgpu = 0;
  TimeMs start_ms = 0;
  TimeMs end_ms = 0;
};

class UsageLedger {
 public:
  // History older than this many half-lives adds under 0.1% and is skipped.
  static constexpr std::int64_t kWindowHalfLives = 10;

  std::int64_t half_life_ms() const { return half_life_ms_; }
  // Forgets everything and starts from `finished` (runs that ended).
  void Reset(std::int64_t half_life_ms, TimeMs now, const std::vector<UsageInterval>& finished);
  // Adds a run that has ended.
  void Fold(const UsageInterval& finished, TimeMs now);
  // Decayed usage at `now` per queue (milli-GPU-seconds): every folded run
  // plus `running`, whose end is taken as `now`.
  std::map<std::string, std::int64_t> At(TimeMs now,
                                         const std::vector<UsageInterval>& running) const;

  // The rule itself, for what advances decayed usage without a ledger (the
  // scheduler's forecast, sched/forecast.h): what a value `age_ms` old is
  // worth now (2^-(age / half-life)), and what `mgpu` held over [start, end]
  // is worth at `now`, in milli-GPU-seconds.
  static double Decay(std::int64_t age_ms, std::int64_t half_life_ms);
  static double HeldWorth(std::int64_t mgpu, TimeMs start_ms, TimeMs end_ms, TimeMs now,
                          std::int64_t half_life_ms);

 private:
  // Milli-GPU-seconds an interval is worth at `now`.
  double Worth(const UsageInterval& i, TimeMs now) const;
  double WorthUntil(std::int64_t mgpu, TimeMs start_ms, TimeMs end_ms, TimeMs now) const;

  struct Total {
    double value = 0;  // milli-GPU-seconds as of `at_ms`
    TimeMs at_ms = 0;
  };
  std::int64_t half_life_ms_ = 3'600'000;
  std::map<std::string, Total> totals_;
};

}  // namespace berth::model
