// Metering's durable state (docs/metering.md): price table versions, tenant
// budgets, plus a read of the runs that
// usage records are derived from. It lives in berth.db on a connection of
// its own, like the audit log, so the scheduling Store interface stays as it
// is. Budget alerts are raised through the Store (its alerts table has one
// writer), by server::Meter::CheckBudgets.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/job_record.h"
#include "model/tenant_scope.h"
#include "model/usage.h"
#include "store/audit_entry.h"
#include "store/sqlite_db.h"

namespace berth::store {

// One applied price table version, with its text as applied.
struct StoredPriceVersion {
  model::PriceVersion price;
  std::string yaml;
  std::string applied_by;
  std::string comment;
};

// A run as metering needs it: the run's own fields and its job's owner.
struct UsageRun {
  std::string run_id;
  std::int64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::string node;
  std::vector<std::uint32_t> gpu_indices;
  std::vector<std::string> gpu_uuids;
  std::uint32_t gpu_share_millis = 0;
  std::uint64_t gpu_share_bytes = 0;
  TimeMs started_ms = 0;
  std::optional<TimeMs> finished_ms;  // nullopt: still running
  model::StopCause stopped_for = model::StopCause::kNone;
  std::string failure_class;
  std::optional<std::int32_t> exit_code;
  std::optional<std::int32_t> signal;
  std::string tenant;
  std::string queue;
  std::string user;      // jobs.submitted_by
  std::string job_pool;  // the job spec's pool ("" for any)
  std::string service;   // jobs.service: a replica's service ("" for any other job)
};

class MeterStore {
 public:
  // Opens `<data_dir>/berth.db` on a second connection, creating the
  // metering tables if needed.
  static Result<std::unique_ptr<MeterStore>> Open(const StoreLocation& where);

  // Validates `yaml` (model::ParsePriceTable) and appends it as the newest
  // version, in effect from `now`. Returns the version. With a `base`:
  // refused (FailedPrecondition, field base_version) unless `base` is still
  // the newest version, checked in the applying transaction.
  [[nodiscard]] Result<std::int64_t> ApplyPrices(const std::string& yaml, const std::string& by,
                                                 const std::string& comment, TimeMs now,
                                                 std::optional<std::int64_t> base = std::nullopt,
                                                 const AuditOf<std::int64_t>& audit = {});
  // Every version, oldest first.
  [[nodiscard]] Result<std::vector<StoredPriceVersion>> PriceVersions();

  // Runs that started before `to` and had not finished by `from` (running
  // ones included); `tenant` empty: every tenant in `scope`. Only runs of
  // jobs of tenants in `scope` (model/tenant_scope.h) are read and counted.
  // Oldest start first, at most `max_rows` of them (a caller asking for its
  // cap plus one learns that the window holds more).
  [[nodiscard]] Result<std::vector<UsageRun>> UsageRuns(
      TimeMs from, TimeMs to, const std::string& tenant, const model::TenantScope& scope,
      std::size_t max_rows = std::numeric_limits<std::int64_t>::max());

  // Sets (replaces) a tenant's budget.
  [[nodiscard]] Status SetBudget(const model::Budget& budget, const AuditOf<>& audit = {});
  // Removes it; returns whether there was one (and only then makes a
  // record).
  [[nodiscard]] Result<bool> DeleteBudget(const std::string& tenant, const AuditOf<>& audit = {});
  // The budgets of the tenants in `scope`, by tenant.
  [[nodiscard]] Result<std::vector<model::Budget>> ListBudgets(const model::TenantScope& scope);

 private:
  MeterStore(Database db, std::filesystem::path audit_head)
      : db_(std::move(db)), audit_head_(std::move(audit_head)) {}

  std::mutex mu_;
  Database db_;
  std::filesystem::path audit_head_;  // <data_dir>/audit.head
};

}  // namespace berth::store
