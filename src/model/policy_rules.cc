// The policy's rules for one job and one tenant: storage grants, spec
// limits, the run identity and the container network.
#include <fmt/format.h>

#include <filesystem>

#include "common/hash.h"
#include "model/job.h"
#include "model/policy.h"
#include "model/policy_limits.h"

namespace berth::model {

using policy_internal::LimitField;
using policy_internal::LimitFieldOf;

std::uint32_t DerivedUid(std::string_view tenant) {
  return kDerivedUidBase + Fnv1a32(tenant) % kDerivedUidSpan;
}

Status CheckStorageGrants(const Policy& policy, const JobSpec& spec) {
  const std::vector<StorageGrant>* grants = nullptr;
  if (auto it = policy.tenants.find(spec.tenant); it != policy.tenants.end()) {
    grants = &it->second.storage;
  }
  auto describe = [&] {
    if (grants == nullptr || grants->empty()) {
      return fmt::format("tenant {} has no storage granted", spec.tenant);
    }
    std::string list;
    for (const auto& g : *grants) {
      list += fmt::format("{}{} ({})", list.empty() ? "" : ", ", g.path,
                          g.writable ? "read-write" : "read-only");
    }
    return fmt::format("tenant {} may use {}", spec.tenant, list);
  };
  auto check = [&](const std::string& field, const std::string& path, bool write) -> Status {
    if (path.empty()) return Ok();
    if (std::filesystem::path(path).lexically_normal().string() != path) {
      return InvalidField(
          field, fmt::format("'{}' is not a normal path (no ., .., // or trailing "
                             "/); write {}",
                             path, std::filesystem::path(path).lexically_normal().string()));
    }
    const StorageGrant* read_only_match = nullptr;
    if (grants != nullptr) {
      for (const auto& g : *grants) {
        const bool under =
            g.path == "/" || path == g.path ||
            (path.size() > g.path.size() && path.starts_with(g.path) && path[g.path.size()] == '/');
        if (!under) continue;
        if (g.writable || !write) return Ok();
        read_only_match = &g;
      }
    }
    if (read_only_match != nullptr) {
      return InvalidField(
          field, fmt::format("{} is under {}, which tenant {} may only read; {} "
                             "needs a read-write grant (tenants.{}.storage in the "
                             "policy), or mark a mount read_only: true",
                             path, read_only_match->path, spec.tenant, field, spec.tenant));
    }
    return InvalidField(field, fmt::format("{} is outside the storage granted to its tenant: {}; "
                                           "use a path under a grant, or ask a platform admin to "
                                           "grant it (tenants.{}.storage in the policy)",
                                           path, describe(), spec.tenant));
  };
  BERTH_RETURN_IF_ERROR(check("working_dir", spec.working_dir, true));
  BERTH_RETURN_IF_ERROR(check("checkpoint.dir", spec.checkpoint.dir, true));
  BERTH_RETURN_IF_ERROR(check("checkpoint.file", spec.checkpoint.file, true));
  for (std::size_t i = 0; i < spec.mounts.size(); ++i) {
    BERTH_RETURN_IF_ERROR(
        check(fmt::format("mounts[{}].path", i), spec.mounts[i].path, !spec.mounts[i].read_only));
  }
  return Ok();
}

std::string_view ContainerNetworkName(ContainerNetwork n) {
  switch (n) {
    case ContainerNetwork::kNone:
      return "none";
    case ContainerNetwork::kHost:
      return "host";
    case ContainerNetwork::kPrivate:
      break;
  }
  return "private";
}

ContainerNetwork ContainerNetworkOf(const Policy& policy, std::string_view tenant) {
  auto it = policy.tenants.find(std::string(tenant));
  return it == policy.tenants.end() ? ContainerNetwork::kPrivate : it->second.container_network;
}

EffectiveLimit LimitOf(const Policy& policy, std::string_view tenant,
                       std::optional<std::int64_t> Limits::*field) {
  const LimitField& lf = LimitFieldOf(field);
  EffectiveLimit out{lf.fallback, std::string(lf.name), std::string(tenant), ""};
  if (auto it = policy.tenants.find(out.tenant); it != policy.tenants.end()) {
    if (const auto& v = it->second.limits.*field) {
      out.value = *v;
      out.setting = fmt::format("tenants.{}.limits.{}", tenant, lf.name);
      return out;
    }
  }
  if (const auto& v = policy.limits.*field) {
    out.value = *v;
    out.setting = fmt::format("limits.{}", lf.name);
  }
  return out;
}

std::string EffectiveLimit::Describe() const {
  if (setting.empty()) {
    return fmt::format(
        "the default; a platform admin can raise it with tenants.{}.limits.{} in "
        "the policy",
        tenant, name);
  }
  return fmt::format("set by {} in the policy; a platform admin can raise it", setting);
}

Status CheckSpecLimits(const Policy& policy, const JobSpec& spec, std::size_t spec_bytes) {
  const EffectiveLimit size = LimitOf(policy, spec.tenant, &Limits::spec_bytes);
  if (spec_bytes > static_cast<std::uint64_t>(size.value)) {
    return Fail(Code::kResourceExhausted,
                fmt::format("this job's spec is {} bytes; tenant {} allows at most {} (limit "
                            "spec_bytes, {}); make it smaller, e.g. keep long parameter lists "
                            "in a file the job reads",
                            spec_bytes, spec.tenant, size.value, size.Describe()));
  }
  const EffectiveLimit replicas = LimitOf(policy, spec.tenant, &Limits::replicas_per_job);
  if (std::int64_t{spec.replicas} > replicas.value) {
    return Fail(Code::kResourceExhausted,
                fmt::format("this job asks for {} replicas; tenant {} allows at most {} per job "
                            "(limit replicas_per_job, {})",
                            spec.replicas, spec.tenant, replicas.value, replicas.Describe()),
                "replicas");
  }
  return Ok();
}

RunAs RunIdentityOf(const Policy& policy, std::string_view tenant) {
  if (auto it = policy.tenants.find(std::string(tenant));
      it != policy.tenants.end() && it->second.run_as) {
    return *it->second.run_as;
  }
  RunAs r;
  r.uid = DerivedUid(tenant);
  r.gid = *r.uid;
  return r;
}

}  // namespace berth::model
