#include "sched/runtime_estimate.h"

#include <algorithm>
#include <array>

#include "common/checked.h"

namespace berth::sched {

std::string_view RuntimeBasisName(RuntimeBasis b) {
  switch (b) {
    case RuntimeBasis::kNone:
      return "none";
    case RuntimeBasis::kUserName:
      return "user+name";
    case RuntimeBasis::kUserShape:
      return "user+shape";
    case RuntimeBasis::kTenantShape:
      return "tenant+shape";
    case RuntimeBasis::kShape:
      return "shape";
  }
  return "none";
}

std::string RuntimeKey(RuntimeBasis basis, std::string_view tenant, std::string_view user,
                       std::string_view name, const RuntimeShape& shape) {
  // A separator no name holds keeps "a"+"bc" apart from "ab"+"c".
  constexpr char kSep = '\x1f';
  std::string key(1, static_cast<char>('0' + static_cast<int>(basis)));
  key += kSep;
  auto add_shape = [&] {
    key += std::to_string(shape.gpus);
    key += shape.slice ? 's' : 'x';
    key += std::to_string(shape.replicas);
  };
  switch (basis) {
    case RuntimeBasis::kNone:
      break;
    case RuntimeBasis::kUserName:
      key.append(tenant).append(1, kSep).append(user).append(1, kSep).append(name);
      break;
    case RuntimeBasis::kUserShape:
      key.append(tenant).append(1, kSep).append(user).append(1, kSep);
      add_shape();
      break;
    case RuntimeBasis::kTenantShape:
      key.append(tenant).append(1, kSep);
      add_shape();
      break;
    case RuntimeBasis::kShape:
      add_shape();
      break;
  }
  return key;
}

namespace {

// The mean of at most keep_per_key run times (each under 2^63 / keep ms).
TimeMs MeanOf(const std::vector<TimeMs>& runs) {
  if (runs.empty()) return 0;
  long double sum = 0;
  for (TimeMs t : runs) sum += static_cast<long double>(t);
  return static_cast<TimeMs>(sum / static_cast<long double>(runs.size()));
}

}  // namespace

RuntimeHistory::RuntimeHistory(RuntimeHistoryOptions options) : options_(options) {
  options_.keep_per_key = std::max<std::size_t>(1, options_.keep_per_key);
  options_.min_samples = std::clamp<std::size_t>(options_.min_samples, 1, options_.keep_per_key);
  options_.max_keys = std::max<std::size_t>(4, options_.max_keys);
}

void RuntimeHistory::Add(const RuntimeRecord& run) {
  if (run.runtime_ms <= 0) return;
  if (run.end == RunEnd::kCancelled || run.end == RunEnd::kEvicted) return;
  ++version_;
  // Users are named within their tenant: the same login in two tenants is
  // two histories.
  if (!run.user.empty()) {
    if (!run.name.empty()) {
      Feed(RuntimeKey(RuntimeBasis::kUserName, run.tenant, run.user, run.name, run.shape),
           run.runtime_ms);
    }
    Feed(RuntimeKey(RuntimeBasis::kUserShape, run.tenant, run.user, {}, run.shape), run.runtime_ms);
  }
  Feed(RuntimeKey(RuntimeBasis::kTenantShape, run.tenant, {}, {}, run.shape), run.runtime_ms);
  Feed(RuntimeKey(RuntimeBasis::kShape, {}, {}, {}, run.shape), run.runtime_ms);
  if (series_.size() > options_.max_keys) Forget();
}

void RuntimeHistory::Feed(std::string key, TimeMs runtime_ms) {
  Series& s = series_[std::move(key)];
  if (s.recent.size() < options_.keep_per_key) {
    s.recent.push_back(runtime_ms);
  } else {
    s.recent[s.next] = runtime_ms;
    s.next = (s.next + 1) % s.recent.size();
  }
  s.fed = version_;
  // The median (the upper one of an even count): a copy of at most
  // keep_per_key values, partially sorted.
  std::vector<TimeMs> sorted = s.recent;
  auto mid = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), mid, sorted.end());
  s.median = *mid;
  s.mean = MeanOf(s.recent);
}

