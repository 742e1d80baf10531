// The job transaction of SqliteStore (store.h's JobTransaction): loads and
// writes inside one SQLite write transaction, with the store's lock held.
// What a write means is decided by control/lifecycle.cc, not here.
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "store/audit_chain.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store.h"

namespace berth::store {

using nlohmann::json;

class SqliteStore::JobTx final : public JobTransaction {
 public:
  explicit JobTx(SqliteStore& store) : s_(store) {}

  Result<std::optional<JobRecord>> Load(std::int64_t id) override {
    auto job = s_.LoadJob(id, false);
    if (!job) return std::unexpected(job.error());
    if (*job) loaded_[id] = (*job)->runs;
    return std::move(*job);
  }

  Result<std::optional<std::int64_t>> JobOfRun(const std::string& run_id) override {
    auto st = s_.db_.Prepare("SELECT job_id FROM runs WHERE run_id=?");
    if (!st) return std::unexpected(st.error());
    st->Bind(1, run_id);
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) return std::optional<std::int64_t>{};
    return std::optional<std::int64_t>(st->Int(0));
  }

  Result<std::vector<std::int64_t>> ActiveJobsOn(const std::string& node) override {
    return s_.ActiveJobsOn(node);
  }

  Result<std::vector<std::int64_t>> ArrayElements(std::int64_t array_id) override {
    return s_.ArrayElements(array_id);
  }

  Status Write(const model::JobUpdate& update) override {
    BERTH_RETURN_IF_ERROR(s_.PersistJob(update));
    auto& known = loaded_[update.job.id];
    for (const auto& run : update.job.runs) {
      auto it = std::find_if(known.begin(), known.end(),
                             [&](const RunRecord& r) { return r.run_id == run.run_id; });
      if (it != known.end() && *it == run) continue;
      BERTH_RETURN_IF_ERROR(s_.WriteRun(run));
      if (it == known.end()) {
        known.push_back(run);
      } else {
        *it = run;
      }
    }
    return Ok();
  }

  Status SetPendingReason(std::int64_t id, const model::Reason& reason) override {
    return s_.SetPendingReason(id, reason);
  }

  void Record(AuditEntry record) override { records_.push_back(std::move(record)); }

  std::vector<AuditEntry>& records() { return records_; }

 private:
  SqliteStore& s_;
  // The runs of each job as loaded or last written in this transaction:
  // Write writes only the runs that differ.
  std::map<std::int64_t, std::vector<RunRecord>> loaded_;
  std::vector<AuditEntry> records_;
};

Status SqliteStore::UpdateJobs(const JobTransactionBody& body) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  JobTx jobs(*this);
  BERTH_RETURN_IF_ERROR(body(jobs));
  return CommitWithRecords(tx, db_, audit_head_, jobs.records());
}

Status SqliteStore::WriteRun(const RunRecord& r) {
  auto st = db_.Prepare(
      "INSERT INTO runs(run_id, job_id, replica, attempt, node, gpu_indices, gpu_uuids, "
      "gpu_share_millis, gpu_share_bytes, state, pid, started_ms, finished_ms, exit_code, "
      "signal, stopped_for, start_error, stop_requested, last_checkpoint_ms, clean_stop, "
      "failure_class, stop_detail, port, ready, probe_detail, ready_changed_ms) "
      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
      "ON CONFLICT(run_id) DO UPDATE SET state=excluded.state, pid=excluded.pid, "
      "started_ms=excluded.started_ms, finished_ms=excluded.finished_ms, "
      "exit_code=excluded.exit_code, signal=excluded.signal, stopped_for=excluded.stopped_for, "
      "start_error=excluded.start_error, stop_requested=excluded.stop_requested, "
      "last_checkpoint_ms=excluded.last_checkpoint_ms, clean_stop=excluded.clean_stop, "
      "failure_class=excluded.failure_class, stop_detail=excluded.stop_detail, "
      "port=excluded.port, ready=excluded.ready, probe_detail=excluded.probe_detail, "
      "ready_changed_ms=excluded.ready_changed_ms");
  if (!st) return std::unexpected(st.error());
  auto wide = [](std::optional<std::int32_t> v) {
    return v ? std::optional<std::int64_t>(*v) : std::nullopt;
  };
  return st->Bind(1, r.run_id)
      .Bind(2, r.job_id)
      .Bind(3, std::int64_t{r.replica})
      .Bind(4, std::int64_t{r.attempt})
      .Bind(5, r.node)
      .Bind(6, json(r.gpu_indices).dump())
      .Bind(7, json(r.gpu_uuids).dump())
      .Bind(8, std::int64_t{r.gpu_share_millis})
      .Bind(9, static_cast<std::int64_t>(r.gpu_share_bytes))
      .Bind(10, model::RunStateName(r.state))
      .Bind(11, r.pid)
      .Bind(12, r.started_at_ms)
      .Bind(13, r.finished_at_ms)
      .Bind(14, wide(r.exit_code))
      .Bind(15, wide(r.signal))
      .Bind(16, model::StopCauseName(r.stopped_for))
      .Bind(17, r.start_error)
      .Bind(18, std::int64_t{r.stop_requested ? 1 : 0})
      .Bind(19, r.last_checkpoint_ms)
      .Bind(20, r.clean_stop ? std::optional<std::int64_t>(*r.clean_stop ? 1 : 0) : std::nullopt)
      .Bind(21, r.failure_class)
      .Bind(22, r.stop_detail)
      .Bind(23, std::int64_t{r.port})
      .Bind(24, r.ready ? std::optional<std::int64_t>(*r.ready ? 1 : 0) : std::nullopt)
      .Bind(25, r.probe_detail)
      .Bind(26, r.ready_changed_ms)
      .Run();
}

namespace {

// The first column of every row of `st`, binds made.
Result<std::vector<std::int64_t>> Ids(Statement& st) {
  std::vector<std::int64_t> out;
  for (;;) {
    auto row = st.Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(st.Int(0));
  }
  return out;
}

}  // namespace

Result<std::vector<std::int64_t>> SqliteStore::ArrayElements(std::int64_t array_id) {
  auto st = db_.Prepare("SELECT id FROM jobs WHERE array_id=? ORDER BY id");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, array_id);
  return Ids(*st);
}

Result<std::vector<std::int64_t>> SqliteStore::ActiveJobsOn(const std::string& node) {
  auto st = db_.Prepare(
      "SELECT DISTINCT job_id FROM runs WHERE node=? AND state IN ('Starting','Running') "
      "ORDER BY job_id");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, node);
  return Ids(*st);
}

Status SqliteStore::SetPendingReason(std::int64_t id, const model::Reason& reason) {
  auto st = db_.Prepare("UPDATE jobs SET reason=? WHERE id=? AND state='Pending' AND reason<>?");
  if (!st) return std::unexpected(st.error());
  auto text = ReasonText(reason);
  NoteJobChanged(id);
  return st->Bind(1, text).Bind(2, id).Bind(3, text).Run();
}

}  // namespace berth::store
