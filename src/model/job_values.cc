// What a job spec means as values: how many jobs an array is, one
// element's spec, the slice of a card a shared-GPU job takes, and the names
// of the spec's and the job's enums (their stored and wire form).
#include <algorithm>
#include <limits>

#include "model/job.h"

namespace berth::model {

std::uint32_t JobCount(const JobSpec& spec) {
  return spec.array ? spec.array->count : 1;
}

JobSpec ArrayElementSpec(const JobSpec& spec, std::uint32_t i) {
  JobSpec e = spec;
  if (!spec.array) return e;
  e.array.reset();
  const JobArray& a = *spec.array;
  e.array_element = ArrayElement{0, a.first + i, a.count};
  if (i < a.params.size()) {
    for (const auto& [k, v] : a.params[i]) e.env[k] = v;
  }
  return e;
}

GpuSlice SliceOf(const Resources& r, std::uint64_t card_memory_bytes) {
  GpuSlice s;
  const std::uint64_t card = card_memory_bytes;
  if (r.gpu_share_millis > 0) {
    // card * millis / 1000, without overflow for any card size.
    s.millis = r.gpu_share_millis;
    s.bytes = card / 1000 * s.millis + card % 1000 * s.millis / 1000;
  } else if (r.gpu_share_bytes > 0) {
    s.bytes = r.gpu_share_bytes;
    if (s.bytes >= card) {
      s.millis = 1000;  // the whole card, or more (then it fits no card)
    } else if (card <= std::numeric_limits<std::uint64_t>::max() / 1000) {
      s.millis = static_cast<std::uint32_t>((s.bytes * 1000 + card - 1) / card);
    } else {
      s.millis = static_cast<std::uint32_t>(s.bytes / (card / 1000 + 1) + 1);
    }
    s.millis = std::clamp<std::uint32_t>(s.millis, 1, 1000);
  }
  return s;
}

std::string_view PriorityName(Priority p) {
  switch (p) {
    case Priority::kLow:
      return "low";
    case Priority::kNormal:
      return "normal";
    case Priority::kHigh:
      return "high";
    case Priority::kCritical:
      return "critical";
  }
  return "normal";
}

std::string_view LoadPatternName(LoadPattern p) {
  switch (p) {
    case LoadPattern::kSteady:
      return "steady";
    case LoadPattern::kPeriodic:
      return "periodic";
    case LoadPattern::kIdle:
      return "idle";
  }
  return "steady";
}

std::optional<LoadPattern> ParseLoadPattern(std::string_view name) {
  for (auto p : {LoadPattern::kSteady, LoadPattern::kPeriodic, LoadPattern::kIdle}) {
    if (LoadPatternName(p) == name) return p;
  }
  return std::nullopt;
}

std::string_view NvlinkIslandName(NvlinkIsland n) {
  switch (n) {
    case NvlinkIsland::kNone:
      return "none";
    case NvlinkIsland::kPrefer:
      return "prefer";
    case NvlinkIsland::kRequire:
      return "require";
  }
  return "none";
}

std::optional<Priority> ParsePriority(std::string_view name) {
  for (auto p : {Priority::kLow, Priority::kNormal, Priority::kHigh, Priority::kCritical}) {
    if (PriorityName(p) == name) return p;
  }
  return std::nullopt;
}

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "Pending";
    case JobState::kScheduled:
      return "Scheduled";
    case JobState::kRunning:
      return "Running";
    case JobState::kSucceeded:
      return "Succeeded";
    case JobState::kFailed:
      return "Failed";
    case JobState::kCancelled:
      return "Cancelled";
  }
  return "Pending";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (auto s : {JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kSucceeded,
                 JobState::kFailed, JobState::kCancelled}) {
    if (JobStateName(s) == name) return s;
  }
  return std::nullopt;
}

std::string_view RunStateName(RunState s) {
  switch (s) {
    case RunState::kStarting:
      return "Starting";
    case RunState::kRunning:
      return "Running";
    case RunState::kExited:
      return "Exited";
  }
  return "Starting";
}

}  // namespace berth::model
