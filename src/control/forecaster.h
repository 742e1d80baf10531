// Forecasts of when the waiting jobs start (sched/forecast.h), made on a
// thread of their own from the control loop's snapshots, at most once per
// interval, so that a pass never waits for one. `berth why` and the API read
// the latest: a forecast is a view, never stored, and never a decision.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "sched/forecast.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"

namespace berth::server {

struct ForecasterOptions {
  // How often a forecast is made; 0: never.
  TimeMs interval_ms = 60'000;
  // Scheduler runs per forecast at most, and fewer on a large snapshot:
  // each is one cycle over every job, so a forecast makes at most
  // job_cycles / (pending + running jobs) of them, at least 2.
  std::size_t max_cycles = 128;
  std::size_t job_cycles = 2'000'000;
};

// What the latest forecast says of one waiting job.
struct JobForecast {
  TimeMs start_ms = 0;     // when the forecast foresees its start
  TimeMs made_at_ms = 0;   // the time of the snapshot it ran from
  bool predicted = false;  // it stands on a predicted (not declared) end
  std::size_t cycles = 0;  // scheduler runs the forecast made
};

class Forecaster {
 public:
  Forecaster(const sched::Scheduler& scheduler, ForecasterOptions options);
  ~Forecaster();
  Forecaster(const Forecaster&) = delete;
  Forecaster& operator=(const Forecaster&) = delete;

  // Whether a pass at `now` should hand its snapshot over: forecasts are
  // on, none is being made, and the last was made `interval_ms` ago or
  // more, and ten times what the last one took (so that forecasts never
  // take more than a tenth of one core, however large the snapshot).
  bool Wants(TimeMs now) const;
  // Hands a pass's snapshot over (taken when Wants(snapshot.now_ms); else
  // dropped). The forecast is made on the forecaster's thread.
  void Offer(sched::Snapshot snapshot);
  // The latest forecast's word on a job; none when no forecast has been
  // made yet, or it foresaw no start for the job.
  std::optional<JobForecast> Of(std::int64_t job_id) const;
  // Blocks until no forecast is waiting or being made (tests, shutdown).
  void Drain();

 private:
  struct Made {
    TimeMs at_ms = 0;
    std::size_t cycles = 0;
    std::unordered_map<std::int64_t, TimeMs> start_ms;
    std::unordered_map<std::int64_t, bool> predicted;
  };
  void Loop();

  const sched::Scheduler& scheduler_;
  const ForecasterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<sched::Snapshot> next_;  // offered, not yet taken
  bool busy_ = false;                    // one is being made
  bool stop_ = false;
  // Set with stop_: a forecast being made ends at its next step, so
  // shutdown does not wait for a whole one (seconds at 10,000 nodes).
  std::atomic<bool> cancel_{false};
  bool offered_ = false;  // any snapshot taken yet
  TimeMs last_offer_ms_ = 0;
  TimeMs last_cost_ms_ = 0;  // how long the last forecast took (steady clock)
  std::shared_ptr<const Made> latest_;
  std::thread worker_;  // last: started once the rest is built
};

}  // namespace berth::server
