#include "sched/session.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/units.h"

namespace berth::sched {

std::string_view SessionEndName(SessionEnd e) {
  switch (e) {
    case SessionEnd::kNone:
      return "none";
    case SessionEnd::kLifetime:
      return "max_lifetime";
    case SessionEnd::kIdle:
      return "idle";
  }
  return "none";
}

SessionVerdict JudgeSession(const model::SessionLimits& limits, const SessionActivity& activity,
                            TimeMs now_ms, std::string_view lifetime_from) {
  SessionVerdict v;
  v.expires_ms = activity.started_ms + limits.max_lifetime_ms;
  if (now_ms >= v.expires_ms) {
    v.end = SessionEnd::kLifetime;
    v.reason = fmt::format("session reached its maximum lifetime of {} ({})",
                           FormatDurationMs(limits.max_lifetime_ms), lifetime_from);
    return v;
  }
  if (!activity.running) return v;
  v.idle_since_ms =
      std::max({activity.running_since_ms, activity.last_request_ms, activity.last_gpu_busy_ms});
  if (limits.idle_window_ms == 0) return v;
  v.idle_ends_ms = v.idle_since_ms + limits.idle_window_ms;
  if (now_ms >= v.idle_ends_ms) {
    v.end = SessionEnd::kIdle;
    v.reason = fmt::format(
        "session idle for {} (session.idle_window): no request through the gateway and its GPUs "
        "under {}% utilization since {}",
        FormatDurationMs(now_ms - v.idle_since_ms), limits.idle_gpu_util_pct,
        FormatTimeMs(v.idle_since_ms));
  }
  return v;
}

}  // namespace berth::sched
