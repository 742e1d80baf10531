#include "model/admission.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace berth::model {

std::string UnknownQueueMessage(const Policy& policy, const std::string& tenant,
                                const std::string& queue) {
  std::vector<std::string> same_tenant;
  for (const auto& q : policy.queues) {
    if (q.tenant == tenant && q.path.size() > tenant.size() + 1) {
      same_tenant.push_back(q.path.substr(tenant.size() + 1));
    }
  }
  std::string known = same_tenant.empty() ? fmt::format("tenant '{}' has no queues in it", tenant)
                                          : fmt::format("queues of tenant {}: {}", tenant,
                                                        fmt::join(same_tenant, ", "));
  return fmt::format("queue {}/{} does not exist in policy v{}; {} (see berth policy show)", tenant,
                     queue, policy.version, known);
}

Status AdmitSubmission(const Policy& policy, const JobSpec& spec, std::size_t spec_bytes,
                       const PendingCount& pending, std::string_view by) {
  if (policy.FindQueue(spec.tenant + "/" + spec.queue) == nullptr) {
    return InvalidField("queue", UnknownQueueMessage(policy, spec.tenant, spec.queue));
  }
  BERTH_RETURN_IF_ERROR(CheckStorageGrants(policy, spec));
  BERTH_RETURN_IF_ERROR(CheckSpecLimits(policy, spec, spec_bytes));
  const std::int64_t adds = JobCount(spec);
  const EffectiveLimit member = LimitOf(policy, spec.tenant, &Limits::pending_jobs_per_member);
  // Submissions with no identity (tests, tools on the store) have no member.
  if (!by.empty() && pending.member + adds > member.value) {
    return Fail(
        Code::kResourceExhausted,
        fmt::format("{} has {} pending jobs in tenant {} and this submission adds {}; "
                    "the limit is {} per member (limit pending_jobs_per_member, {}). "
                    "Wait for some to start, or cancel some",
                    by, pending.member, spec.tenant, adds, member.value, member.Describe()));
  }
  const EffectiveLimit tenant = LimitOf(policy, spec.tenant, &Limits::pending_jobs);
  if (pending.tenant + adds > tenant.value) {
    return Fail(Code::kResourceExhausted,
                fmt::format("tenant {} has {} pending jobs and this submission adds {}; the "
                            "limit is {} (limit pending_jobs, {}). Wait for some to start, or "
                            "cancel some",
                            spec.tenant, pending.tenant, adds, tenant.value, tenant.Describe()));
  }
  return Ok();
}

}  // namespace berth::model