void RuntimeHistory::Forget() {
  // Drops the least recently fed tenth of the keys (at least the excess):
  // one pass per many runs learnt, not one per run.
  std::vector<std::uint64_t> fed;
  fed.reserve(series_.size());
  for (const auto& [key, s] : series_) fed.push_back(s.fed);
  const std::size_t drop = std::max(series_.size() - options_.max_keys, options_.max_keys / 10);
  auto cut = fed.begin() + static_cast<std::ptrdiff_t>(std::min(drop, fed.size()) - 1);
  std::nth_element(fed.begin(), cut, fed.end());
  const std::uint64_t oldest_kept = *cut;
  std::erase_if(series_, [&](const auto& kv) { return kv.second.fed <= oldest_kept; });
}

const RuntimeHistory::Series* RuntimeHistory::Find(const std::string& key) const {
  auto it = series_.find(key);
  return it == series_.end() ? nullptr : &it->second;
}

RuntimePrediction RuntimeHistory::Predict(const RuntimeQuery& job) const {
  std::array<RuntimeBasis, 4> order{RuntimeBasis::kUserName, RuntimeBasis::kUserShape,
                                    RuntimeBasis::kTenantShape, RuntimeBasis::kShape};
  for (RuntimeBasis b : order) {
    if ((b == RuntimeBasis::kUserName || b == RuntimeBasis::kUserShape) && job.user.empty()) {
      continue;
    }
    if (b == RuntimeBasis::kUserName && job.name.empty()) continue;
    const Series* s = Find(RuntimeKey(b, job.tenant, job.user, job.name, job.shape));
    if (s == nullptr || s->recent.size() < options_.min_samples) continue;
    return {s->median, b, static_cast<std::int32_t>(s->recent.size()), s->mean};
  }
  return {};
}

RuntimePrediction RuntimeHistory::PredictAfter(const RuntimeQuery& job, TimeMs elapsed_ms) const {
  if (elapsed_ms <= 0) return Predict(job);
  std::array<RuntimeBasis, 4> order{RuntimeBasis::kUserName, RuntimeBasis::kUserShape,
                                    RuntimeBasis::kTenantShape, RuntimeBasis::kShape};
  std::vector<TimeMs> longer;
  for (RuntimeBasis b : order) {
    if ((b == RuntimeBasis::kUserName || b == RuntimeBasis::kUserShape) && job.user.empty()) {
      continue;
    }
    if (b == RuntimeBasis::kUserName && job.name.empty()) continue;
    const Series* s = Find(RuntimeKey(b, job.tenant, job.user, job.name, job.shape));
    if (s == nullptr || s->recent.size() < options_.min_samples) continue;
    longer.clear();
    for (TimeMs t : s->recent) {
      if (t > elapsed_ms) longer.push_back(t);
    }
    if (longer.size() < options_.min_samples) continue;
    // The lower quartile, not the median: what is left of a run is skewed
    // (most end soon, a few go on for days), and an estimate that must land
    // within a quarter of the wait does best near the likeliest end, which
    // lies below the median (docs/evaluation.md: the quartile was chosen
    // over the median and the 15th and 35th percentiles on the ITP traces).
    const TimeMs mean = MeanOf(longer);
    auto at = longer.begin() + static_cast<std::ptrdiff_t>(longer.size() / 4);
    std::nth_element(longer.begin(), at, longer.end());
    return {*at, b, static_cast<std::int32_t>(longer.size()), mean};
  }
  return Predict(job);
}

ExpectedEnd ExpectedEndOf(TimeMs now_ms, TimeMs started_at_ms, std::int64_t max_runtime_ms,
                          std::int64_t predicted_runtime_ms) {
  if (max_runtime_ms > 0) {
    return {std::max(now_ms, SaturatingAdd(started_at_ms, max_runtime_ms)), false, false};
  }
  if (predicted_runtime_ms <= 0) return {};
  const TimeMs end = SaturatingAdd(started_at_ms, predicted_runtime_ms);
  if (end > now_ms) return {end, true, false};
  // Past its prediction: as long again as it has run (at least a minute, so
  // that a job just past a short prediction is not expected back at once).
  const TimeMs elapsed = std::max<TimeMs>(now_ms - started_at_ms, 60'000);
  return {SaturatingAdd(now_ms, elapsed), true, true};
}

}  // namespace berth::sched
