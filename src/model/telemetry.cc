#include "model/telemetry.h"

namespace berth::model {

std::uint32_t ProfileUtilization(const LoadProfile& profile, std::int64_t elapsed_ms) {
  if (profile.idle_after_ms > 0 && elapsed_ms >= profile.idle_after_ms) {
    return profile.idle_util_pct;
  }
  switch (profile.pattern) {
    case LoadPattern::kSteady:
      return profile.util_pct;
    case LoadPattern::kIdle:
      return profile.idle_util_pct;
    case LoadPattern::kPeriodic: {
      if (profile.period_ms <= 0) return profile.util_pct;
      const std::int64_t phase = elapsed_ms < 0 ? 0 : elapsed_ms % profile.period_ms;
      return phase < profile.period_ms / 2 ? profile.util_pct : profile.idle_util_pct;
    }
  }
  return profile.util_pct;
}

}  // namespace berth::model
