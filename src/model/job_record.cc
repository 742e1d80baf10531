#include "model/job_record.h"

#include <array>
#include <utility>

namespace berth::model {

namespace {

constexpr std::array<std::pair<StopCause, std::string_view>, 13> kStopCauses{{
    {StopCause::kNone, ""},
    {StopCause::kCancelled, "cancelled"},
    {StopCause::kMaxRuntime, "max_runtime"},
    {StopCause::kGang, "gang"},
    {StopCause::kPreempted, "preempted"},
    {StopCause::kReclaimed, "reclaimed"},
    {StopCause::kMoved, "moved"},
    {StopCause::kDrained, "drained"},
    {StopCause::kLost, "lost"},
    {StopCause::kFenced, "fenced"},
    {StopCause::kGpuError, "gpu_error"},
    {StopCause::kLiveness, "liveness"},
    {StopCause::kUnknown, "unknown"},
}};

}  // namespace

std::string_view StopCauseName(StopCause cause) {
  for (const auto& [c, name] : kStopCauses) {
    if (c == cause) return name;
  }
  return "";
}

std::optional<StopCause> ParseStopCause(std::string_view name) {
  for (const auto& [c, n] : kStopCauses) {
    if (n == name) return c;
  }
  return std::nullopt;
}

bool IsEviction(StopCause cause) {
  return cause == StopCause::kPreempted || cause == StopCause::kReclaimed ||
         cause == StopCause::kMoved;
}

}  // namespace berth::model
