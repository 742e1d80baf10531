// The audit trail: an append-only, hash-chained record of every change made
// through the API (and every refused attempt), and of the automatic actions
// Berth takes itself, in the `audit_log` table of the state database
// (berth.db). A change that can commits its record in its own transaction
// (store/audit_chain.h: a submission, a cancel); AuditLog appends the rest
// (refusals, logins, reads worth recording, and changes of stores that do not
// take records yet) on a connection of its own, and reads and verifies the
// whole trail. The chain and the remembered heads are described in
// store/audit_chain.h.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/tenant_scope.h"
#include "store/audit_chain.h"
#include "store/sqlite_db.h"

namespace berth::store {

struct AuditFilter {
  std::optional<TimeMs> since;  // time_ms >= since
  std::optional<TimeMs> until;  // time_ms < until
  std::string actor;            // exact; empty: any
  std::string tenant;
  // Only records of tenants in this scope (the request's tenant scope,
  // model/tenant_scope.h), and records of no tenant (a login, a refused
  // token); filtered in the query before `limit`.
  model::TenantScope tenants = model::TenantScope::All();
  std::string action;        // exact, or a prefix ending in '.' ("job.")
  std::size_t limit = 1000;  // the newest `limit` matches, returned oldest first
  // Keyset paging backwards in time: only records older than this one
  // (seq < after_seq), so the next page goes on where the last one ended.
  std::optional<std::int64_t> after_seq;
};

struct AuditVerdict {
  bool ok = true;
  std::int64_t records = 0;  // rows in the table
  AuditHead head;            // the last row's seq and hash (0, "" when empty)
  // The first record found bad (a missing one's seq for a gap), and what is
  // wrong with it.
  std::optional<std::int64_t> first_bad_seq;
  std::string problem;
  std::optional<AuditHead> meta_head;  // as remembered in the meta table
  std::optional<AuditHead> file_head;  // as remembered in audit.head
  // Things worth knowing that are not tampering (a head file one record
  // behind after a crash).
  std::vector<std::string> notes;
};

class AuditLog {
 public:
  // Opens `<data_dir>/berth.db` (creating the table if needed) on a second
  // connection; SqliteStore may have it open too. On PostgreSQL the head is
  // remembered in the database only, so head_path() is empty.
  static Result<std::unique_ptr<AuditLog>> Open(const StoreLocation& where);

  // Assigns seq, prev_hash and hash, and returns once the record is
  // committed (synchronous=FULL); the head file follows a write later
  // (audit_chain.h). The new record
  // chains from the remembered head, not from whatever row is last, so rows
  // removed behind Berth's back leave a gap that Verify finds. Records
  // appended concurrently may share one transaction and one head-file
  // write (group commit), in the order they queued; each call returns only
  // once its record is durable.
  [[nodiscard]] Result<AuditEntry> Append(AuditEntry entry);
  [[nodiscard]] Result<std::vector<AuditEntry>> Query(const AuditFilter& filter);
  // Recomputes the whole chain and checks it against both remembered heads.
  [[nodiscard]] Result<AuditVerdict> Verify();

  const std::filesystem::path& head_path() const { return head_path_; }
  // Leaves the head file holding every record this log committed.
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

 private:
  AuditLog(Database db, Database reader, std::filesystem::path head_path)
      : db_(std::move(db)), reader_(std::move(reader)), head_path_(std::move(head_path)) {}
  // One Append waiting for its group commit.
  struct Pending {
    AuditEntry* entry = nullptr;
    Status status = {};
    bool done = false;
  };
  // Chains and stores a batch in one transaction, with mu_ held.
  Status CommitBatch(const std::vector<Pending*>& batch);

  // The group commit's queue (as SqliteStore::CreateJobs).
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::vector<Pending*> queued_;
  bool committing_ = false;

  std::mutex mu_;
  Database db_;
  // Query's read-only connection (WAL: it reads committed records while
  // appends go on under mu_).
  std::mutex read_mu_;
  Database reader_;
  std::filesystem::path head_path_;
};

}  // namespace berth::store
