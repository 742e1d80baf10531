#include "cli/poc_load.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "cli/poc_burst.h"

namespace berth::cli::poc {

LoadFigures SummarizeLoad(const std::vector<LoadCall>& calls) {
  LoadFigures f;
  std::vector<std::int64_t> took;
  took.reserve(calls.size());
  for (const auto& c : calls) {
    ++f.calls;
    if (c.as_expected) {
      ++f.as_expected;
    } else if (f.first_problem.empty()) {
      f.first_problem = c.problem;
    }
    took.push_back(c.took_ms);
  }
  if (took.empty()) return f;
  f.max_ms = *std::max_element(took.begin(), took.end());
  f.p50_ms = PercentileMs(took, 50);
  f.p95_ms = PercentileMs(std::move(took), 95);
  return f;
}

std::vector<LoadCall> RunLoad(std::int64_t concurrency, std::int64_t duration_ms,
                              const Clock& clock, const std::function<LoadCall()>& call,
                              const std::function<bool()>& stop) {
  const TimeMs end = clock.NowMs() + duration_ms;
  std::mutex mu;
  std::vector<LoadCall> out;
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(std::max<std::int64_t>(concurrency, 0)));
  for (std::int64_t i = 0; i < concurrency; ++i) {
    workers.emplace_back([&] {
      while (clock.NowMs() < end && !(stop && stop())) {
        LoadCall c = call();
        const std::lock_guard lock(mu);
        out.push_back(std::move(c));
      }
    });
  }
  for (auto& w : workers) w.join();
  return out;
}

}  // namespace berth::cli::poc
