// The embedded Store backend: one SQLite database file in the data directory,
// WAL journal, synchronous=FULL. One writing connection serialised by a
// mutex (mu_): the control plane is write-light, and serialising makes each
// method atomic. Long reads for the API (job lists, the jobs of a report or
// a history export) use a second, read-only connection under its own mutex
// (read_mu_), each in one read transaction: WAL lets them read a committed
// snapshot while the writer goes on, so a long list or report never delays
// a submission or a scheduling pass (sqlite_store_reads.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "store/sqlite_db.h"
#include "store/store.h"

namespace berth::store {

class SqliteStore final : public Store {
 public:
  // Opens or creates `<data_dir>/berth.db`, migrates the schema, and makes
  // sure a policy exists (version 1: model::DefaultPolicy(), with any queues
  // of a schema-1 database carried over). On PostgreSQL (`where` names a
  // database) it makes the tables when missing and keeps the audit head in
  // the database only (no head file).
  static Result<std::unique_ptr<SqliteStore>> Open(const StoreLocation& where, TimeMs now);
  // Leaves the audit head file holding every record this store committed.
  ~SqliteStore() override;

  Result<bool> QueueExists(const std::string& tenant, const std::string& queue) override;
  Result<std::int64_t> ApplyPolicy(const std::string& yaml_text, const std::string& by,
                                   const std::string& comment, TimeMs now) override;
  Result<std::int64_t> ApplyPolicyOnBase(const std::string& yaml_text, const std::string& by,
                                         const std::string& comment,
                                         std::optional<std::int64_t> base, TimeMs now,
                                         const AuditOf<std::int64_t>& audit = {}) override;
  Result<PolicyVersion> PreviewPolicy(const std::string& yaml_text, const std::string& by,
                                      TimeMs now) override;
  Result<PolicyVersion> ActivePolicy() override;
  Result<std::vector<PolicyVersion>> ListPolicyVersions() override;
  Result<PolicyVersion> GetPolicyVersion(std::int64_t version) override;
  Result<std::int64_t> RollbackPolicy(std::int64_t to_version, const std::string& by,
                                      const std::string& comment, TimeMs now,
                                      const AuditOf<std::int64_t>& audit = {}) override;
  Result<std::string> JobTenant(std::int64_t id) override;
  Result<QuotaRequest> FileQuotaRequest(const QuotaRequest& request, const std::string& by,
                                        TimeMs now,
                                        const AuditOf<QuotaRequest>& audit = {}) override;
  Result<std::vector<QuotaRequest>> ListQuotaRequests(const QuotaRequestFilter& filter) override;
  Result<QuotaRequest> GetQuotaRequest(std::int64_t id) override;
  Result<QuotaRequest> ApproveQuotaRequest(
      std::int64_t id, const std::string& by, const std::string& comment,
      const QuotaApproval& approve, TimeMs now,
      const AuditOf<QuotaRequest, QuotaRequest>& audit = {}) override;
  Result<QuotaRequest> RejectQuotaRequest(
      std::int64_t id, const std::string& by, const std::string& comment, TimeMs now,
      const AuditOf<QuotaRequest, QuotaRequest>& audit = {}) override;
  Result<QuotaRequest> WithdrawQuotaRequest(
      std::int64_t id, const std::string& by, TimeMs now,
      const AuditOf<QuotaRequest, QuotaRequest>& audit = {}) override;
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
  Result<PendingQueue> SharedPendingJobs() override;
  Result<std::vector<RunRecord>> ActiveRuns() override;
  Status RecordCheckpoint(const std::string& run_id, TimeMs at) override;
  Status UpdateJobs(const JobTransactionBody& body) override;
  Result<std::optional<RunRecord>> GetRun(const std::string& run_id) override;
  [[nodiscard]] Result<std::vector<RunUsage>> FinishedRunsSince(TimeMs since) override;
  [[nodiscard]] Result<std::vector<JobRecord>> JobsSubmittedBetween(
      TimeMs since, TimeMs until, std::size_t max_jobs = 0) override;
  [[nodiscard]] Result<std::vector<JobRecord>> JobsForWindow(TimeMs from, TimeMs to,
                                                             const model::TenantScope& scope,
                                                             std::size_t max_rows) override;
  // For tests: called by every read on the read connection once its
  // snapshot is taken and before its rows are read, on the reading thread,
  // without mu_ held. Set before reads start.
  void set_read_hook_for_test(std::function<void()> hook) { read_hook_ = std::move(hook); }
  Status UpsertNode(const model::NodeInfo& info, TimeMs now) override;
  Status SetNodeState(const std::string& name, model::NodeState state, TimeMs now) override;
  Result<std::vector<NodeEvent>> NodeEvents(const std::string& node, std::size_t limit) override;
  Status SetCordon(const std::string& node, std::optional<std::uint32_t> gpu, const Cordon& cordon,
                   TimeMs now, const AuditOf<>& audit = {}) override;
  Result<bool> Uncordon(const std::string& node, std::optional<std::uint32_t> gpu,
                        const std::string& by, TimeMs now, const AuditOf<>& audit = {}) override;
  Status SetGpuHealth(const std::string& node, std::uint32_t gpu, bool healthy,
                      const std::string& detail, TimeMs now) override;
  Result<bool> SetContainerRuntime(const std::string& node, const std::string& runtime,
                                   TimeMs now) override;
  Status RemoveNode(const std::string& node, const std::string& by, TimeMs now,
                    const AuditOf<>& audit = {}) override;
  Result<std::optional<TimeMs>> NodeRevokedAt(const std::string& node) override;
  Status RecordNodeCertRenewal(const std::string& node, TimeMs presented_not_before_ms,
                               TimeMs expires_ms, TimeMs now, const AuditOf<>& audit = {}) override;
  Result<std::int64_t> RaiseAlert(const Alert& alert) override;
  Result<std::optional<std::int64_t>> RaiseAlertOnce(const Alert& alert,
                                                     AlertDedupe dedupe) override;
  Result<std::vector<Alert>> FindAlerts(const AlertFilter& filter) override;
  Result<Alert> GetAlert(std::int64_t id) override;
  Result<bool> ResolveAlert(std::int64_t id, const std::string& by, TimeMs now,
                            const AuditOf<Alert>& audit = {}) override;
  Result<std::int64_t> ApplyAlertRules(const std::string& yaml, const std::string& by,
                                       const std::string& comment, TimeMs now,
                                       std::optional<std::int64_t> base,
                                       const AuditOf<std::int64_t>& audit = {}) override;
  Result<std::optional<AlertRulesVersion>> ActiveAlertRules() override;
  Result<std::vector<AlertDelivery>> DueDeliveries(TimeMs now, std::size_t limit) override;
  Status RecordDeliveryAttempt(std::int64_t id, const std::string& error,
                               std::optional<TimeMs> next_attempt_ms, TimeMs now) override;
  Result<std::vector<AlertDelivery>> ListDeliveries(std::size_t limit,
                                                    std::optional<std::int64_t> before_id) override;
  Result<std::vector<NodeRecord>> ListNodes() override;
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
  // Services (sqlite_store_services.cc), with mu_ held: the service with
  // its kept revisions (nullopt: none), and a new revision of it.
  Result<std::optional<RolloutProgress>> LoadRolloutProgress(std::int64_t service_id);
  Result<std::optional<ServiceRecord>> LoadService(const std::string& tenant,
                                                   const std::string& name);
  // The same, NotFound (ServiceNotFound) when there is none.
  Result<ServiceRecord> LoadExistingService(const std::string& tenant, const std::string& name);
  Status AddServiceRevision(ServiceRecord& s, const model::ServiceSpec& spec, const std::string& by,
                            TimeMs now, std::string_view change,
                            std::optional<std::int64_t> restores);
  SqliteStore(Database db, Database reader, std::filesystem::path audit_head);
  // The writer connection's row hook: a row of `jobs` changed.
  static void OnRowChanged(void* self, std::string_view table, std::int64_t rowid);
  // A row of jobs was written (in a transaction that may yet roll back):
  // the next RefreshPending reads it again. SQLite's row hook calls it for
  // every statement; PostgreSQL has no such hook, so each statement that
  // writes jobs calls it itself (CreateJobs, SetJobState, PersistJob,
  // SetPendingReason: the only four).
  void NoteJobChanged(std::int64_t id);
  // Brings pending_ up to date with berth.db (mu_ held).
  Status RefreshPending();
  // One scan of every Pending job into pending_ (mu_ held).
  Status LoadAllPending();
  // pending_ after a job's row was read again: out if it left Pending, in
  // (as the new record) if it is Pending.
  void RepointPending(std::int64_t id, std::optional<JobRecord> now_pending);
  static Result<std::unique_ptr<SqliteStore>> OpenPostgres(const StoreLocation& where, TimeMs now);
  Status Migrate(TimeMs now);
  Status MigratePostgres(TimeMs now);
  Status FinishMigration(bool had_queue_tables, TimeMs now);

