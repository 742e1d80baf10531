// A forecast of when the jobs waiting now will start: the scheduler itself
// run forward on a copy of the snapshot, one cycle at each time a running
// job is expected to end (its declared max runtime, else its predicted run
// time), with the jobs placed in earlier forecast cycles running from there
// until their own expected ends, decayed usage advanced with them, reclaim
// graces counted, evictions carried out. What it foresees is what the
// scheduler would do if every run ended when expected and nothing new
// arrived: fair share between queues, short-first within them, reclaim,
// backfill and gangs all come from the same code that will decide.
//
// The single-cycle estimate (Cycle::Estimate) replays releases for one head
// at a time; it cannot see another queue's head that fair share will serve
// first once the GPUs come back, nor a job behind a head. The forecast
// sees both, at the price of one scheduler run per step, so it runs outside
// the scheduling cycle and within a bounded number of steps.
//
// Pure: the same snapshot, scheduler and options always give the same
// forecast.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "sched/plan.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"

namespace berth::sched {

struct ForecastOptions {
  // Scheduler runs at most (the first, at the snapshot's time, included).
  std::size_t max_cycles = 128;
  // No start is foreseen later than the snapshot's time plus this.
  TimeMs horizon_ms = std::int64_t{30} * 24 * 3'600'000;
  // Two steps are at least this far apart (berthd's cycle is shorter; the
  // grid only bounds how many steps a burst of ends costs).
  TimeMs min_step_ms = 10'000;
  // What a run without a declared max runtime is expected to last: the
  // mean of its key's past runs (RuntimePrediction::mean_ms; kMean), the
  // prediction the cycle's own estimate uses (the median for a waiting
  // job, the lower quartile of the longer runs for a running one;
  // kPredicted), or the mean for the jobs the forecast places and the
  // prediction for those running now (kMeanOfPlaced). A forecast chains
  // runs one after another, and a chain of skewed run times lasts the sum
  // of their means: on the ITP traces kMean gave the most estimates within
  // ±25% (docs/evaluation.md, "Forecast").
  enum class Runs : std::uint8_t { kPredicted, kMean, kMeanOfPlaced };
  Runs runs = Runs::kMean;
  // Jobs expected to arrive after the snapshot (submitted_at_ms later than
  // its now, ascending; ids no real job has): each joins the waiting jobs
  // at the first step at or after its arrival. Empty: no arrivals foreseen.
  std::vector<PendingJob> arrivals{};
  // Set by another thread to stop the forecast at its next step (berthd
  // shutting down): a forecast at 10,000 nodes runs for seconds.
  const std::atomic<bool>* cancel = nullptr;
};

// Why the forecast stopped before every job had a start.
enum class ForecastEnd : std::uint8_t {
  kAllStarted = 0,  // every waiting job has a foreseen start
  kNoKnownEnd = 1,  // nothing running has an expected end: nothing frees
  kCycleLimit = 2,  // max_cycles reached
  kHorizon = 3,     // the next step is past the horizon
  kCancelled = 4,   // ForecastOptions::cancel was set: the starts are partial
};

struct Forecast {
  // Waiting job id -> the time of the forecast cycle that first placed it.
  std::unordered_map<std::int64_t, TimeMs> start_ms;
  // Waiting job id -> whether that start stands on a predicted end (some
  // run the forecast let end by a prediction had ended by then) rather than
  // only on declared max runtimes.
  std::unordered_map<std::int64_t, bool> predicted;
  std::size_t cycles = 0;  // scheduler runs made
  ForecastEnd end = ForecastEnd::kAllStarted;
  TimeMs last_step_ms = 0;  // the time of the last cycle run
};

// Runs the forecast from `snapshot` (its own copy: a caller done with the
// snapshot moves it in). `first`, when given, is the plan the scheduler
// already made of this very snapshot (the control loop's own cycle): the
// forecast starts from it instead of scheduling it again.
[[nodiscard]] Forecast ForecastStarts(const Scheduler& scheduler, Snapshot snapshot,
                                      const ForecastOptions& options = {},
                                      const Plan* first = nullptr);

}  // namespace berth::sched
