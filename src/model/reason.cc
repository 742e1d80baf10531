#include "model/reason.h"

#include <fmt/format.h>

#include <array>

namespace berth::model {

std::string_view ReasonCodeName(ReasonCode code) {
  switch (code) {
    case ReasonCode::kNone:
      return "None";
    case ReasonCode::kQueued:
      return "Queued";
    case ReasonCode::kNoNodes:
      return "NoNodes";
    case ReasonCode::kBehindInQueue:
      return "BehindInQueue";
    case ReasonCode::kNoNodeFits:
      return "NoNodeFits";
    case ReasonCode::kScheduled:
      return "Scheduled";
    case ReasonCode::kRunning:
      return "Running";
    case ReasonCode::kSucceeded:
      return "Succeeded";
    case ReasonCode::kFailedExitCode:
      return "FailedExitCode";
    case ReasonCode::kFailedToStart:
      return "FailedToStart";
    case ReasonCode::kMaxRuntimeExceeded:
      return "MaxRuntimeExceeded";
    case ReasonCode::kCancelled:
      return "Cancelled";
    case ReasonCode::kRunLost:
      return "RunLost";
  }
  return "None";
}

namespace {

std::int64_t Count(const Reason& r, std::string_view key) {
  auto it = r.counts.find(key);
  return it == r.counts.end() ? 0 : it->second;
}

}  // namespace

std::string RenderReason(const Reason& r) {
  switch (r.code) {
    case ReasonCode::kNone:
      return "";
    case ReasonCode::kQueued:
      return "waiting for the next scheduling cycle";
    case ReasonCode::kNoNodes:
      return "no nodes are registered; start berth-agent on a GPU host";
    case ReasonCode::kBehindInQueue:
      return fmt::format("waiting behind job {} in queue order ({} ahead)", Count(r, "blocked_by"),
                         Count(r, "position"));
    case ReasonCode::kNoNodeFits: {
      std::string causes;
      static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kCauses{{
          {kCauseNotReady, "not ready"},
          {kCauseTaint, "a NoSchedule taint the job does not tolerate"},
          {kCauseGpuModel, "no GPU of the requested model"},
          {kCauseGpuMemory, "GPUs with too little memory"},
          {kCauseTooFewGpus, "too few free GPUs"},
          {kCauseCpu, "too little free CPU"},
          {kCauseMemory, "too little free memory"},
      }};
      for (auto [key, text] : kCauses) {
        if (auto n = Count(r, key); n > 0) {
          causes += fmt::format("{}{} {}", causes.empty() ? "" : ", ", n, text);
        }
      }
      if (auto placed = Count(r, kCauseGang); placed > 0) {
        return fmt::format(
            "the gang does not fit: only {} of {} replicas needing {} GPU(s) each have room; "
            "for the next one, {} of {} nodes were rejected: {}",
            placed, Count(r, "replicas"), Count(r, "gpus_per_replica"), Count(r, "nodes"),
            Count(r, "nodes"), causes);
      }
      return fmt::format("0/{} nodes can take a replica needing {} GPU(s): {}", Count(r, "nodes"),
                         Count(r, "gpus_per_replica"), causes);
    }
    case ReasonCode::kScheduled:
      return "placed; starting on its node(s)";
    case ReasonCode::kRunning:
      return "running";
    case ReasonCode::kSucceeded:
      return "all replicas exited 0";
    case ReasonCode::kFailedExitCode:
      return Count(r, "signal") != 0 ? fmt::format("replica {} was killed by signal {}",
                                                   Count(r, "replica"), Count(r, "signal"))
                                     : fmt::format("replica {} exited with code {}",
                                                   Count(r, "replica"), Count(r, "exit_code"));
    case ReasonCode::kFailedToStart:
      return fmt::format("replica {} could not start: {}", Count(r, "replica"), r.detail);
    case ReasonCode::kMaxRuntimeExceeded:
      return fmt::format("stopped after its max_runtime of {} s", Count(r, "max_runtime_s"));
    case ReasonCode::kCancelled:
      return r.detail.empty() ? "cancelled" : fmt::format("cancelled by {}", r.detail);
    case ReasonCode::kRunLost:
      return fmt::format("replica {} was lost: {}", Count(r, "replica"), r.detail);
  }
  return "";
}

}  // namespace berth::model
