#include "model/usage_ledger.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace berth::model {
double UsageLedger::Decay(std::int64_t age_ms, std::int64_t half_life_ms) {
  if (age_ms <= 0) return 1.0;
  return std::exp2(-static_cast<double>(age_ms) /
                   static_cast<double>(std::max<std::int64_t>(half_life_ms, 1)));
}

double UsageLedger::HeldWorth(std::int64_t mgpu, TimeMs start_ms, TimeMs end_ms, TimeMs now,
                              std::int64_t half_life_ms) {
  const TimeMs end = std::min(end_ms, now);
  if (mgpu <= 0 || end <= start_ms) return 0;
  // Integral of 2^(-(now - t) / h) dt over [start, end], in seconds.
  const double h_s = static_cast<double>(half_life_ms) / 1000.0;
  const double weight = h_s / std::numbers::ln2 *
                        (Decay(now - end, half_life_ms) - Decay(now - start_ms, half_life_ms));
  return static_cast<double>(mgpu) * weight;
}

double UsageLedger::Worth(const UsageInterval& i, TimeMs now) const {
  return WorthUntil(i.mgpu, i.start_ms, i.end_ms, now);
}

double UsageLedger::WorthUntil(std::int64_t mgpu, TimeMs start_ms, TimeMs end_ms,
                               TimeMs now) const {
  return HeldWorth(mgpu, start_ms, end_ms, now, half_life_ms_);
}

void UsageLedger::Reset(std::int64_t half_life_ms, TimeMs now,
                        const std::vector<UsageInterval>& finished) {
  half_life_ms_ = std::max<std::int64_t>(half_life_ms, 1);
  totals_.clear();
  for (const auto& i : finished) Fold(i, now);
}

void UsageLedger::Fold(const UsageInterval& finished, TimeMs now) {
  double worth = Worth(finished, now);
  if (worth <= 0) return;
  Total& t = totals_[finished.queue];
  t.value = t.value * Decay(now - t.at_ms, half_life_ms_) + worth;
  t.at_ms = now;
}

std::map<std::string, std::int64_t> UsageLedger::At(
    TimeMs now, const std::vector<UsageInterval>& running) const {
  std::map<std::string, double> sum;
  for (const auto& [queue, t] : totals_)
    sum[queue] += t.value * Decay(now - t.at_ms, half_life_ms_);
  // Running jobs come grouped by queue more often than not (berth-sim: 10,000
  // of one queue): the last queue's entry is reused, and no interval is
  // copied. The same additions in the same order as a lookup per job.
  auto slot = sum.end();
  for (const auto& r : running) {
    if (slot == sum.end() || slot->first != r.queue) slot = sum.try_emplace(r.queue, 0.0).first;
    slot->second += WorthUntil(r.mgpu, r.start_ms, now, now);
  }
  std::map<std::string, std::int64_t> out;
  for (const auto& [queue, v] : sum) {
    auto rounded = static_cast<std::int64_t>(std::llround(v));
    if (rounded > 0) out.emplace(queue, rounded);
  }
  return out;
}

}  // namespace berth::model
