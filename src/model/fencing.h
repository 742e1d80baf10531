// Fencing: the timing contract that keeps a node cut off from berthd from
// running a job's attempt while berthd starts the next one elsewhere. The
// agent stops its own runs a fixed time after its last contact with berthd;
// berthd presumes a run on a silent node gone only once that time, and the
// run's stop grace, have certainly passed on the node as well. Both sides
// compute from this header, so the two clocks cannot drift apart in code
// (docs/operations.md, "Fencing").
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/clock.h"

namespace berth::model {

// berth-agent --fence-grace, and berthd --agent-fence-grace, by default.
inline constexpr TimeMs kDefaultFenceGraceMs = 30'000;

// The agent's gRPC keepalive on its stream to berthd: a ping this often,
// and the stream closed when berthd does not answer one within the timeout.
// The agent counts an open registered stream as contact, so these bound how
// long after berthd last heard from it the agent may still believe itself
// in contact.
inline constexpr TimeMs kAgentKeepaliveMs = 2'000;
inline constexpr TimeMs kAgentKeepaliveTimeoutMs = 2'000;

// The agent's longest reconnect backoff, which gRPC also takes as the time
// one connection attempt may last: the agent's worker may wait that long
// (plus 20% jitter) in a connection attempt before it supervises again.
inline constexpr TimeMs kAgentConnectTimeoutMs = 2'000;

// Scheduling slack: the agent's supervision tick, berthd's pass tick and
// the kernel delivering SIGKILL, with room to spare.
inline constexpr TimeMs kFenceSlackMs = 1'000;

// How long after its last contact with berthd an agent stops its runs.
constexpr TimeMs AgentFenceAfterMs(TimeMs lease_ms, TimeMs fence_grace_ms) {
  return lease_ms + fence_grace_ms;
}

// How long a run may outlive the stop the agent records for it: the stop
// signal, then SIGKILL one grace later, or two for a container, whose
// signal goes through `podman kill` (Runner::Stop).
constexpr TimeMs StopBoundMs(TimeMs run_grace_ms) {
  return 2 * std::max<TimeMs>(run_grace_ms, 0);
}

// berthd's side of the contract (ControllerOptions).
struct FenceTiming {
  TimeMs lease_ms = 0;
  TimeMs heartbeat_interval_ms = 0;
  TimeMs agent_fence_grace_ms = kDefaultFenceGraceMs;
  TimeMs node_lost_grace_ms = 0;
};

// How much later than berthd's last heartbeat from a node the node's agent
// may stop its runs, past its own fence time: the heartbeat lost in flight
// when the cut came and the keepalive noticing berthd has gone quiet (the
// agent believes itself in contact meanwhile), then a connection attempt
// the agent's worker may be waiting in when the fence time comes.
constexpr TimeMs FenceMarginMs(const FenceTiming& t) {
  return t.heartbeat_interval_ms + kAgentKeepaliveMs + kAgentKeepaliveTimeoutMs +
         kAgentConnectTimeoutMs + kFenceSlackMs;
}

// How long after berthd last heard from a node a run there (stopped within
// `run_grace_ms` of its stop signal) may be presumed gone: the operator's
// --node-lost-grace after the lease, but never before the agent has fenced
// it and killed whatever was left of it.
constexpr TimeMs PresumeGoneAfterMs(const FenceTiming& t, TimeMs run_grace_ms) {
  const TimeMs fenced = t.agent_fence_grace_ms + StopBoundMs(run_grace_ms) + FenceMarginMs(t);
  return t.lease_ms + std::max(t.node_lost_grace_ms, fenced);
}

}  // namespace berth::model
