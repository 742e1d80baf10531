#include "sched/autoscale.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "common/units.h"

namespace berth::sched {
namespace {

using model::AutoscaleSignal;

// No service wants more than this many replicas for any reading; keeps the
// arithmetic far from overflow (values are clamped to kMaxValueMilli).
constexpr std::int64_t kMaxWanted = 1'000'000;
constexpr std::int64_t kMaxValueMilli = 1'000'000'000'000'000;  // 1e15

struct WindowAverage {
  std::int64_t value_milli = 0;
  std::size_t count = 0;
};

// The mean of the samples in (now - window, now], rounded to nearest.
WindowAverage Average(std::span<const AutoscaleSample> samples, TimeMs now, std::int64_t window) {
  std::int64_t sum = 0;
  std::size_t n = 0;
  for (const auto& s : samples) {
    if (s.time_ms > now || s.time_ms <= now - window) continue;
    sum += std::clamp<std::int64_t>(s.value_milli, 0, kMaxValueMilli);
    ++n;
  }
  if (n == 0) return {};
  const auto count = static_cast<std::int64_t>(n);
  return {(sum + count / 2) / count, n};
}

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// Replicas that serve `observed` at `target` per replica. Additive signals
// divide; p95 latency is not additive, so it scales the current replicas
// in proportion (HPA's rule), from at least one.
std::int64_t Wanted(AutoscaleSignal signal, std::int64_t observed, std::int64_t target,
                    std::uint32_t current) {
  if (signal != AutoscaleSignal::kP95Latency)
    return std::min(CeilDiv(observed, target), kMaxWanted);
  if (observed == 0) return 0;
  const std::int64_t base = std::max<std::int64_t>(current, 1);
  const std::int64_t whole = observed / target;
  if (whole >= kMaxWanted) return kMaxWanted;
  return std::min(base * whole + CeilDiv(base * (observed % target), target), kMaxWanted);
}

}  // namespace

std::string_view AutoscaleCodeName(AutoscaleCode code) {
  static constexpr std::array<std::string_view, 10> kNames{
      "stable",        "panic",           "stabilizing_up", "stabilizing_down", "idle",
      "scale_to_zero", "scale_from_zero", "held_by_min",    "held_by_max",      "no_data"};
  return kNames[static_cast<std::size_t>(code)];
}

AutoscaleDecision Decide(const AutoscaleInput& in) {
  const model::Autoscaling& spec = in.spec;
  const TimeMs now = in.now_ms;
  const std::uint32_t current = in.ready + in.starting;
  const bool to_zero = spec.scale_to_zero.enabled && in.replicas.min == 0;
  // Without scale to zero a service keeps at least one replica.
  const std::uint32_t floor = to_zero ? 0 : std::max<std::uint32_t>(in.replicas.min, 1);
  const std::uint32_t ceiling = std::max(in.replicas.max, floor);
  const std::int64_t target = std::max<std::int64_t>(
      1, spec.target_milli * static_cast<std::int64_t>(spec.target_utilization_pct) / 100);

  AutoscaleDecision d;
  d.state = in.state;
  AutoscaleState& st = d.state;
  AutoscaleReason& r = d.reason;
  r.signal = spec.signal;
  r.target_milli = target;
  r.current = current;
  r.ready = in.ready;

  // Traffic: the last sample with a request arriving or in flight.
  if (!st.last_traffic_ms) st.last_traffic_ms = now;
  const AutoscaleSample* latest = nullptr;
  for (const auto& s : in.samples) {
    if (s.time_ms > now) continue;
    if ((s.requests > 0 || s.in_flight > 0) && s.time_ms > *st.last_traffic_ms) {
      st.last_traffic_ms = s.time_ms;
    }
    if (latest == nullptr || s.time_ms >= latest->time_ms) latest = &s;
  }

  // Bounds, then the decision; `wanted` is what the reason says before them.
  auto finish = [&](std::int64_t wanted, AutoscaleCode code) {
    const auto w = static_cast<std::uint32_t>(std::clamp<std::int64_t>(wanted, 0, kMaxWanted));
    r.code = code;
    if (w < floor) {
      r.code = AutoscaleCode::kHeldByMin;
      r.bound = floor;
    } else if (w > ceiling) {
      r.code = AutoscaleCode::kHeldByMax;
      r.bound = ceiling;
    }
    d.desired = std::clamp(w, floor, ceiling);
    r.desired = d.desired;
    return d;
  };
  auto remember = [&](std::uint32_t replicas) {
    const std::int64_t keep = std::max(spec.up_stabilization_ms, spec.down_stabilization_ms);
    auto& recs = st.recommendations;
    std::erase_if(recs, [&](const AutoscaleState::Recommendation& x) {
      return x.time_ms <= now - keep || x.time_ms > now;
    });
    recs.push_back({now, std::min(replicas, ceiling)});
    if (recs.size() > kMaxRecommendations) {
      recs.erase(recs.begin(),
                 recs.begin() + static_cast<std::ptrdiff_t>(recs.size() - kMaxRecommendations));
    }
  };

  const WindowAverage stable = Average(in.samples, now, spec.stable_window_ms);
  const WindowAverage panic = Average(in.samples, now, spec.panic_window_ms);

  // 1. A request waiting at a service with no replicas starts one at once.
  if (current == 0 && latest != nullptr && latest->in_flight > 0 &&
      latest->time_ms > now - spec.stable_window_ms) {
    const std::int64_t wanted =
        std::max<std::int64_t>(1, Wanted(spec.signal, stable.value_milli, target, current));
    r.observed_milli = stable.value_milli;
    r.window_ms = spec.stable_window_ms;
    r.would_be = static_cast<std::uint32_t>(wanted);
    r.waiting = latest->in_flight;
    remember(static_cast<std::uint32_t>(wanted));
    return finish(wanted, AutoscaleCode::kScaleFromZero);
  }

  // 2. Nothing observed: keep what there is.
  if (stable.count == 0) {
    r.window_ms = spec.stable_window_ms;
    r.would_be = current;
    return finish(current, AutoscaleCode::kNoData);
  }

  // 3. What each window asks for.
  const std::int64_t want_stable = Wanted(spec.signal, stable.value_milli, target, current);
  const std::int64_t panic_value = panic.count > 0 ? panic.value_milli : stable.value_milli;
  const std::int64_t want_panic = Wanted(spec.signal, panic_value, target, current);
  r.observed_milli = stable.value_milli;
  r.window_ms = spec.stable_window_ms;
  r.would_be = static_cast<std::uint32_t>(want_stable);

  // 4. Panic: the panic window against what the ready replicas serve.
  if (spec.panic_threshold_pct > 0) {
    // panic_value / (target x ready) >= threshold / 100, exactly: floor(x / t) >= k iff
    // x >= k t. p95 latency is not per replica, so it is compared with the target alone.
    const std::int64_t ready = spec.signal == AutoscaleSignal::kP95Latency
                                   ? 1
                                   : std::clamp<std::int64_t>(in.ready, 1, kMaxWanted);
    const bool over =
        panic_value * 100 / target >= static_cast<std::int64_t>(spec.panic_threshold_pct) * ready;
    if (over && !st.panic_last_over_ms) st.panic_max = current;
    if (over) st.panic_last_over_ms = now;
    if (st.panic_last_over_ms && now - *st.panic_last_over_ms >= spec.stable_window_ms) {
      st.panic_last_over_ms.reset();
      st.panic_max = 0;
    }
  }
  if (st.panic_last_over_ms) {
    const std::int64_t wanted = std::max<std::int64_t>(want_panic, std::max(st.panic_max, current));
    st.panic_max = static_cast<std::uint32_t>(std::min(wanted, kMaxWanted));
    r.observed_milli = panic_value;
    r.window_ms = spec.panic_window_ms;
    r.panic_threshold_pct = spec.panic_threshold_pct;
    r.would_be = static_cast<std::uint32_t>(want_panic);
    remember(static_cast<std::uint32_t>(wanted));
    return finish(wanted, AutoscaleCode::kPanic);
  }

  // 5. Stabilization over the recent recommendations (this one included).
  remember(static_cast<std::uint32_t>(want_stable));
  std::int64_t up = want_stable;
  std::int64_t down = want_stable;
  for (const auto& rec : st.recommendations) {
    if (rec.time_ms > now - spec.up_stabilization_ms) up = std::min<std::int64_t>(up, rec.replicas);
    if (rec.time_ms > now - spec.down_stabilization_ms) {
      down = std::max<std::int64_t>(down, rec.replicas);
    }
  }
  std::int64_t wanted = current;
  AutoscaleCode code = AutoscaleCode::kStable;
  if (up > current) {
    wanted = up;
    if (up < want_stable) code = AutoscaleCode::kStabilizingUp;
  } else if (down < current) {
    wanted = down;
    if (down > want_stable) code = AutoscaleCode::kStabilizingDown;
  } else if (want_stable > current) {
    code = AutoscaleCode::kStabilizingUp;
  } else if (want_stable < current) {
    code = AutoscaleCode::kStabilizingDown;
  }
  if (code == AutoscaleCode::kStabilizingUp) r.window_ms = spec.up_stabilization_ms;
  if (code == AutoscaleCode::kStabilizingDown) r.window_ms = spec.down_stabilization_ms;

  // 6. Zero only after the idle window, where enabled with min 0.
  if (wanted == 0 && to_zero) {
    r.idle_ms = now - *st.last_traffic_ms;
    if (r.idle_ms >= spec.scale_to_zero.idle_window_ms) {
      r.window_ms = spec.scale_to_zero.idle_window_ms;
      return finish(0, AutoscaleCode::kScaleToZero);
    }
    if (current > 0) {
      r.window_ms = spec.scale_to_zero.idle_window_ms;
      return finish(1, AutoscaleCode::kIdle);
    }
  }
  return finish(wanted, code);
}

std::string RenderAutoscaleReason(const AutoscaleReason& r) {
  const std::string signal(model::AutoscaleSignalName(r.signal));
  const std::string observed = model::FormatMilli(r.observed_milli);
  const std::string target = model::FormatMilli(r.target_milli);
  const std::string window = FormatDurationMs(r.window_ms);
  const std::string avg =
      fmt::format("the {} average {} {}", FormatDurationMs(r.window_ms), signal, observed);
  std::string text;
  switch (r.code) {
    case AutoscaleCode::kStable:
      text = fmt::format("stable: {} at a target of {} per replica asks for {} replicas", avg,
                         target, r.would_be);
      break;
    case AutoscaleCode::kPanic:
      text = fmt::format(
          "panic: within the last stable window the panic window's average reached {}% of what "
          "the ready replicas serve at a target of {} per replica; now {} asks for {} replicas, "
          "and there is no scale-down while panicking",
          r.panic_threshold_pct, target, avg, r.would_be);
      break;
    case AutoscaleCode::kStabilizingUp:
      text = fmt::format(
          "stabilizing up: {} asks for {} replicas, but the up stabilization window ({}) holds "
          "the least recent recommendation",
          fmt::format("the stable average {} {} at a target of {}", signal, observed, target),
          r.would_be, window);
      break;
    case AutoscaleCode::kStabilizingDown:
      text = fmt::format(
          "stabilizing down: {} asks for {} replicas, but the down stabilization window ({}) "
          "holds the greatest recent recommendation",
          fmt::format("the stable average {} {} at a target of {}", signal, observed, target),
          r.would_be, window);
      break;
    case AutoscaleCode::kIdle:
      text = fmt::format("idle: no requests for {}; scales to zero after {} without requests",
                         FormatDurationMs(r.idle_ms), window);
      break;
    case AutoscaleCode::kScaleToZero:
      text = fmt::format("scale to zero: no requests for {}, at least the idle window of {}",
                         FormatDurationMs(r.idle_ms), window);
      break;
    case AutoscaleCode::kScaleFromZero:
      text = fmt::format("scale from zero: {} request(s) waiting and no replica; starting {}",
                         r.waiting, r.would_be);
      break;
    case AutoscaleCode::kHeldByMin:
      text = fmt::format(
          "held by min: {} at a target of {} per replica asks for {} replicas, below the minimum "
          "of {}",
          avg, target, r.would_be, r.bound);
      break;
    case AutoscaleCode::kHeldByMax:
      text = fmt::format(
          "held by max: {} at a target of {} per replica asks for {} replicas, above the maximum "
          "of {}",
          avg, target, r.would_be, r.bound);
      break;
    case AutoscaleCode::kNoData:
      text =
          fmt::format("no data: no sample in the last {}; keeping {} replicas", window, r.current);
      break;
  }
  return fmt::format("{} (desired {}, current {}: {} ready)", text, r.desired, r.current, r.ready);
}

}  // namespace berth::sched
