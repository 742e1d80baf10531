// An in-memory backend of the services concern (store::ServiceStore):
// nothing survives the process. It is the second backend that keeps
// ServiceStore honest: it passes the same conformance suite as SqliteStore
// (tests/unit/store/service_conformance_test.cc). A refused change leaves
// nothing behind, its audit record included, as SQLite's rollback does.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"

namespace berth::store {

class MemoryServiceStore final : public ServiceStore {
 public:
  // The audit records committed with changes, in commit order.
  std::vector<AuditEntry> audit_records();

  Result<ServiceApply> ApplyService(const model::ServiceSpec& spec, const std::string& by,
                                    TimeMs now, std::size_t max_per_tenant,
                                    const ServiceAdmission& admit = {},
                                    const AuditOf<ServiceApply>& audit = {}) override;
  Result<ServiceRecord> GetService(const std::string& tenant, const std::string& name) override;
  Result<std::vector<ServiceRecord>> ListServices(const ServiceFilter& filter) override;
  Result<ServiceRecord> ScaleService(
      const std::string& tenant, const std::string& name, model::ReplicaBounds bounds,
      const std::string& by, TimeMs now,
      const AuditOf<ServiceRecord, ServiceRecord>& audit = {}) override;
  Result<ServiceRecord> RollbackService(
      const std::string& tenant, const std::string& name, const std::string& by, TimeMs now,
      const ServiceAdmission& admit = {},
      const AuditOf<ServiceRecord, ServiceRecord>& audit = {}) override;
  Result<std::optional<RolloutProgress>> GetRolloutProgress(const std::string& tenant,
                                                            const std::string& name) override;
  Result<RolloutProgress> SetRolloutProgress(const std::string& tenant, const std::string& name,
                                             const std::optional<RolloutProgress>& expected,
                                             const RolloutProgress& next,
                                             const AuditOf<RolloutProgress>& audit = {}) override;
  Result<ServiceRecord> DeleteService(const std::string& tenant, const std::string& name,
                                      const std::string& by, TimeMs now,
                                      const AuditOf<ServiceRecord>& audit = {}) override;

 private:
  using Key = std::pair<std::string, std::string>;  // (tenant, name)
  // Adds a revision to `s` (mu_ held) and drops the ones past the kept count.
  static void Revise(ServiceRecord& s, const model::ServiceSpec& spec, const std::string& by,
                     TimeMs now, std::string change, std::optional<std::int64_t> restores);
  static ServiceRecord WithoutRevisions(const ServiceRecord& s);

  std::mutex mu_;
  std::map<Key, ServiceRecord> services_;  // each with its kept revisions
  std::map<Key, RolloutProgress> rollouts_;
  std::int64_t next_id_ = 1;
  std::vector<AuditEntry> audit_;
};

}  // namespace berth::store
