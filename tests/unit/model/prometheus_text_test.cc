// One metric read out of a replica's Prometheus text: every sample of the
// name summed whatever its labels, other metrics (longer names included)
// skipped, and a sample of it that is not a finite number refused with its
// line.
#include "model/prometheus_text.h"

#include <gtest/gtest.h>

#include <string>

namespace berth::model {
namespace {

constexpr const char* kVllm = R"(# HELP vllm:num_requests_waiting Requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="coder",engine="0"} 3
vllm:num_requests_waiting{model_name="coder",engine="1"} 2.5
vllm:num_requests_waiting_total{model_name="coder"} 1000
vllm:num_requests_running{model_name="coder"} 7 1733400000000
vllm:gpu_cache_usage_perc{label="a \"quoted\" } brace"} 0.5
)";

TEST(PrometheusText, SumsEverySampleOfTheNameWhateverItsLabels) {
  auto waiting = SumPrometheusMetric(kVllm, "vllm:num_requests_waiting");
  ASSERT_TRUE(waiting.has_value()) << waiting.error().message;
  ASSERT_TRUE(waiting->has_value());
  EXPECT_DOUBLE_EQ(**waiting, 5.5);  // not the _total counter
  auto running = SumPrometheusMetric(kVllm, "vllm:num_requests_running");
  ASSERT_TRUE(running.has_value());
  EXPECT_DOUBLE_EQ(running->value_or(-1), 7.0);  // a timestamp after the value
  auto cache = SumPrometheusMetric(kVllm, "vllm:gpu_cache_usage_perc");
  ASSERT_TRUE(cache.has_value()) << cache.error().message;
  EXPECT_DOUBLE_EQ(cache->value_or(-1), 0.5);  // a quoted brace inside a label
  auto plain = SumPrometheusMetric("up 1\r\nup 2e0\n", "up");
  ASSERT_TRUE(plain.has_value());
  EXPECT_DOUBLE_EQ(plain->value_or(-1), 3.0);
  auto absent = SumPrometheusMetric(kVllm, "vllm:num_preemptions");
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->has_value());
}

TEST(PrometheusText, ASampleThatIsNotAFiniteNumberIsRefusedWithItsLine) {
  for (const std::string& text :
       {std::string("# x\nq NaN\n"), std::string("q +Inf\n"), std::string("q{a=\"b\" 3\n"),
        std::string("q\n"), std::string("q{a=\"b\"}x\n"), std::string("q three\n"),
        std::string("q 1e400\n")}) {
    auto r = SumPrometheusMetric(text, "q");
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_EQ(r.error().field, "metrics") << text;
    EXPECT_NE(r.error().message.find("line "), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(SumPrometheusMetric("q 1\n", "1q").has_value());
  EXPECT_FALSE(IsPrometheusMetricName("vllm num"));
  EXPECT_TRUE(IsPrometheusMetricName("vllm:num_requests_waiting"));
  EXPECT_FALSE(SumPrometheusMetric(std::string(kMaxMetricsBytes + 1, '#'), "q").has_value());
}

}  // namespace
}  // namespace berth::model
