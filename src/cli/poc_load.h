// `berth poc`'s http_load step: a fixed number of calls kept in flight
// against a service through berthd's gateway for a while, so that the
// autoscaler sees concurrency and scales up; the calls' outcomes as the
// step's figures (count, answered as expected, latency percentiles).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace berth::cli::poc {

// One call of a load: its HTTP status (0: no answer), whether its answer
// was what the step expects, how long it took, and when not as expected,
// why in words.
struct LoadCall {
  int status = 0;
  bool as_expected = false;
  std::int64_t took_ms = 0;
  std::string problem;
};

// What a load's calls add up to; latencies are nearest-rank percentiles
// over every call (0 with no calls).
struct LoadFigures {
  std::int64_t calls = 0;
  std::int64_t as_expected = 0;
  std::int64_t p50_ms = 0;
  std::int64_t p95_ms = 0;
  std::int64_t max_ms = 0;
  std::string first_problem;  // of the first call not as expected
};
LoadFigures SummarizeLoad(const std::vector<LoadCall>& calls);

// Runs `call` from `concurrency` threads at once, each calling again as
// soon as its last call ended, until `duration_ms` has passed on `clock`
// since the start or `stop` (may be empty) says to stop; a call under way
// is not cut short. Returns every call, in no particular order. `call` must
// be safe to run from several threads.
std::vector<LoadCall> RunLoad(std::int64_t concurrency, std::int64_t duration_ms,
                              const Clock& clock, const std::function<LoadCall()>& call,
                              const std::function<bool()>& stop);

}  // namespace berth::cli::poc
