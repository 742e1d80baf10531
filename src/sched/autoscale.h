// The autoscaler as a pure function, like the scheduler: (the service's
// autoscaling spec, its replicas, a window of observed samples, the time,
// and the autoscaler's own state from its last call) -> desired replicas,
// the new state and a reason. No clock, no I/O: berthd runs it on its loop
// and berth-sim runs the same code on a trace (src/sim/service_replay.h).
//
// The semantics, Berth's defaults and the anchors' (Knative/KServe, HPA,
// Ray Serve) are in docs/services.md. In short, for each call:
//  1. Scale from zero: no replicas and a request waiting -> at least one,
//     at once (no window, no stabilization).
//  2. No sample in the stable window -> keep the replicas (no_data).
//  3. The signal averaged over the stable window and over the panic window,
//     each divided by the per-replica target x target_utilization, gives
//     the replicas each window asks for.
//  4. Panic (Knative): the panic window's average at or above
//     panic_threshold% of what the ready replicas serve at target starts
//     panic mode; it lasts a stable window past the last such sample. While
//     panicking the panic window's count is used, and the service never
//     scales down (it holds the most it wanted since panic began).
//  5. Otherwise, HPA-style stabilization over the recommendations of the
//     last calls: scale up to the least recommendation of the up window,
//     scale down to the greatest of the down window.
//  6. Scale to zero only where enabled with min 0, once no request has been
//     seen for the idle window (and the down window agrees).
//  7. min/max bounds, with held_by_min / held_by_max.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "model/service.h"

namespace berth::sched {

// One observation of the service, over the period that ends at `time_ms`.
struct AutoscaleSample {
  TimeMs time_ms = 0;
  // The signal, service-wide, in thousandths of its unit: requests in flight
  // or waiting (concurrency), requests per second (rps), waiting requests
  // (queue_depth), the metric summed over the replicas (metric); the
  // gateway's p95 latency in ms (p95_latency).
  std::int64_t value_milli = 0;
  std::int64_t in_flight = 0;  // requests in flight or waiting at `time_ms`
  std::int64_t requests = 0;   // requests that arrived during the period
};

// What the autoscaler remembers between calls; returned in each decision
// and passed back into the next. A default state is a service's first call.
struct AutoscaleState {
  struct Recommendation {
    TimeMs time_ms = 0;
    std::uint32_t replicas = 0;
    bool operator==(const Recommendation&) const = default;
  };
  // The last calls' recommendations, oldest first, none older than the
  // longer stabilization window (and at most kMaxRecommendations).
  std::vector<Recommendation> recommendations{};
  // Panic mode lasts until a stable window past this (the last sample at
  // or above the panic threshold); nullopt: not panicking.
  std::optional<TimeMs> panic_last_over_ms{};
  std::uint32_t panic_max = 0;  // the most replicas wanted since panic began
  // The last time a request arrived or was in flight; set to the first
  // call's time, so a new service waits a whole idle window.
  std::optional<TimeMs> last_traffic_ms{};
  bool operator==(const AutoscaleState&) const = default;
};
inline constexpr std::size_t kMaxRecommendations = 4096;

struct AutoscaleInput {
  model::Autoscaling spec{};
  model::ReplicaBounds replicas{};
  TimeMs now_ms = 0;
  std::uint32_t ready = 0;
  std::uint32_t starting = 0;  // started, not yet ready
  // Oldest first; samples outside the windows are ignored, later than
  // now_ms too.
  std::span<const AutoscaleSample> samples{};
  AutoscaleState state{};
};

enum class AutoscaleCode {
  kStable,           // what the stable window asks for
  kPanic,            // the panic window asks for more, fast
  kStabilizingUp,    // wants more; held by the up window's least recommendation
  kStabilizingDown,  // wants fewer; held by the down window's greatest one
  kIdle,             // no requests, but not yet for the idle window
  kScaleToZero,      // no requests for the idle window
  kScaleFromZero,    // no replicas and a request waiting
  kHeldByMin,        // wants fewer than replicas.min (or 1 without scale to zero)
  kHeldByMax,        // wants more than replicas.max
  kNoData,           // no sample in the stable window
};
std::string_view AutoscaleCodeName(AutoscaleCode code);

// Why the decision is what it is, with the numbers behind it.
struct AutoscaleReason {
  AutoscaleCode code = AutoscaleCode::kNoData;
  model::AutoscaleSignal signal = model::AutoscaleSignal::kConcurrency;
  std::int64_t observed_milli = 0;  // the window's average, service-wide
  std::int64_t target_milli = 0;    // per replica: target x target_utilization
  std::int64_t window_ms = 0;       // the window behind the code
  std::uint32_t would_be = 0;       // replicas the signal alone asks for
  std::uint32_t current = 0;        // ready + starting
  std::uint32_t ready = 0;
  std::uint32_t desired = 0;
  std::uint32_t bound = 0;                // kHeldByMin / kHeldByMax: the bound
  std::uint32_t panic_threshold_pct = 0;  // kPanic: the threshold reached
  std::int64_t idle_ms = 0;               // kIdle / kScaleToZero: time without requests
  std::int64_t waiting = 0;               // kScaleFromZero: requests waiting
  bool operator==(const AutoscaleReason&) const = default;
};

struct AutoscaleDecision {
  std::uint32_t desired = 0;
  AutoscaleState state{};
  AutoscaleReason reason{};
};

AutoscaleDecision Decide(const AutoscaleInput& in);

// The reason in plain words, with its numbers: "panic: the 6s average
// concurrency 412 is at least 200% of what 2 ready replicas serve at the
// target 70 (100 x 70%); 6 replicas wanted".
std::string RenderAutoscaleReason(const AutoscaleReason& reason);

}  // namespace berth::sched
