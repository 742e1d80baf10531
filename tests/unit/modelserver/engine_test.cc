#include "modelserver/engine.h"

#include <gtest/gtest.h>

namespace berth::modelserver {
namespace {

EngineParams Params() {
  EngineParams p;
  p.max_batch = 5;
  p.ttft_ms = 20;
  p.prefill_us_per_token = 100;
  p.itl_ms = 4;
  p.full_batch_slowdown_pct = 100;
  p.kv_cache_tokens = 1000;
  return p;
}

TEST(ModelEngine, AloneARequestTakesItsFirstTokenAndOneStepPerToken) {
  // 20 ms + 100 prompt tokens x 0.1 ms + 10 tokens x 4 ms.
  EXPECT_EQ(ServiceTimeMs(Params(), 1, 100, 10), 20 + 10 + 40);
  EXPECT_EQ(ServiceTimeMs(Params(), 0, 100, 10), 70) << "admitted counts itself";
}

TEST(ModelEngine, LatencyGrowsWithTheBatchUpToTheSlowdownOfAFullOne) {
  const EngineParams p = Params();
  std::int64_t last = 0;
  for (std::uint32_t running = 1; running <= p.max_batch; ++running) {
    const std::int64_t t = ServiceTimeMs(p, running, 100, 10);
    EXPECT_GT(t, last) << running;
    last = t;
  }
  EXPECT_EQ(last, 140) << "a full batch is twice as slow at 100%";
  EXPECT_EQ(ServiceTimeMs(p, 50, 100, 10), 140) << "never more than a full batch";
  EngineParams flat = p;
  flat.full_batch_slowdown_pct = 0;
  EXPECT_EQ(ServiceTimeMs(flat, 5, 100, 10), 70);
  EngineParams one = p;
  one.max_batch = 1;
  EXPECT_EQ(ServiceTimeMs(one, 1, 100, 10), 70);
}

TEST(ModelEngine, MoreOutputTokensTakeLonger) {
  EXPECT_LT(ServiceTimeMs(Params(), 3, 100, 10), ServiceTimeMs(Params(), 3, 100, 100));
  EXPECT_LT(ServiceTimeMs(Params(), 3, 10, 10), ServiceTimeMs(Params(), 3, 1000, 10));
}

TEST(ModelEngine, KvCacheUsageIsTheShareOfTokensHeldAndStopsAtFull) {
  EXPECT_DOUBLE_EQ(KvCacheUsage(Params(), 0), 0.0);
  EXPECT_DOUBLE_EQ(KvCacheUsage(Params(), 250), 0.25);
  EXPECT_DOUBLE_EQ(KvCacheUsage(Params(), 5000), 1.0);
}

TEST(ModelEngine, PromptTokensAreAboutFourBytesEachAndAtLeastOne) {
  EXPECT_EQ(PromptTokens(""), 1U);
  EXPECT_EQ(PromptTokens("abcd"), 1U);
  EXPECT_EQ(PromptTokens("abcde"), 2U);
  EXPECT_EQ(PromptTokens(std::string(400, 'x')), 100U);
}

}  // namespace
}  // namespace berth::modelserver
