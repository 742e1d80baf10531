// When an interactive session ends on its own, as a pure function: (its
// limits, what was seen of it, the time) -> keep it or end it, and why.
// berthd's service controller gathers the activity each round (requests
// through the gateway, its replica's GPU utilization) and acts on the
// verdict; docs/services.md ("Interactive sessions") has the semantics.
//
// Idle means: no new request through the gateway and every GPU of its
// replica under the idle utilization, for the whole idle window. An open
// connection with nothing on it is not activity (a notebook tab left open
// does not keep a GPU forever). A session whose replica is not running yet
// (waiting for a GPU, starting) is never idle; the lifetime counts from
// when the session was started, waiting included, so it is a bound on how
// long the user's request lives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "model/service.h"

namespace berth::sched {

struct SessionActivity {
  TimeMs started_ms = 0;  // the session's creation (its service record's)
  // When its replica was last seen not running (or first watched): the
  // idle window never reaches back past it.
  TimeMs running_since_ms = 0;
  bool running = false;
  TimeMs last_request_ms = 0;   // the last round that saw a new request; 0: none
  TimeMs last_gpu_busy_ms = 0;  // the last GPU reading at or above the idle level; 0: none
};

enum class SessionEnd { kNone, kLifetime, kIdle };

std::string_view SessionEndName(SessionEnd e);  // "none", "max_lifetime", "idle"

struct SessionVerdict {
  SessionEnd end = SessionEnd::kNone;
  TimeMs expires_ms = 0;     // started + max lifetime
  TimeMs idle_since_ms = 0;  // 0: active now, or not running
  // When idleness would end it if nothing happens (0: never, or not idle).
  TimeMs idle_ends_ms = 0;
  std::string reason{};  // in words, for the replica's end and the audit record
};

// `lifetime_from` names where limits.max_lifetime_ms came from, for the
// reason: the spec's field, or the queue's cap in the policy.
SessionVerdict JudgeSession(const model::SessionLimits& limits, const SessionActivity& activity,
                            TimeMs now_ms, std::string_view lifetime_from = "session.max_lifetime");

}  // namespace berth::sched
