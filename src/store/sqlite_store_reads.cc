// SqliteStore's long reads for the API: the job list (keyset pages), the
// jobs of a report's window and the job history. They run on the read-only
// connection (reader_) under read_mu_, never under the writer's mu_, each in
// one read transaction so a job and its runs come from the same snapshot.
#include <fmt/format.h>

#include "model/job.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_scope.h"
#include "store/sqlite_store.h"

namespace berth::store {

Result<std::vector<JobRecord>> SqliteStore::ReadJobsWithRuns(
    const std::string& sql, const std::vector<std::string>& text_binds,
    const std::vector<std::int64_t>& int_binds, bool with_runs) {
  std::lock_guard lock(read_mu_);
  ReadTransaction tx(reader_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = reader_.Prepare(sql);
  if (!st) return std::unexpected(st.error());
  int i = 1;
  for (const auto& b : text_binds) st->Bind(i++, b);
  for (auto b : int_binds) st->Bind(i++, b);
  std::vector<JobRecord> out;
  bool hooked = false;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    // The first step took the snapshot: a test may now hold the read open.
    if (!hooked && read_hook_) read_hook_();
    hooked = true;
    if (!*row) break;
    out.push_back(ReadJob(*st));
  }
  if (with_runs) BERTH_RETURN_IF_ERROR(LoadRunsOf(reader_, out));
  return out;
}

Result<std::vector<JobRecord>> SqliteStore::ListJobs(const JobFilter& filter) {
  // A service's replicas, or all of them (the service controller's round
  // every 2 s), are read through the partial index of replicas alone, never
  // through the pending jobs, however deep the queue. (PostgreSQL has no
  // INDEXED BY; its planner takes the partial index for service IS NOT NULL.)
  const bool replicas = filter.replicas_only || !filter.service.empty();
  std::string sql = fmt::format(
      "SELECT {} FROM jobs{} WHERE 1=1", kJobColumns,
      replicas && reader_.dialect() == Dialect::kSqlite ? " INDEXED BY jobs_by_service" : "");
  if (replicas) sql += " AND service IS NOT NULL";
  std::vector<std::string> binds;
  if (!filter.states.empty()) {
    sql += " AND state IN (";
    for (std::size_t i = 0; i < filter.states.size(); ++i) {
      sql += i == 0 ? "?" : ",?";
      binds.emplace_back(model::JobStateName(filter.states[i]));
    }
    sql += ")";
  }
  if (!filter.tenant.empty()) {
    sql += " AND tenant=?";
    binds.push_back(filter.tenant);
  }
  if (!filter.queue.empty()) {
    sql += " AND queue=?";
    binds.push_back(filter.queue);
  }
  if (!filter.service.empty()) {
    sql += " AND service=?";
    binds.push_back(filter.service);
  }
  sql += ScopeSql(filter.tenants, "tenant", static_cast<int>(binds.size()) + 1);
  binds.insert(binds.end(), filter.tenants.tenants().begin(), filter.tenants.tenants().end());
  // Integers last: they bind after the text binds, in this order.
  std::vector<std::int64_t> ints;
  if (filter.array_id) {
    sql += " AND array_id=?";
    ints.push_back(*filter.array_id);
  }
  if (filter.after_id) {
    sql += " AND id<?";
    ints.push_back(*filter.after_id);
  }
  sql += " ORDER BY id DESC LIMIT ?";
  ints.push_back(static_cast<std::int64_t>(filter.limit));
  return ReadJobsWithRuns(sql, binds, ints, filter.with_runs);
}

Result<std::vector<JobRecord>> SqliteStore::JobsSubmittedBetween(TimeMs since, TimeMs until,
                                                                 std::size_t max_jobs) {
  return ReadJobsWithRuns(
      fmt::format("SELECT {} FROM jobs WHERE submitted_ms >= ? AND "
                  "submitted_ms < ? ORDER BY submitted_ms, id LIMIT ?",
                  kJobColumns),
      {},
      {since, until, SqlLimit(max_jobs > 0 ? max_jobs : std::numeric_limits<std::size_t>::max())});
}

Result<std::vector<JobRecord>> SqliteStore::JobsForWindow(TimeMs from, TimeMs to,
                                                          const model::TenantScope& scope,
                                                          std::size_t max_rows) {
  // A job with no finish time may be any age; one that finished before the
  // window cannot wait in it or have a run in it.
  std::vector<std::string> binds(scope.tenants().begin(), scope.tenants().end());
  return ReadJobsWithRuns(
      fmt::format("SELECT {} FROM jobs WHERE 1=1{} AND submitted_ms < ? AND (finished_ms IS NULL "
                  "OR finished_ms >= ?) ORDER BY submitted_ms, id LIMIT ?",
                  kJobColumns, ScopeSql(scope, "tenant", 1)),
      binds, {to, from, static_cast<std::int64_t>(max_rows)});
}

}  // namespace berth::store
