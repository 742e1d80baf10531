// `berth poc`'s http_load: the calls are kept in flight `concurrency` at a
// time until the duration is over, and their outcomes add up to the step's
// figures.
#include "cli/poc_load.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "common/clock.h"

namespace berth::cli::poc {
namespace {

TEST(PocLoad, FiguresCountTheCallsAsExpectedAndTheirLatencyPercentiles) {
  std::vector<LoadCall> calls;
  for (std::int64_t ms = 1; ms <= 20; ++ms) calls.push_back({200, true, ms * 10, ""});
  calls.push_back({503, false, 900, "503: no replica"});
  calls.push_back({0, false, 5, "no answer: refused"});
  const LoadFigures f = SummarizeLoad(calls);
  EXPECT_EQ(f.calls, 22);
  EXPECT_EQ(f.as_expected, 20);
  EXPECT_EQ(f.first_problem, "503: no replica");
  EXPECT_EQ(f.p50_ms, 100);  // the 11th of 22 sorted: 5, 10, ..., 100
  EXPECT_EQ(f.p95_ms, 200);  // the 21st
  EXPECT_EQ(f.max_ms, 900);
  const LoadFigures none = SummarizeLoad({});
  EXPECT_EQ(none.calls, 0);
  EXPECT_EQ(none.p95_ms, 0);
}

// Each worker's first call waits until all three are in flight at once,
// then the time is past the duration: three calls, three at a time.
TEST(PocLoad, ConcurrencyCallsAreInFlightAtOnceUntilTheDurationEnds) {
  ManualClock clock;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  int peak = 0;
  const auto call = [&] {
    std::unique_lock lock(mu);
    ++in_flight;
    peak = std::max(peak, in_flight);
    if (in_flight == 3) {
      clock.Advance(5'000);
      cv.notify_all();
    }
    cv.wait(lock, [&] { return clock.NowMs() >= 1'700'000'005'000; });
    --in_flight;
    return LoadCall{200, true, 5'000, ""};
  };
  const auto calls = RunLoad(3, 2'000, clock, call, {});
  EXPECT_EQ(calls.size(), 3U);
  EXPECT_EQ(peak, 3);
}

// The operator's stop ends the load before its duration: no call starts.
TEST(PocLoad, AStopAskedEndsTheLoadEarly) {
  ManualClock clock;
  int made = 0;
  const auto calls = RunLoad(
      4, 60'000, clock,
      [&made] {
        return LoadCall{200, true, ++made, ""};
      },
      [] { return true; });
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(made, 0);
}

}  // namespace
}  // namespace berth::cli::poc
