// The audit trail's hash chain, extended inside any write transaction on
// berth.db: the AuditLog's own appends, and a change that commits its record
// with itself (a submission, a cancel), so that a crash leaves both the
// change and its record or neither.
//
// Each record's hash is SHA-256 over a canonical serialization of its fields
// and the previous record's hash (AuditCanonicalText), so editing, removing
// or reordering a record breaks the chain at that record. Truncating the
// tail leaves a valid chain, so the head (latest sequence number and hash) is
// also remembered in two places outside the table's rows: the `meta` table
// (same transaction as the records) and `<data_dir>/audit.head` (written
// atomically after the commit by the file's own writer thread, one write
// shared by the changes that committed meanwhile, so a commit never waits
// for it). AuditLog::Verify checks the chain against both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "store/audit_entry.h"
#include "store/sqlite_db.h"

namespace berth::store {

// The audit tables (and the meta table they share with the stores), made if
// missing: every store that may commit records makes them, so none depends
// on which opened berth.db first.
[[nodiscard]] Status EnsureAuditSchema(Database& db);

// One write transaction's share of the chain. Made inside the open
// transaction (after BEGIN IMMEDIATE, so it is the only chainer: SQLite lets
// one writer in at a time). The head file is written after the commit and
// shared like a group commit: one write covers every change committed
// before it, so concurrent changes do not each pay for it. The lag is
// bounded: a chainer waits (or writes the file itself) rather than let the
// file fall more than kMaxAuditLag records behind, and the meta table says
// from which record on the file may not hold the chain yet.
class AuditAppend {
 public:
  // Assigns each record its seq, prev_hash and hash, chaining from the
  // furthest remembered head (meta, head file, last row: rows removed
  // behind Berth's back stay a gap for Verify, rows added are chained after
  // rather than collided with), inserts them and moves the meta head. An
  // empty `head_file` keeps the head in the database only (PostgreSQL, whose
  // standby berthd shares no data directory with the leader); there a
  // transaction-scoped advisory lock makes chainers take turns, as SQLite's
  // one writer does.
  [[nodiscard]] static Result<AuditAppend> Chain(Database& db, std::filesystem::path head_file,
                                                 std::span<AuditEntry* const> records);
  // After the commit: hands this head to the head file's writer thread and
  // returns at once; the file holds it a write later (FlushAuditHead waits
  // for that). Not calling it (the transaction rolled back) leaves the file
  // as it was.
  void Publish();

 private:
  // Inserts the records after `head` and moves the meta head (Chain's
  // second half, once the head is known).
  [[nodiscard]] static Result<AuditAppend> ChainRows(Database& db, std::filesystem::path head_file,
                                                     AuditHead head, std::int64_t unwritten_from,
                                                     std::span<AuditEntry* const> records);
  AuditAppend(std::filesystem::path head_file, std::optional<AuditHead> head)
      : head_file_(std::move(head_file)), head_(std::move(head)) {}
  std::filesystem::path head_file_;
  std::optional<AuditHead> head_;  // none: nothing was chained
};

// Commits `tx` (open on `db`) with `records` chained in it, and then
// publishes the head. Returns the commit's status: once it succeeded the
// change and its records are durable; the head file follows a write later
// (a failed write is logged, and a crash before it is what Verify allows).
// Empty `records`: a plain commit.
[[nodiscard]] Status CommitWithRecords(Transaction& tx, Database& db,
                                       const std::filesystem::path& head_file,
                                       std::span<AuditEntry> records);

// CommitWithRecords with the one record `audit` makes of what the change
// made (none when `audit` is unset or makes none).
template <typename... Made>
[[nodiscard]] Status CommitAudited(Transaction& tx, Database& db,
                                   const std::filesystem::path& head_file,
                                   const AuditOf<Made...>& audit,
                                   const std::type_identity_t<Made>&... made) {
  std::vector<AuditEntry> records;
  if (audit) {
    if (auto record = audit(made...)) records.push_back(std::move(*record));
  }
  return CommitWithRecords(tx, db, head_file, records);
}

// Returns once `head_file` holds every head this process has committed to it
// (writing it here when its writer thread is not already): a clean stop and
// Verify see the file current.
[[nodiscard]] Status FlushAuditHead(const std::filesystem::path& head_file);

// The head remembered in the meta table / in the head file (nullopt: none).
[[nodiscard]] Result<std::optional<AuditHead>> AuditMetaHead(Database& db);
[[nodiscard]] Result<std::optional<AuditHead>> AuditFileHead(const std::filesystem::path& file);

}  // namespace berth::store
