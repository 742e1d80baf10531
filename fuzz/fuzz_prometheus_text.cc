// libFuzzer target: model::SumPrometheusMetric on arbitrary bytes (a
// replica's /metrics body, which its tenant controls). A refusal names its
// field in valid UTF-8; an answer is a finite number, and a text with a
// sample of the metric appended sums to the answer plus that sample.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "model/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace berth::model;
  const std::string text(berth::fuzz::AsText(data, size));
  for (const char* name : {"vllm:num_requests_waiting", "q"}) {
    auto sum = SumPrometheusMetric(text, name);
    if (!sum) {
      berth::fuzz::CheckRefusal(sum.error());
      continue;
    }
    FUZZ_REQUIRE(!*sum || std::isfinite(**sum));
    auto more = SumPrometheusMetric(text + "\n" + name + " 2\n", name);
    if (!more) continue;  // the text may grow past the limit, or end inside a label set
    FUZZ_REQUIRE(more->has_value());
    FUZZ_REQUIRE(std::fabs(**more - (sum->value_or(0.0) + 2.0)) <=
                 1e-9 * std::max(1.0, std::fabs(**more)));
  }
  return 0;
}
