#include "sched/replica_plan.h"

#include <algorithm>
#include <cmath>

namespace berth::sched {
namespace {

// Stop order among replicas alike: preemptible (above the minimum) first,
// then not ready, then the newest.
bool StopsFirst(const ReplicaView& a, const ReplicaView& b) {
  if (a.preemptible != b.preemptible) return a.preemptible;
  if (a.ready != b.ready) return !a.ready;
  return a.job_id > b.job_id;
}

// Creations held by the crash back-off, if it runs.
std::uint32_t AfterBackoff(const ReplicaPlanInput& in, std::uint32_t create, ReplicaPlan& plan) {
  if (create > 0 && in.recent_crashes > 0) {
    const TimeMs until = in.last_crash_ms + CrashBackoffMs(in.recent_crashes);
    if (in.now_ms < until) {
      plan.backoff_until_ms = until;
      return 0;
    }
  }
  return create;
}

bool Stalled(const ReplicaPlanInput& in, const std::vector<ReplicaView>& current) {
  return std::any_of(current.begin(), current.end(), [&](const ReplicaView& r) {
    return r.not_ready_since_ms > 0 && in.now_ms - r.not_ready_since_ms >= in.progress_deadline_ms;
  });
}

// A canary step (see the header): `current` sorted stop-first, replicas of
// an older revision that are not ready already in plan.stop.
ReplicaPlan PlanCanaryStep(const ReplicaPlanInput& in, ReplicaPlan plan,
                           const std::vector<ReplicaView>& current,
                           std::vector<ReplicaView> old_ready) {
  const model::CanaryStep& step = in.rollout.canary[in.canary->step];
  const std::uint64_t scaled = (std::uint64_t{step.weight_pct} * in.desired + 99) / 100;
  const auto want = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(scaled, 1, in.desired));
  const std::size_t excess = current.size() > want ? current.size() - want : 0;
  for (std::size_t i = 0; i < excess; ++i) {
    plan.stop.push_back({current[i].job_id, ReplicaStopCause::kScaledDown});
  }
  const auto kept = static_cast<std::uint32_t>(current.size() - excess);
  std::uint32_t kept_ready = 0;
  for (std::size_t i = excess; i < current.size(); ++i) kept_ready += current[i].ready ? 1 : 0;
  // The old revision serves the rest: as many as desired, no more.
  std::sort(old_ready.begin(), old_ready.end(), StopsFirst);
  const std::size_t old_excess = old_ready.size() > in.desired ? old_ready.size() - in.desired : 0;
  for (std::size_t i = 0; i < old_excess; ++i) {
    plan.stop.push_back({old_ready[i].job_id, ReplicaStopCause::kScaledDown});
  }
  plan.create = AfterBackoff(in, want > kept ? want - kept : 0, plan);

  ReplicaPlan::Canary c;
  c.step = in.canary->step;
  c.weight_pct = step.weight_pct;
  c.replicas = want;
  c.ready = kept == want && kept_ready == want;
  if (c.ready && step.pause_ms == 0) {
    c.awaiting_resume = true;
  } else if (c.ready) {
    const TimeMs since = in.canary->ready_since_ms > 0 ? in.canary->ready_since_ms : in.now_ms;
    c.pause_ends_ms = since + step.pause_ms;
    c.advance = in.canary->ready_since_ms > 0 && in.now_ms >= *c.pause_ends_ms;
  }
  plan.canary = c;
  plan.phase = Stalled(in, current) ? ReplicaPhase::kRolloutPaused : ReplicaPhase::kCanary;
  return plan;
}

}  // namespace

std::pair<int, int> CanaryWeights(std::uint32_t weight_pct, std::uint32_t current,
                                  std::uint32_t old) {
  if (current == 0 || old == 0) return {100, 100};
  const std::uint32_t pct = std::min<std::uint32_t>(weight_pct, 100);
  if (pct == 100) return {100, 0};
  if (pct == 0) return {0, 100};
  // Exact when it fits: each current server pct x old, each old one
  // (100 - pct) x current.
  const std::uint64_t a = std::uint64_t{pct} * old;
  const std::uint64_t b = std::uint64_t{100 - pct} * current;
  if (std::max(a, b) <= 256) return {static_cast<int>(a), static_cast<int>(b)};
  // Else the pair within 1..256 whose split comes nearest.
  const double want = pct / 100.0;
  std::pair<int, int> best{1, 1};
  double best_error = 2;
  for (int wo = 1; wo <= 256; ++wo) {
    const double ideal = static_cast<double>(a) * wo / static_cast<double>(b);
    const int wc = static_cast<int>(std::clamp(std::lround(ideal), 1L, 256L));
    const double share = static_cast<double>(wc) * current /
                         (static_cast<double>(wc) * current + static_cast<double>(wo) * old);
    const double error = std::abs(share - want);
    if (error < best_error) {
      best_error = error;
      best = {wc, wo};
    }
  }
  return best;
}

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
    case ReplicaPhase::kCanary:
      return "canary";
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

  std::sort(current.begin(), current.end(), StopsFirst);
  if (rolling && in.canary && in.canary->step < in.rollout.canary.size() && in.desired > 0) {
    return PlanCanaryStep(in, std::move(plan), current, std::move(old_ready));
  }

  // Current replicas beyond the desired count.
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
  plan.create =
      AfterBackoff(in, static_cast<std::uint32_t>(std::min<std::uint64_t>(want, room)), plan);

  if (rolling && Stalled(in, current)) {
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
