// The per-tenant limits (model::Limits) as a table: each one's YAML name,
// how it is written and bounded, and its default. Shared by the policy's
// parser, its printer and LimitOf; not part of the model's interface.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "model/job.h"
#include "model/policy.h"

namespace berth::model::policy_internal {

// The limits (Limits), how each is written and bounded, and its default.
struct LimitField {
  std::string_view name;
  std::optional<std::int64_t> Limits::*member;
  bool bytes;  // written as a size ("1Mi")
  std::int64_t lo;
  std::int64_t hi;
  std::int64_t fallback;
};
inline constexpr std::array<LimitField, 6> kLimitFields{{
    {"pending_jobs", &Limits::pending_jobs, false, 1, kMaxPendingJobsLimit, kDefaultPendingJobs},
    {"pending_jobs_per_member", &Limits::pending_jobs_per_member, false, 1, kMaxPendingJobsLimit,
     kDefaultPendingJobsPerMember},
    {"spec_bytes", &Limits::spec_bytes, true, 1024, kMaxSpecBytesLimit, kDefaultSpecBytes},
    {"replicas_per_job", &Limits::replicas_per_job, false, 1, kMaxReplicas, kMaxReplicas},
    {"log_bytes_per_run", &Limits::log_bytes_per_run, true, kMinLogBytesPerRun, kMaxLogBytesPerRun,
     kDefaultLogBytesPerRun},
    {"tokens_per_identity", &Limits::tokens_per_identity, false, 1, kMaxTokensPerIdentity,
     kDefaultTokensPerIdentity},
}};
inline constexpr auto kLimitNames = [] {
  std::array<std::string_view, kLimitFields.size()> names{};
  for (std::size_t i = 0; i < kLimitFields.size(); ++i) names[i] = kLimitFields[i].name;
  return names;
}();

inline const LimitField& LimitFieldOf(std::optional<std::int64_t> Limits::*member) {
  for (const auto& f : kLimitFields) {
    if (f.member == member) return f;
  }
  return kLimitFields[0];  // unreachable: every member of Limits is listed
}
}  // namespace berth::model::policy_internal