  // One CreateJobs call waiting for its group commit.
  struct Submission {
    const model::JobSpec* spec = nullptr;
    TimeMs now = 0;
    std::string_view by;
    const AuditOf<std::vector<std::int64_t>>* audit = nullptr;
    Result<std::vector<std::int64_t>> ids = std::vector<std::int64_t>{};
    bool done = false;
  };
  // Stores a batch of submissions in one transaction (takes mu_).
  void CommitSubmissions(const std::vector<Submission*>& batch);
  // Helpers that expect mu_ held.
  Result<std::optional<JobRecord>> LoadJob(std::int64_t id, bool with_timeline);
  Result<std::vector<RunRecord>> LoadRuns(std::string_view where, std::int64_t arg);
  // On the read connection, with read_mu_ held, in one read transaction:
  // the rows of a jobs query (kJobColumns, binds already made), each with
  // all its runs.
  Result<std::vector<JobRecord>> ReadJobsWithRuns(const std::string& sql,
                                                  const std::vector<std::string>& text_binds,
                                                  const std::vector<std::int64_t>& int_binds,
                                                  bool with_runs = true);
  Status AddNodeEvent(const std::string& node, TimeMs t, std::string_view event,
                      const std::string& message);
  Result<model::NodeInfo> LoadNodeInfo(const std::string& node);
  Status AddEvent(std::int64_t job_id, TimeMs t, model::JobState state, std::string_view event,
                  std::string_view message,
                  std::optional<std::int64_t> policy_version = std::nullopt);
  Status SetJobState(std::int64_t job_id, model::JobState state, const model::Reason& reason);
  // Writes what a transition (control/transitions.h) left the job as, and
  // appends its events; inside the caller's transaction.
  Status PersistJob(const model::JobUpdate& update);
  // Inserts the run, or writes every lifecycle column of it.
  Status WriteRun(const RunRecord& run);
  // Jobs of array `array_id`, by id.
  Result<std::vector<std::int64_t>> ArrayElements(std::int64_t array_id);
  // Sets a Pending job's reason unless it is already this one.
  Status SetPendingReason(std::int64_t id, const model::Reason& reason);
  // Runs the UpdateJobs body over this store's connection
  // (sqlite_store_lifecycle.cc).
  class JobTx;
  friend class JobTx;
  // Jobs with an active run on `node`, by id.
  Result<std::vector<std::int64_t>> ActiveJobsOn(const std::string& node);
  Status MigrateQueuesToPolicy(bool had_queue_tables, TimeMs now);
  Result<std::optional<PolicyVersion>> LoadPolicyVersion(std::int64_t version);
  // The active version, parsed; cached until the next apply.
  Result<const PolicyVersion*> Active();
  // Validates, guards and inserts a version (inside the caller's
  // transaction); the caller commits and then caches the result as active_.
  Result<PolicyVersion> AddPolicyVersion(const std::string& yaml_text, const std::string& by,
                                         const std::string& comment,
                                         std::optional<std::int64_t> rolled_back_from,
                                         std::optional<std::int64_t> restores, TimeMs now);

