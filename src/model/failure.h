// Why a job failed, in words a user can act on: a class, the evidence (the
// log line, exit code or signal that gave it away), and what to do, in
// English and Simplified Chinese. Computed from the job's reason and the
// tail of its failed replica's log whenever the job is shown, so a log line
// that arrives after the exit still counts and nothing is stored twice.
// docs/failures.md is the catalogue.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "model/reason.h"

namespace berth::model {

enum class FailureClass {
  kUserCode,         // the program exited non-zero or was killed, no known cause in its log
  kGpuOutOfMemory,   // CUDA / framework out-of-memory in the log
  kHostOutOfMemory,  // over its memory limit: the kernel's OOM killer acted in the run's cgroup
  kCommunication,    // NCCL, Gloo or c10d collective failure in the log
  kCommandNotFound,  // the command could not be started (exit 127, not found, not executable)
  kGpuHardware,      // Xid, uncorrectable ECC, GPU fallen off the bus in the log
  kNodeLost,         // the node's agent lost the run
  kRunIdentity,      // the node could not run it as its tenant's identity (unknown user, root)
  kMaxRuntime,       // stopped at its max_runtime
  kCancelled,        // cancelled, by whom
  kEvicted,          // preempted, reclaimed or moved, by whom
  kRefused,          // refused by quota
};
inline constexpr FailureClass kLastFailureClass = FailureClass::kRefused;

// "user_code", "gpu_out_of_memory", ... (stable: scripts match on it).
std::string_view FailureClassName(FailureClass c);

struct Failure {
  FailureClass cls = FailureClass::kUserCode;
  std::string evidence;  // a log line, "exit code 3", "signal 9", the reason's detail
};

// Classifies a job by its reason and its failed replica's log tail (the last
// lines are the most telling; pass up to the last 64 KiB). nullopt when the
// reason is not a failure, an eviction or a refusal (running, succeeded,
// waiting for capacity).
std::optional<Failure> ClassifyFailure(const Reason& reason, std::string_view log_tail);

// What happened and what to do, in one or two sentences (with the evidence).
std::string RenderFailure(const Failure& f, Lang lang);

}  // namespace berth::model
