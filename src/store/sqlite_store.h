// The embedded Store backend: one SQLite database file in the data directory,
// WAL journal, synchronous=FULL. One connection serialised by a mutex: the
// control plane is write-light, and serialising makes each method atomic.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>

#include "store/sqlite_db.h"
#include "store/store.h"

namespace berth::store {

class SqliteStore final : public Store {
 public:
  // Opens or creates `<data_dir>/berth.db`, migrates the schema, and makes
  // sure the default tenant and queue exist.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::filesystem::path& data_dir,
                                                   TimeMs now);

  Result<bool> QueueExists(const std::string& tenant, const std::string& queue) override;
  Result<std::int64_t> CreateJob(const model::JobSpec& spec, TimeMs now) override;
  Result<JobRecord> GetJob(std::int64_t id) override;
  Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  Result<std::vector<JobRecord>> PendingJobs() override;
  Result<std::vector<RunRecord>> ActiveRuns() override;
  Result<JobRecord> CancelJob(std::int64_t id, const std::string& by, TimeMs now) override;
  Status ApplyPlan(const sched::Plan& plan, const std::vector<NodeRecord>& nodes,
                   TimeMs now) override;
  Status MarkRunStarted(const std::string& run_id, std::int64_t pid, TimeMs started_at,
                        TimeMs now) override;
  Result<JobRecord> MarkRunExited(const RunExit& exit, TimeMs now) override;
  Status RequestStop(std::int64_t job_id, const std::string& why, TimeMs now) override;
  Result<std::optional<RunRecord>> GetRun(const std::string& run_id) override;
  Status UpsertNode(const model::NodeInfo& info, TimeMs now) override;
  Status SetNodeState(const std::string& name, model::NodeState state, TimeMs now) override;
  Result<std::vector<NodeRecord>> ListNodes() override;

 private:
  explicit SqliteStore(Database db) : db_(std::move(db)) {}
  Status Migrate(TimeMs now);

  // Helpers that expect mu_ held.
  Result<std::optional<JobRecord>> LoadJob(std::int64_t id, bool with_timeline);
  Result<std::vector<RunRecord>> LoadRuns(std::string_view where, std::int64_t arg);
  Status AddEvent(std::int64_t job_id, TimeMs t, model::JobState state, std::string_view event,
                  std::string_view message);
  Status SetJobState(std::int64_t job_id, model::JobState state, const model::Reason& reason);
  Status SettleJob(const JobRecord& job, TimeMs now);

  std::mutex mu_;
  Database db_;
};

}  // namespace berth::store
