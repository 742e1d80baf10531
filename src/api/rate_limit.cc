#include "api/rate_limit.h"

#include <algorithm>

#include "api/redact.h"

namespace berth::server {
namespace {

constexpr std::int64_t kOne = 1000;  // one request, in thousandths

}  // namespace

RateLimiter::RateLimiter(RateLimitConfig config, const Clock& clock)
    : config_(config), clock_(clock) {}

void RateLimiter::Refill(Bucket& b, TimeMs now) const {
  const std::int64_t cap = config_.burst * kOne;
  const TimeMs elapsed = std::max<TimeMs>(0, now - b.last_ms);
  // Saturate before multiplying: an idle hour must not overflow.
  const std::int64_t room = cap - b.milli_tokens;
  if (elapsed >= room / std::max<std::int64_t>(1, config_.per_second) + 1) {
    b.milli_tokens = cap;
  } else {
    b.milli_tokens = std::min(cap, b.milli_tokens + elapsed * config_.per_second);
  }
  b.last_ms = now;
}

void RateLimiter::Evict(TimeMs now) {
  const std::int64_t cap = config_.burst * kOne;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    Refill(it->second, now);
    it = it->second.milli_tokens >= cap ? buckets_.erase(it) : std::next(it);
  }
  last_sweep_ms_ = now;
  if (buckets_.size() < config_.max_keys || buckets_.empty()) return;
  auto oldest = std::min_element(
      buckets_.begin(), buckets_.end(),
      [](const auto& a, const auto& b) { return a.second.last_ms < b.second.last_ms; });
  buckets_.erase(oldest);
}

RateLimiter::Decision RateLimiter::Admit(const std::string& key) {
  if (config_.per_second <= 0) return {};
  const TimeMs now = clock_.NowMs();
  std::lock_guard lock(mu_);
  // A bucket refills to full in burst/per_second seconds; sweep that often.
  const TimeMs full_after_ms = config_.burst * kOne / config_.per_second + 1;
  if (now - last_sweep_ms_ >= full_after_ms) Evict(now);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= config_.max_keys) Evict(now);
    it = buckets_.emplace(key, Bucket{config_.burst * kOne, now}).first;
  }
  Bucket& b = it->second;
  Refill(b, now);
  if (b.milli_tokens >= kOne) {
    b.milli_tokens -= kOne;
    return {};
  }
  const std::int64_t missing = kOne - b.milli_tokens;
  return {false, (missing + config_.per_second - 1) / config_.per_second};
}

std::size_t RateLimiter::tracked_keys() const {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

RateLimitConfig SourceLimits(const RateLimitConfig& caller) {
  RateLimitConfig c = caller;
  c.per_second = caller.per_second * kSourceFactor;
  c.burst = caller.burst * kSourceFactor;
  return c;
}

std::string SourceKey(std::string_view remote_addr) {
  return "addr:" + std::string(remote_addr);
}

RefusalCounter::Verdict RefusalCounter::Note(const std::string& source, TimeMs now) {
  constexpr TimeMs kWindowMs = 60'000;
  std::lock_guard lock(mu_);
  auto it = windows_.find(source);
  if (it != windows_.end() && now - it->second.start_ms < kWindowMs) {
    ++it->second.suppressed;
    return {};
  }
  Verdict v{true, 0, 0};
  if (it != windows_.end()) {
    v.suppressed = it->second.suppressed;
    v.since_ms = it->second.start_ms;
    it->second = Window{now, 0};
    return v;
  }
  if (windows_.size() >= max_sources_) {
    // Closed windows with nothing suppressed say nothing: drop them first.
    std::erase_if(windows_, [&](const auto& w) {
      return now - w.second.start_ms >= kWindowMs && w.second.suppressed == 0;
    });
    if (windows_.size() >= max_sources_) windows_.clear();  // bounded, at the cost of a count
  }
  windows_.emplace(source, Window{now, 0});
  return v;
}

}  // namespace berth::server
