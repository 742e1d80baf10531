#include "control/forecaster.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace berth::server {

Forecaster::Forecaster(const sched::Scheduler& scheduler, ForecasterOptions options)
    : scheduler_(scheduler), options_(options) {
  if (options_.interval_ms > 0) worker_ = std::thread([this] { Loop(); });
}

Forecaster::~Forecaster() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cancel_.store(true, std::memory_order_relaxed);
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

bool Forecaster::Wants(TimeMs now) const {
  if (options_.interval_ms <= 0) return false;
  std::lock_guard lock(mu_);
  if (busy_ || next_) return false;
  return !offered_ || now - last_offer_ms_ >= std::max(options_.interval_ms, 10 * last_cost_ms_);
}

void Forecaster::Offer(sched::Snapshot snapshot) {
  if (!Wants(snapshot.now_ms)) return;
  {
    std::lock_guard lock(mu_);
    offered_ = true;
    last_offer_ms_ = snapshot.now_ms;
    next_ = std::move(snapshot);
  }
  cv_.notify_all();
}

std::optional<JobForecast> Forecaster::Of(std::int64_t job_id) const {
  std::shared_ptr<const Made> made;
  {
    std::lock_guard lock(mu_);
    made = latest_;
  }
  if (!made) return std::nullopt;
  const auto it = made->start_ms.find(job_id);
  if (it == made->start_ms.end()) return std::nullopt;
  const auto p = made->predicted.find(job_id);
  return JobForecast{it->second, made->at_ms, p != made->predicted.end() && p->second,
                     made->cycles};
}

void Forecaster::Drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return stop_ || (!busy_ && !next_); });
}

void Forecaster::Loop() {
  for (;;) {
    sched::Snapshot snap;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || next_.has_value(); });
      if (stop_) return;
      snap = std::move(*next_);
      next_.reset();
      busy_ = true;
    }
    const std::size_t jobs = std::max<std::size_t>(1, snap.pending.size() + snap.running.size());
    sched::ForecastOptions o;
    o.max_cycles = std::clamp<std::size_t>(options_.job_cycles / jobs, 2,
                                           std::max<std::size_t>(2, options_.max_cycles));
    o.cancel = &cancel_;
    // Only the jobs that wait now: one placed by the forecast's first cycle
    // is the pass's own placement, not a forecast.
    const TimeMs now = snap.now_ms;
    std::vector<std::int64_t> waiting;
    waiting.reserve(snap.pending.size());
    for (const auto& p : snap.pending) waiting.push_back(p.id);
    // A measured cost, not a decision: the one place the forecaster reads
    // the steady clock (it paces the next forecast, Wants()).
    const auto began = std::chrono::steady_clock::now();
    const sched::Forecast f = sched::ForecastStarts(scheduler_, std::move(snap), o);
    const auto cost = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - began);
    if (f.end == sched::ForecastEnd::kCancelled) return;  // shutting down: partial starts
    auto made = std::make_shared<Made>();
    made->at_ms = now;
    made->cycles = f.cycles;
    for (std::int64_t id : waiting) {
      const auto it = f.start_ms.find(id);
      if (it == f.start_ms.end() || it->second <= now) continue;
      made->start_ms.emplace(id, it->second);
      made->predicted.emplace(id, f.predicted.at(id));
    }
    {
      std::lock_guard lock(mu_);
      latest_ = std::move(made);
      last_cost_ms_ = cost.count();
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace berth::server
