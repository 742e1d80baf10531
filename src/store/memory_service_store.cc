#include "store/memory_service_store.h"

#include <algorithm>

#include "store/service_rules.h"

namespace berth::store {

std::vector<AuditEntry> MemoryServiceStore::audit_records() {
  std::lock_guard lock(mu_);
  return audit_;
}

void MemoryServiceStore::Revise(ServiceRecord& s, const model::ServiceSpec& spec,
                                const std::string& by, TimeMs now, std::string change,
                                std::optional<std::int64_t> restores) {
  s.revision += 1;
  s.spec = spec;
  s.updated_ms = now;
  s.updated_by = by;
  s.revisions.insert(s.revisions.begin(),
                     ServiceRevision{s.revision, spec, now, by, std::move(change), restores});
  if (s.revisions.size() > kServiceRevisionsKept) s.revisions.resize(kServiceRevisionsKept);
}

ServiceRecord MemoryServiceStore::WithoutRevisions(const ServiceRecord& s) {
  ServiceRecord out = s;
  out.revisions.clear();
  return out;
}

Result<ServiceApply> MemoryServiceStore::ApplyService(const model::ServiceSpec& spec,
                                                      const std::string& by, TimeMs now,
                                                      std::size_t max_per_tenant,
                                                      const ServiceAdmission& admit,
                                                      const AuditOf<ServiceApply>& audit) {
  std::lock_guard lock(mu_);
  const Key key{spec.tenant, spec.name};
  auto it = services_.find(key);
  if (it != services_.end() && it->second.spec == spec) {
    return ServiceApply{ServiceApplied::kUnchanged, it->second};
  }
  if (admit) BERTH_RETURN_IF_ERROR(admit(spec));
  ServiceApply out;
  if (it == services_.end()) {
    auto n = std::count_if(services_.begin(), services_.end(),
                           [&](const auto& e) { return e.first.first == spec.tenant; });
    if (static_cast<std::size_t>(n) >= max_per_tenant) {
      return std::unexpected(TooManyServices(spec.tenant, max_per_tenant));
    }
    ServiceRecord s;
    s.id = next_id_;
    s.tenant = spec.tenant;
    s.name = spec.name;
    s.created_ms = now;
    s.created_by = by;
    Revise(s, spec, by, now, "apply", std::nullopt);
    out = ServiceApply{ServiceApplied::kCreated, std::move(s)};
  } else {
    ServiceRecord s = it->second;
    Revise(s, spec, by, now, "apply", std::nullopt);
    out = ServiceApply{ServiceApplied::kRevised, std::move(s)};
  }
  // The record first: a change is kept only with its record.
  if (audit) {
    if (auto r = audit(out)) audit_.push_back(std::move(*r));
  }
  if (out.applied == ServiceApplied::kCreated) ++next_id_;
  services_[key] = out.service;
  return out;
}

Result<ServiceRecord> MemoryServiceStore::GetService(const std::string& tenant,
                                                     const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = services_.find({tenant, name});
  if (it == services_.end()) return std::unexpected(ServiceNotFound(tenant, name));
  return it->second;
}

Result<std::vector<ServiceRecord>> MemoryServiceStore::ListServices(const ServiceFilter& filter) {
  std::lock_guard lock(mu_);
  std::vector<ServiceRecord> out;
  for (const auto& [key, s] : services_) {
    if (!filter.tenant.empty() && s.tenant != filter.tenant) continue;
    if (!filter.tenants.Contains(s.tenant)) continue;
    if (filter.before_id && s.id >= *filter.before_id) continue;
    out.push_back(WithoutRevisions(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  if (out.size() > filter.limit) out.resize(filter.limit);
  return out;
}

Result<ServiceRecord> MemoryServiceStore::ScaleService(
    const std::string& tenant, const std::string& name, model::ReplicaBounds bounds,
    const std::string& by, TimeMs now, const AuditOf<ServiceRecord, ServiceRecord>& audit) {
  BERTH_RETURN_IF_ERROR(CheckScaleBounds(bounds));
  std::lock_guard lock(mu_);
  auto it = services_.find({tenant, name});
  if (it == services_.end()) return std::unexpected(ServiceNotFound(tenant, name));
  if (it->second.spec.replicas == bounds) return it->second;
  ServiceRecord s = it->second;
  model::ServiceSpec spec = s.spec;
  spec.replicas = bounds;
  Revise(s, spec, by, now, "scale", std::nullopt);
  if (audit) {
    if (auto r = audit(it->second, s)) audit_.push_back(std::move(*r));
  }
  it->second = s;
  return s;
}

Result<ServiceRecord> MemoryServiceStore::RollbackService(
    const std::string& tenant, const std::string& name, const std::string& by, TimeMs now,
    const ServiceAdmission& admit, const AuditOf<ServiceRecord, ServiceRecord>& audit) {
  std::lock_guard lock(mu_);
  auto it = services_.find({tenant, name});
  if (it == services_.end()) return std::unexpected(ServiceNotFound(tenant, name));
  auto before = RevisionBefore(it->second.revisions, it->second.revision);
  if (!before) return std::unexpected(NoRevisionBefore(tenant, name, it->second.revision));
  if (admit) BERTH_RETURN_IF_ERROR(admit(before->spec));
  ServiceRecord s = it->second;
  Revise(s, before->spec, by, now, "rollback", before->revision);
  if (audit) {
    if (auto r = audit(it->second, s)) audit_.push_back(std::move(*r));
  }
  it->second = s;
  return s;
}

Result<ServiceRecord> MemoryServiceStore::DeleteService(const std::string& tenant,
                                                        const std::string& name,
                                                        const std::string& /*by*/, TimeMs /*now*/,
                                                        const AuditOf<ServiceRecord>& audit) {
  std::lock_guard lock(mu_);
  auto it = services_.find({tenant, name});
  if (it == services_.end()) return std::unexpected(ServiceNotFound(tenant, name));
  ServiceRecord was = it->second;
  if (audit) {
    if (auto r = audit(was)) audit_.push_back(std::move(*r));
  }
  services_.erase(it);
  rollouts_.erase({tenant, name});
  return was;
}

Result<std::optional<RolloutProgress>> MemoryServiceStore::GetRolloutProgress(
    const std::string& tenant, const std::string& name) {
  std::lock_guard lock(mu_);
  if (!services_.contains({tenant, name})) return std::unexpected(ServiceNotFound(tenant, name));
  auto it = rollouts_.find({tenant, name});
  if (it == rollouts_.end()) return std::optional<RolloutProgress>{};
  return std::optional<RolloutProgress>{it->second};
}

Result<RolloutProgress> MemoryServiceStore::SetRolloutProgress(
    const std::string& tenant, const std::string& name,
    const std::optional<RolloutProgress>& expected, const RolloutProgress& next,
    const AuditOf<RolloutProgress>& audit) {
  std::lock_guard lock(mu_);
  if (!services_.contains({tenant, name})) return std::unexpected(ServiceNotFound(tenant, name));
  auto it = rollouts_.find({tenant, name});
  const std::optional<RolloutProgress> now =
      it == rollouts_.end() ? std::nullopt : std::optional<RolloutProgress>{it->second};
  if (now != expected) return std::unexpected(RolloutMoved(tenant, name));
  if (audit) {
    if (auto r = audit(next)) audit_.push_back(std::move(*r));
  }
  rollouts_[{tenant, name}] = next;
  return next;
}

}  // namespace berth::store
