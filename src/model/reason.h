// Reasons are data: a code plus the numbers behind it. The scheduler and the
// control loop produce them; the API renders them into words at the edge, so
// a script can act on `code` and `counts` while a person reads the message.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace berth::model {

enum class ReasonCode {
  kNone,
  kQueued,         // not looked at yet: submitted after the last cycle
  kNoNodes,        // the cluster has no nodes registered
  kBehindInQueue,  // FIFO: an earlier job in the same queue is waiting
  kNoNodeFits,     // every node was rejected; counts say why, per cause
  kScheduled,      // placed; waiting for the agents to start it
  kRunning,
  kSucceeded,
  kFailedExitCode,  // a replica exited non-zero or by a signal
  kFailedToStart,   // command not found, bad working directory
  kMaxRuntimeExceeded,
  kCancelled,
  kRunLost,  // the agent no longer knows the run (its state was lost)
};

std::string_view ReasonCodeName(ReasonCode code);

// Keys of `counts` for kNoNodeFits: how many nodes each cause rejected.
inline constexpr std::string_view kCauseNotReady = "node_not_ready";
inline constexpr std::string_view kCauseTaint = "untolerated_taint";
inline constexpr std::string_view kCauseGpuModel = "gpu_model_mismatch";
inline constexpr std::string_view kCauseGpuMemory = "gpu_memory_too_small";
inline constexpr std::string_view kCauseTooFewGpus = "too_few_free_gpus";
inline constexpr std::string_view kCauseCpu = "too_little_free_cpu";
inline constexpr std::string_view kCauseMemory = "too_little_free_memory";
// For kNoNodeFits of a gang: how many replicas had room before one did not.
inline constexpr std::string_view kCauseGang = "gang_does_not_fit";

struct Reason {
  ReasonCode code = ReasonCode::kNone;
  // Structured numbers: per-cause node counts, the job ahead, requested GPUs.
  std::map<std::string, std::int64_t, std::less<>> counts;
  // Free text only where the data is text (a start error, who cancelled).
  std::string detail;

  bool operator==(const Reason&) const = default;
};

// English rendering for the CLI and API ("0/3 nodes fit: 2 too few free GPUs, ...").
std::string RenderReason(const Reason& reason);

}  // namespace berth::model