  // Alerts (sqlite_store_alerts.cc), with mu_ held: insert with its
  // deliveries; resolve the open alerts `where` selects (with binds) and
  // queue their "resolved" deliveries.
  Result<std::int64_t> InsertAlert(const Alert& alert);
  Status ResolveAlertsLocked(const std::vector<std::int64_t>& ids, const std::string& by,
                             TimeMs now);
  Result<std::vector<Alert>> LoadAlerts(const std::string& where);
  // Quota requests (sqlite_store_quota.cc), with mu_ held.
  Result<QuotaRequest> LoadQuotaRequest(std::int64_t id);
  // Moves a Pending request to `to`; FailedPrecondition naming its state
  // otherwise. Inside the caller's transaction.
  Status DecideQuotaRequest(const QuotaRequest& request, QuotaRequestState to,
                            const std::string& by, const std::string& comment,
                            std::optional<std::int64_t> policy_version, TimeMs now);

  // The group commit's queue: submissions wait here while another batch
  // commits; the first to find no commit in flight stores them all.
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;
  std::vector<Submission*> queued_;
  bool committing_ = false;
  CommitStats commit_stats_;

  std::mutex mu_;
  Database db_;
  // <data_dir>/audit.head: the chain's head file, for the audit records
  // committed with submissions and job transactions (store/audit_chain.h).
  std::filesystem::path audit_head_;
  std::optional<PolicyVersion> active_;  // cache of the active policy
  // Parsed specs by job id (a spec never changes once stored), so a
  // scheduling pass over the pending queue parses each spec once, not once
  // per pass. Guarded by mu_; emptied when it reaches kSpecCacheEntries.
  std::unordered_map<std::int64_t, model::JobSpec> specs_;
  // The pending queue between passes, in PendingJobs' order (guarded by
  // mu_): filled by one scan, then kept by reading again only the jobs
  // whose rows changed since (changed_jobs_, which the writer connection's
  // row hook fills on SQLite and the statements that write jobs fill on
  // PostgreSQL). Every change to jobs goes through db_, so none is missed;
  // where another process may write the same database (sole_writer_ false)
  // every read is a whole scan. Records are shared and never changed
  // (a changed job is read into a new one), so a pass copies pointers under mu_, not jobs.
  bool pending_loaded_ = false;
  std::map<std::pair<TimeMs, std::int64_t>, std::shared_ptr<const JobRecord>> pending_;
  std::unordered_map<std::int64_t, TimeMs> pending_at_;  // id -> submitted_ms
  std::mutex changed_mu_;
  std::unordered_set<std::int64_t> changed_jobs_;
  std::atomic<bool> track_changes_{false};
  // Whether this store makes every change to jobs (StoreLocation::
  // sole_writer); without that, each pass reads the queue whole.
  bool sole_writer_ = true;

  // The read-only connection of the API's long reads; never takes mu_.
  std::mutex read_mu_;
  Database reader_;
  std::function<void()> read_hook_;
};

}  // namespace berth::store
