// What a service's replicas should become, as a pure function: the half of
// berthd's service controller (control/service_controller.h) that decides,
// with no clock and no I/O, so that every rule is tested by value and
// berth-sim can run the same code.
//
// (the service's current revision, how many replicas it wants, its rollout
// settings, the replicas it has, its recent crashes, the time) -> which
// replicas to stop, how many to create, and the phase that explains it.
//
// The rules (docs/services.md, "Replicas"):
//  - Replicas of an older revision are replaced, Kubernetes Deployment
//    style: at most `desired + max_surge` replicas in all while any old one
//    remains, and at least `desired - max_unavailable` ready. An old
//    replica that is not ready serves nothing and is stopped at once, so a
//    new revision that never becomes ready keeps the old ones serving.
//  - Above `desired`, replicas of the current revision are stopped: the
//    preemptible ones (above the service's minimum) first, then those not
//    ready, then the newest.
//  - A rollout with canary steps (rollout.canary) first runs each step: the
//    new revision gets ceil(weight x desired) replicas (at least one), the
//    old revision keeps its ready ones (up to `desired`), and the gateway
//    sends `weight` percent of the requests to the new revision
//    (CanaryWeights). A step ends once its replicas have all been ready for
//    its pause (a pause of 0: when `berth svc rollout resume` says so);
//    after the last step the rolling update above replaces the rest.
//  - A replica that ended without being asked to (a crash, an exit, a
//    failure its retry policy gave up on) is replaced after a back-off:
//    10 s after the first such end in the crash window, doubling per end,
//    at most 5 minutes (Kubernetes' CrashLoopBackOff figures).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "model/service.h"

namespace berth::sched {

// One live replica (a job owned by the service, not being stopped).
struct ReplicaView {
  std::int64_t job_id = 0;
  std::int64_t revision = 0;
  // Serving: running and passing its readiness probe (agent/prober.h). A
  // replica that is not (pending, starting, loading its model, failing its
  // probe) counts as unavailable.
  bool ready = false;
  // Running but not ready: since when (its start, or its last verdict of
  // not ready); 0 otherwise.
  TimeMs not_ready_since_ms = 0;
  // Above the service's minimum (docs/services.md, "Replicas"): a replica
  // that may be preempted, and the first to go when the service scales down.
  bool preemptible = false;
};

inline constexpr TimeMs kCrashWindowMs = 600'000;  // 10 min
inline constexpr TimeMs kRolloutProgressDeadlineMs = 600'000;
inline constexpr TimeMs kFirstCrashBackoffMs = 10'000;
inline constexpr TimeMs kMaxCrashBackoffMs = 300'000;

struct ReplicaPlanInput {
  std::int64_t revision = 0;  // the service's current revision
  std::uint32_t desired = 0;
  model::Rollout rollout{};
  std::vector<ReplicaView> replicas{};
  // Replica ends nobody asked for within kCrashWindowMs before now_ms, and
  // when the latest of them was.
  std::uint32_t recent_crashes = 0;
  TimeMs last_crash_ms = 0;
  TimeMs now_ms = 0;
  // A rollout whose new replica has run this long without becoming ready
  // pauses (Kubernetes' progressDeadlineSeconds: 600).
  TimeMs progress_deadline_ms = kRolloutProgressDeadlineMs;
  // Set while a rollout's canary steps run (absent: no steps, or all done):
  // the step it is at, an index into rollout.canary, and since when every
  // replica of that step has been ready (0: not all yet).
  struct CanaryAt {
    std::uint32_t step = 0;
    TimeMs ready_since_ms = 0;
  };
  std::optional<CanaryAt> canary{};
};

// The wait before replacing a replica after `crashes` recent crashes (0: none).
TimeMs CrashBackoffMs(std::uint32_t crashes);

enum class ReplicaStopCause {
  kScaledDown,  // more replicas of the current revision than desired
  kReplaced,    // of an older revision, replaced by the current one
};
std::string_view ReplicaStopCauseName(ReplicaStopCause c);

struct ReplicaStop {
  std::int64_t job_id = 0;
  ReplicaStopCause cause = ReplicaStopCause::kScaledDown;
  bool operator==(const ReplicaStop&) const = default;
};

// What the service is doing, for its status.
enum class ReplicaPhase {
  kSteady,      // as many replicas of the current revision as desired
  kScaling,     // creating or stopping replicas of the current revision
  kRollingOut,  // replacing replicas of an older revision
  kBackingOff,  // replicas missing, held by the crash back-off
  // Rolling out, but a new replica has run past the progress deadline
  // without becoming ready: nothing more of the old revision is stopped
  // (it keeps serving) until the new one is ready or the service is rolled
  // back.
  kRolloutPaused,
  // Running a canary step: part of the traffic on the new revision, the
  // old one serving the rest (ReplicaPlan::canary says which step).
  kCanary,
};
std::string_view ReplicaPhaseName(ReplicaPhase p);

struct ReplicaPlan {
  std::uint32_t create = 0;  // new replicas of the current revision
  std::vector<ReplicaStop> stop{};
  ReplicaPhase phase = ReplicaPhase::kSteady;
  // kBackingOff: when the next replica may be created.
  std::optional<TimeMs> backoff_until_ms{};
  // While a canary step runs (the input's canary, with replicas of an older
  // revision left): where it stands.
  struct Canary {
    std::uint32_t step = 0;        // index into rollout.canary
    std::uint32_t weight_pct = 0;  // of the requests, to the current revision
    std::uint32_t replicas = 0;    // of the current revision at this step
    bool ready = false;            // all of them ready
    // When its pause ends; absent while its replicas are not all ready, or
    // when it waits to be resumed (pause 0).
    std::optional<TimeMs> pause_ends_ms{};
    bool awaiting_resume = false;  // ready, pause 0: `berth svc rollout resume`
    bool advance = false;          // its pause is over: on to the next step
  };
  std::optional<Canary> canary{};
};

ReplicaPlan PlanReplicas(const ReplicaPlanInput& in);

// The gateway's weights for a canary step: `weight_pct` of the requests to
// the `current` servers of the new revision, the rest to the `old` ones,
// under weighted round robin. Returns {each current server's weight, each
// old server's weight}, both within 0..256 (HAProxy's bounds) and in the
// ratio the step asks for, as near as those bounds allow. With no server
// on one side, every server gets 100.
std::pair<int, int> CanaryWeights(std::uint32_t weight_pct, std::uint32_t current,
                                  std::uint32_t old);

}  // namespace berth::sched
