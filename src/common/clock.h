// Time is injected. Nothing in sched/, the control loop or lease logic reads
// the system clock directly; they take a Clock&, so tests can drive time by
// hand and the simulator can run on a virtual clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace berth {

// Milliseconds since the Unix epoch. Wall-clock time is what users see in
// timelines and what agents stamp on process starts and exits.
using TimeMs = std::int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimeMs NowMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimeMs NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that only moves when told to: for unit tests and simulations.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimeMs start = 1'700'000'000'000) : now_(start) {}
  TimeMs NowMs() const override { return now_.load(); }
  void Advance(TimeMs ms) { now_.fetch_add(ms); }
  void Set(TimeMs ms) { now_.store(ms); }

 private:
  std::atomic<TimeMs> now_;
};

}  // namespace berth
