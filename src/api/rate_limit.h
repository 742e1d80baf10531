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

// Requests are limited twice. Before its token is verified, every request
// counts against its source address, with kSourceFactor times the caller's
// rate and burst (many callers may share one address: a proxy, a NAT, the
// CLI on berthd's host); made-up token ids all land there, so inventing ids
// buys nothing. Once verified, it counts against its token ("token:<id>")
// at the configured rate.
inline constexpr std::int64_t kSourceFactor = 20;
RateLimitConfig SourceLimits(const RateLimitConfig& caller);
std::string SourceKey(std::string_view remote_addr);  // "addr:<remote>"

// Refused authentications, per source address and minute: the first of a
// minute is recorded in the audit log at once, the rest only counted, and
// the count is recorded with the source's next refusal in a later minute,
// so a flood of bad tokens leaves a few records instead of one fsync each.
class RefusalCounter {
 public:
  explicit RefusalCounter(std::size_t max_sources = 10000) : max_sources_(max_sources) {}
  struct Verdict {
    bool record = false;          // record this refusal
    std::int64_t suppressed = 0;  // refusals not recorded since `since_ms`
    TimeMs since_ms = 0;
  };
  Verdict Note(const std::string& source, TimeMs now);

 private:
  struct Window {
    TimeMs start_ms = 0;
    std::int64_t suppressed = 0;
  };
  const std::size_t max_sources_;
  std::mutex mu_;
  std::unordered_map<std::string, Window> windows_;  // guarded by mu_
};

}  // namespace berth::server
