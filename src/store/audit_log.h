// The audit trail: an append-only, hash-chained record of every change made
// through the API (and every refused attempt), and of the automatic actions
// Berth takes itself. It lives in the `audit_log` table of the state database
// (berth.db), on a connection of its own, so the Store interface stays about
// scheduling state and a later auth layer only has to supply actor and tenant.
//
// Each record's hash is SHA-256 over a canonical serialization of its fields
// and the previous record's hash (AuditCanonicalText), so editing, removing or
// reordering a record breaks the chain at that record. Truncating the tail
// leaves a valid chain, so the head (latest sequence number and hash) is also
// remembered in two places outside the table's rows: the `meta` table (same
// transaction as the append) and `<data_dir>/audit.head` (written atomically
// right after the commit). Verify checks the chain against both.
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
#include "store/sqlite_db.h"

namespace berth::store {

struct AuditEntry {
  std::int64_t seq = 0;  // 1, 2, 3, ... with no gaps; assigned by Append
  TimeMs time_ms = 0;
  std::string actor;   // X-Berth-User, the client address, or "berth"
  std::string tenant;  // the job's tenant where there is one, else ""
  std::string action;  // "job.submit", "policy.apply", "gpu.cordon", ...
  std::string object;  // "job/12", "policy/v3", "node/a", "gpu/a/3"
  // Small JSON summaries (compact text, "" for none). Never request bodies:
  // a job's env values or a policy's text stay out of the trail.
  std::string before;
  std::string after;
  std::string request_id;
  std::string source;     // the client's address; "" for Berth's own actions
  std::string outcome;    // "ok", "denied: <code>" or "failed: <message>"
  std::string prev_hash;  // hex; kAuditGenesisHash for record 1
  std::string hash;       // hex SHA-256 of AuditCanonicalText
};

// prev_hash of the first record.
inline constexpr std::string_view kAuditGenesisHash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// Every field but `hash`, each length-prefixed so no two records serialize
// alike, prev_hash last.
std::string AuditCanonicalText(const AuditEntry& e);
// Lower-case hex SHA-256 of AuditCanonicalText (OpenSSL EVP).
Result<std::string> AuditHash(const AuditEntry& e);

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

// A remembered head: where the log ended when it was last written.
struct AuditHead {
  std::int64_t seq = 0;
  std::string hash;
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

// Records one audit transaction stores at most (group commit).
inline constexpr std::size_t kMaxAuditBatch = 64;

class AuditLog {
 public:
  // Opens `<data_dir>/berth.db` (creating the table if needed) on a second
  // connection; SqliteStore may have it open too.
  static Result<std::unique_ptr<AuditLog>> Open(const std::filesystem::path& data_dir);

  // Assigns seq, prev_hash and hash, and returns once the record is
  // committed (synchronous=FULL) and the head file replaced. The new record
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

 private:
  AuditLog(Database db, Database reader, std::filesystem::path head_path)
      : db_(std::move(db)), reader_(std::move(reader)), head_path_(std::move(head_path)) {}
  Result<std::optional<AuditHead>> MetaHead();
  Result<std::optional<AuditHead>> FileHead() const;
  Status WriteFileHead(const AuditHead& head) const;
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
