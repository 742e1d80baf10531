// The per-caller token bucket (rate_limit.h) on a manual clock, and the
// secret redaction (redact.h) berthd applies to what it logs and echoes.
#include "api/rate_limit.h"

#include <gtest/gtest.h>

#include "api/redact.h"

namespace berth::server {
namespace {

TEST(RateLimiter, ABurstIsAdmittedThenTheRateHolds) {
  ManualClock clock;
  RateLimiter limiter({10, 3, 100}, clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit("token:a").allowed) << i;
  auto refused = limiter.Admit("token:a");
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_ms, 100);  // one request per 100 ms at 10/s
  // Another caller has its own bucket.
  EXPECT_TRUE(limiter.Admit("token:b").allowed);
  clock.Advance(99);
  EXPECT_FALSE(limiter.Admit("token:a").allowed);
  clock.Advance(1);
  EXPECT_TRUE(limiter.Admit("token:a").allowed);
  EXPECT_FALSE(limiter.Admit("token:a").allowed);
  // A long quiet spell refills to the burst, never beyond, and cannot overflow.
  clock.Advance(std::int64_t{1} << 50);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit("token:a").allowed) << i;
  EXPECT_FALSE(limiter.Admit("token:a").allowed);
}

TEST(RateLimiter, ZeroMeansNoLimit) {
  ManualClock clock;
  RateLimiter limiter({0, 1, 100}, clock);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.Admit("addr:1").allowed);
  EXPECT_EQ(limiter.tracked_keys(), 0u);
}

TEST(RateLimiter, MemoryStaysBoundedAndIdleCallersAreForgotten) {
  ManualClock clock;
  RateLimiter limiter({1, 2, 50}, clock);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(limiter.Admit("addr:" + std::to_string(i)).allowed);
    EXPECT_LE(limiter.tracked_keys(), 50u);
  }
  // Once a bucket has refilled (2 s at 1/s), it is dropped at the next sweep.
  clock.Advance(2001);
  EXPECT_TRUE(limiter.Admit("addr:new").allowed);
  EXPECT_EQ(limiter.tracked_keys(), 1u);
  // A new caller starts with a full burst (2), then waits like everyone else.
  EXPECT_TRUE(limiter.Admit("token:busy").allowed);
  EXPECT_TRUE(limiter.Admit("token:busy").allowed);
  EXPECT_FALSE(limiter.Admit("token:busy").allowed);
}

TEST(RateLimiter, ASourceGetsAFixedMultipleOfACallersLimits) {
  EXPECT_EQ(SourceKey("10.0.0.1"), "addr:10.0.0.1");
  const RateLimitConfig c = SourceLimits({50, 100, 10000});
  EXPECT_EQ(c.per_second, 50 * kSourceFactor);
  EXPECT_EQ(c.burst, 100 * kSourceFactor);
  EXPECT_EQ(c.max_keys, 10000U);
  EXPECT_EQ(SourceLimits({0, 100, 10}).per_second, 0);  // no limit stays no limit
}

TEST(RefusalCounter, TheFirstRefusalOfAMinuteIsRecordedAndTheRestCounted) {
  RefusalCounter counter;
  auto first = counter.Note("10.0.0.1", 1'000);
  EXPECT_TRUE(first.record);
  EXPECT_EQ(first.suppressed, 0);
  for (int i = 0; i < 500; ++i) EXPECT_FALSE(counter.Note("10.0.0.1", 1'000 + i).record);
  // Another source has its own minute.
  EXPECT_TRUE(counter.Note("10.0.0.2", 2'000).record);
  // The next minute: recorded, with the count of what was not.
  auto later = counter.Note("10.0.0.1", 61'000);
  EXPECT_TRUE(later.record);
  EXPECT_EQ(later.suppressed, 500);
  EXPECT_EQ(later.since_ms, 1'000);
  EXPECT_EQ(counter.Note("10.0.0.1", 200'000).suppressed, 0);
}

TEST(RefusalCounter, MemoryIsBoundedWhateverTheNumberOfSources) {
  RefusalCounter counter(100);
  for (int i = 0; i < 10'000; ++i) {
    EXPECT_TRUE(counter.Note("10.0." + std::to_string(i), 1'000).record);
  }
}

TEST(Redact, TokensKeepTheirIdAndLoseTheirSecret) {
  EXPECT_EQ(RedactSecrets("Bearer berth_k3y1d_S3cr3t-xyz"), "Bearer berth_k3y1d_\u2026");
  // The secret runs to the first character no secret has (base64's '/', '+'
  // and '=' included): more may be cut, never less.
  EXPECT_EQ(RedactSecrets("GET /v1/jobs/berth_a_b_c/why?x=berth_q_zz&y=1 done"),
            "GET /v1/jobs/berth_a_\u2026?x=berth_q_\u2026&y=1 done");
  // Not tokens: left alone.
  EXPECT_EQ(RedactSecrets("berth_server berth_ berth_x_ berth__y"),
            "berth_server berth_ berth_x_ berth__y");
  EXPECT_EQ(RedactSecrets(""), "");
  const std::string once = RedactSecrets("x berth_id_secret y");
  EXPECT_EQ(RedactSecrets(once), once);
  EXPECT_EQ(once.find("secret"), std::string::npos);
}

}  // namespace
}  // namespace berth::server
