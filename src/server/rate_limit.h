// Per-caller request rate limits: one token bucket per caller, refilled at
// `per_second` up to `burst`. Time comes from the injected Clock, so tests
// drive it by hand. Memory is bounded: a bucket that has refilled to full is
// the same as no bucket and is dropped, and at most `max_keys` are kept.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/clock.h"

namespace berth::server {

struct RateLimitConfig {
  std::int64_t per_second = 50;  // 0: no limit
  std::int64_t burst = 100;      // the most requests at once after a quiet spell
  std::size_t max_keys = 10000;  // callers tracked at once
};

class RateLimiter {
 public:
  RateLimiter(RateLimitConfig config, const Clock& clock);

  struct Decision {
    bool allowed = true;
    // When refused: how long until one request's worth has refilled.
    std::int64_t retry_after_ms = 0;
  };
  // Takes one request's worth from `key`'s bucket, or refuses.
  Decision Admit(const std::string& key);

  std::size_t tracked_keys() const;
  const RateLimitConfig& config() const { return config_; }

 private:
  // Tokens are counted in thousandths of a request, so refill is exact
  // integer arithmetic: per_second thousandths per millisecond.
  struct Bucket {
    std::int64_t milli_tokens = 0;
    TimeMs last_ms = 0;
  };
  void Refill(Bucket& b, TimeMs now) const;
  // Drops full buckets; if still at max_keys, the least recently used one.
  void Evict(TimeMs now);

  const RateLimitConfig config_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // guarded by mu_
  TimeMs last_sweep_ms_ = 0;                         // guarded by mu_
};

// The key a request is limited under: "token:<id>" for a bearer token of the
// shape berth_<id>_<secret> (the secret is never kept), else "addr:<remote>".
std::string RateLimitKey(std::string_view authorization, std::string_view remote_addr);

}  // namespace berth::server
