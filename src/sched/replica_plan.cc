#include "sched/replica_plan.h"

#include <algorithm>

namespace berth::sched {
namespace {

// Stop order among replicas alike: preemptible (above the minimum) first,
// then not ready, then the newest.
bool StopsFirst(const ReplicaView& a, const ReplicaView& b) {
  if (a.preemptible != b.preemptible) return a.preemptible;
  if (a.ready != b.ready) return !a.ready;
  return a.job_id > b.job_id;
}

}  // namespace

TimeMs CrashBackoffMs(std::uint32_t crashes) {
  if (crashes == 0) return 0;
  TimeMs wait = kFirstCrashBackoffMs;
  for (std::uint32_t i = 1; i < crashes && wait < kMaxCrashBackoffMs; ++i) wait *= 2;
  return std::min(wait, kMaxCrashBackoffMs);
}

std::string_view ReplicaStopCauseName(ReplicaStopCause c) {
  switch (c) {
    case ReplicaStopCause::kScaledDown:
      return "scaled_down";
    case ReplicaStopCause::kReplaced:
      return "replaced";
  }
  return "scaled_down";
}

std::string_view ReplicaPhaseName(ReplicaPhase p) {
  switch (p) {
    case ReplicaPhase::kSteady:
      return "steady";
    case ReplicaPhase::kScaling:
      return "scaling";
    case ReplicaPhase::kRollingOut:
      return "rolling_out";
    case ReplicaPhase::kBackingOff:
      return "backing_off";
    case ReplicaPhase::kRolloutPaused:
      return "rollout_paused";
  }
  return "steady";
}

ReplicaPlan PlanReplicas(const ReplicaPlanInput& in) {
  ReplicaPlan plan;
  std::vector<ReplicaView> current;
  std::vector<ReplicaView> old_ready;
  bool rolling = false;
  for (const ReplicaView& r : in.replicas) {
    if (r.revision == in.revision) {
      current.push_back(r);
    } else if (r.ready) {
      old_ready.push_back(r);
      rolling = true;
    } else {
      // An old replica that is not ready serves nothing: replaced at once.
      plan.stop.push_back({r.job_id, ReplicaStopCause::kReplaced});
      rolling = true;
    }
  }

  // Current replicas beyond the desired count.
  std::sort(current.begin(), current.end(), StopsFirst);
  std::size_t excess = current.size() > in.desired ? current.size() - in.desired : 0;
  for (std::size_t i = 0; i < excess; ++i) {
    plan.stop.push_back({current[i].job_id, ReplicaStopCause::kScaledDown});
  }
  const auto kept = static_cast<std::uint32_t>(current.size() - excess);
  std::uint32_t kept_ready = 0;
  for (std::size_t i = excess; i < current.size(); ++i) kept_ready += current[i].ready ? 1 : 0;

  // Old ready replicas go while enough others stay ready.
  std::sort(old_ready.begin(), old_ready.end(), StopsFirst);
  const std::uint32_t min_available =
      in.desired > in.rollout.max_unavailable ? in.desired - in.rollout.max_unavailable : 0;
  const auto available = static_cast<std::uint32_t>(kept_ready + old_ready.size());
  const std::uint32_t can_stop = available > min_available ? available - min_available : 0;
  const std::size_t old_stopped = std::min<std::size_t>(can_stop, old_ready.size());
  for (std::size_t i = 0; i < old_stopped; ++i) {
    plan.stop.push_back({old_ready[i].job_id, ReplicaStopCause::kReplaced});
  }
  const auto old_left = static_cast<std::uint32_t>(old_ready.size() - old_stopped);

  // New replicas of the current revision, within the surge while old ones
  // remain.
  const std::uint32_t want = in.desired > kept ? in.desired - kept : 0;
  const std::uint64_t max_total =
      std::uint64_t{in.desired} + (old_left > 0 ? in.rollout.max_surge : 0);
  const std::uint64_t total = std::uint64_t{kept} + old_left;
  const std::uint64_t room = max_total > total ? max_total - total : 0;
  std::uint32_t create = static_cast<std::uint32_t>(std::min<std::uint64_t>(want, room));
  if (create > 0 && in.recent_crashes > 0) {
    const TimeMs until = in.last_crash_ms + CrashBackoffMs(in.recent_crashes);
    if (in.now_ms < until) {
      create = 0;
      plan.backoff_until_ms = until;
    }
  }
  plan.create = create;

  const bool stalled = std::any_of(current.begin(), current.end(), [&](const ReplicaView& r) {
    return r.not_ready_since_ms > 0 && in.now_ms - r.not_ready_since_ms >= in.progress_deadline_ms;
  });
  if (rolling && stalled) {
    plan.phase = ReplicaPhase::kRolloutPaused;
  } else if (rolling) {
    plan.phase = ReplicaPhase::kRollingOut;
  } else if (plan.backoff_until_ms) {
    plan.phase = ReplicaPhase::kBackingOff;
  } else if (plan.create > 0 || !plan.stop.empty() || kept_ready < kept) {
    plan.phase = ReplicaPhase::kScaling;
  }
  return plan;
}

}  // namespace berth::sched
