#include "store/service_rules.h"

#include <fmt/format.h>

namespace berth::store {

std::string ServiceObjectName(const std::string& tenant, const std::string& name) {
  return fmt::format("service {}/{}", tenant, name);
}

Error ServiceNotFound(const std::string& tenant, const std::string& name) {
  return Error{Code::kNotFound, fmt::format("{} not found", ServiceObjectName(tenant, name)), {}};
}

Error RolloutMoved(const std::string& tenant, const std::string& name) {
  return Error{Code::kFailedPrecondition,
               fmt::format("the rollout of {} moved on since it was read (another resume, or "
                           "the service controller); read it again with berth svc rollout status",
                           ServiceObjectName(tenant, name)),
               "rollout"};
}

Error TooManyServices(const std::string& tenant, std::size_t max_per_tenant) {
  return Error{Code::kResourceExhausted,
               fmt::format("tenant {} already has {} services, the most one tenant may have "
                           "(berthd --max-services-per-tenant); delete one with `berth svc "
                           "delete NAME` or ask a platform admin to raise the limit",
                           tenant, max_per_tenant),
               "name"};
}

Status CheckScaleBounds(const model::ReplicaBounds& bounds) {
  if (bounds.max < 1 || bounds.max > model::kMaxServiceReplicas) {
    return Fail(Code::kInvalidArgument,
                fmt::format("max must be 1 to {}; got {}", model::kMaxServiceReplicas, bounds.max),
                "max");
  }
  if (bounds.min > bounds.max) {
    return Fail(Code::kInvalidArgument,
                fmt::format("min ({}) must not exceed max ({})", bounds.min, bounds.max), "min");
  }
  return Ok();
}

std::optional<ServiceRevision> RevisionBefore(const std::vector<ServiceRevision>& revisions,
                                              std::int64_t current) {
  for (const auto& r : revisions) {
    if (r.revision < current) return r;
  }
  return std::nullopt;
}

Error NoRevisionBefore(const std::string& tenant, const std::string& name, std::int64_t current) {
  return Error{Code::kFailedPrecondition,
               fmt::format("{} has no revision before revision {} to roll back to",
                           ServiceObjectName(tenant, name), current),
               "revision"};
}

}  // namespace berth::store
