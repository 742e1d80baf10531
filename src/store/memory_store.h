// An in-memory backend of the jobs-and-runs concern (store::JobStore):
// nothing survives the process, every call is a map lookup. It exists so
// that tests of the lifecycle and the control loop can run in microseconds,
// and as the second backend that keeps JobStore honest: it passes the same
// conformance suite as SqliteStore (tests/unit/store/conformance_test.cc),
// so behaviour that only one backend has is a failing test, not a drift.
//
// Like every backend it decides nothing: which submissions the policy takes
// is model::AdmitSubmission, and every lifecycle change is control/
// lifecycle.h over its JobTransaction. A transaction works on an overlay of
// the jobs it touches and is merged on success, so a body that fails
// leaves nothing behind (all or nothing, as SQLite's rollback).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "model/policy.h"
#include "store/store.h"

namespace berth::store {

class MemoryJobStore final : public JobStore {
 public:
  // `policy`: what submissions are admitted against (the active policy a
  // PolicyStore would hold).
  explicit MemoryJobStore(model::Policy policy) : policy_(std::move(policy)) {}

  void set_policy(model::Policy policy);
  // The audit records committed with submissions and job transactions, in
  // commit order.
  std::vector<AuditEntry> audit_records();

  Result<std::string> JobTenant(std::int64_t id) override;
  Result<std::int64_t> CreateJob(const model::JobSpec& spec, TimeMs now,
                                 std::string_view submitted_by = {}) override;
  Result<std::vector<std::int64_t>> CreateJobs(
      const model::JobSpec& spec, TimeMs now, std::string_view submitted_by,
      const AuditOf<std::vector<std::int64_t>>& audit = {}) override;
  CommitStats commit_stats() override;
  Result<PendingCount> PendingCounts(const std::string& tenant,
                                     std::string_view submitted_by) override;
  Result<JobRecord> GetJob(std::int64_t id) override;
  Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  Result<std::vector<JobRecord>> PendingJobs() override;
  Result<std::vector<RunRecord>> ActiveRuns() override;
  Status UpdateJobs(const JobTransactionBody& body) override;
  Result<std::optional<RunRecord>> GetRun(const std::string& run_id) override;
  Status RecordCheckpoint(const std::string& run_id, TimeMs at) override;
  Result<std::vector<RunUsage>> FinishedRunsSince(TimeMs since) override;
  Result<std::vector<JobRecord>> JobsSubmittedBetween(TimeMs since, TimeMs until,
                                                      std::size_t max_jobs = 0) override;
  Result<std::vector<JobRecord>> JobsForWindow(TimeMs from, TimeMs to,
                                               const model::TenantScope& scope,
                                               std::size_t max_rows) override;

 private:
  class Tx;

  // With mu_ held.
  PendingCount CountPending(const std::string& tenant, std::string_view by) const;
  RunRecord* FindRun(const std::string& run_id);
  void Keep(AuditEntry record);

  std::mutex mu_;
  model::Policy policy_;
  // Every job, with its runs (by attempt, replica) and timeline.
  std::map<std::int64_t, JobRecord> jobs_;
  // Run id -> job id.
  std::map<std::string, std::int64_t, std::less<>> run_jobs_;
  std::int64_t next_id_ = 1;
  CommitStats stats_;
  std::vector<AuditEntry> audit_;
};

}  // namespace berth::store
