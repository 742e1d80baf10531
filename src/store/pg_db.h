// A thin RAII layer over libpq, shaped as sqlite_db.h is for SQLite: a
// connection, statements with $1..$n parameters and typed binds and reads,
// transactions at a chosen isolation level, and a helper that runs a
// transaction again when PostgreSQL aborted it to keep it serializable or to
// break a deadlock. It is the ground the PostgreSQL backend of Berth's stores
// (issue 20) is built on; nothing in berthd uses it yet.
//
// Errors come back as values. A failed statement's SQLSTATE decides the code
// (PgCodeFor): a unique violation is kAlreadyExists, as the SQLite stores
// report a taken name; a lost connection, a serialization failure or a
// deadlock is kUnavailable (try again); a mistake in Berth's SQL is kInternal.
// The message names the SQLSTATE.
//
// One connection is used by one thread at a time (libpq's rule); PgPool
// (pg_pool.h) shares several between threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

// libpq's handles, declared here so that only pg_*.cc include libpq-fe.h.
struct pg_conn;
struct pg_result;

namespace berth::store {

// Berth's code for a SQLSTATE (the five characters of a PostgreSQL error).
// The table is in pg_db.cc; an unknown or empty state is kInternal.
Code PgCodeFor(std::string_view sqlstate);

// True for the two SQLSTATEs after which the same transaction, run again
// from its start, may well commit: 40001 (serialization failure) and 40P01
// (deadlock detected).
bool PgRetryable(std::string_view sqlstate);

// What one connection keeps beside libpq's handle: the SQL of its prepared
// statements, and what the last command's failure was. Shared by the
// connection and its statements so that moving the connection leaves the
// statements' pointer valid.
struct PgSession;

class PgStatement {
 public:
  PgStatement(PgStatement&& o) noexcept;
  PgStatement& operator=(PgStatement&&) = delete;
  PgStatement(const PgStatement&) = delete;
  PgStatement& operator=(const PgStatement&) = delete;
  ~PgStatement();

  // Parameter i is $i (1-based). Each bind gives the parameter its type the
  // first time the statement is prepared on the connection: int8 for an
  // integer, text for text, left to the server for a NULL.
  PgStatement& Bind(int i, std::int64_t v);
  PgStatement& Bind(int i, std::string_view v);
  PgStatement& Bind(int i, std::optional<std::int64_t> v);
  PgStatement& BindNull(int i);

  // The first call runs the statement; each call then moves to the next
  // row: true when a row is available, false when there is none left.
  [[nodiscard]] Result<bool> Step();
  // Runs the statement (again, when it ran before), ignoring any rows.
  [[nodiscard]] Status Run();
  // Forgets the binds and the result, so the statement can run again with
  // new binds (a loop of inserts prepares it once).
  void Reset();

  // The current row's column `col` (0-based). The result is in PostgreSQL's
  // text format: Int parses it, so the column must be an integer type.
  std::int64_t Int(int col) const;
  std::optional<std::int64_t> OptInt(int col) const;
  // Text as stored (UTF-8); empty for NULL.
  std::string Text(int col) const;
  bool IsNull(int col) const;
  // Rows the last run inserted, updated, deleted or returned (PQcmdTuples).
  std::int64_t Changes() const;

 private:
  friend class PgConnection;
  PgStatement(PgSession* session, std::string sql) : session_(session), sql_(std::move(sql)) {}
  [[nodiscard]] Status Execute();
  void SetParam(int i, std::optional<std::string> value, unsigned type);

  PgSession* session_;
  std::string sql_;
  // Parameter values in text format (nullopt: NULL) and their type OIDs.
  std::vector<std::optional<std::string>> values_;
  std::vector<unsigned> types_;
  // Set when a bind cannot be sent (text with a NUL byte); Execute fails.
  std::string bind_error_;
  pg_result* result_ = nullptr;
  bool executed_ = false;
  int row_ = -1;
};

// How long a session's link to the server may stay dead (sent data not
// acknowledged, or no answer to TCP keepalives) before the session is given
// up as lost: without a bound, a query on a link whose packets are dropped
// (the server's host cut off) waits for the kernel's retransmissions, many
// minutes. A slow query on a live link is not affected: the server's kernel
// still acknowledges and answers keepalives.
inline constexpr std::chrono::milliseconds kPgDeadLinkAfter{10'000};

class PgConnection {
 public:
  // Connects with a libpq connection string ("host=... port=... dbname=..."
  // or a postgresql:// URI), in UTF-8. An unreachable server is kUnavailable.
  // Connecting and a dead link give up after `dead_after` (connect_timeout,
  // keepalives and tcp_user_timeout; the connection string's own values of
  // those win).
  static Result<PgConnection> Open(const std::string& conninfo,
                                   std::chrono::milliseconds dead_after = kPgDeadLinkAfter);
  PgConnection(PgConnection&& o) noexcept;
  PgConnection& operator=(PgConnection&&) = delete;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  // Runs SQL text without parameters; it may hold several statements.
  [[nodiscard]] Status Exec(std::string_view sql);
  // A statement for `sql`. It is prepared on the server when first run on
  // this connection (once per SQL text, up to kMaxPrepared texts) and run by
  // name after that. The statement must not outlive the connection.
  PgStatement Prepare(std::string_view sql);

  // Called once, from the failing call, when a command finds the session
  // lost (the server restarted or went away, the backend was terminated):
  // for berthd's leader, whose store sessions hold no way back into a
  // transaction in doubt, and which steps down instead (docs/operations.md).
  void set_on_lost(std::function<void(const std::string& why)> on_lost);
  // The server process serving this connection (pg_stat_activity.pid).
  int BackendPid() const;
  // The connection is lost (the server went away, the backend was
  // terminated): every later command fails; a pool drops it.
  bool broken() const;
  // Reads what the server sent since the last command, without waiting, and
  // tells whether the connection still stands. A backend that was
  // terminated or a server that went away while the connection sat idle is
  // noticed here rather than by the next command's failure.
  bool CheckAlive();
  // A transaction is open (or failed and not yet rolled back).
  bool in_transaction() const;
  // Statements prepared on the server for this connection.
  std::size_t prepared_statements() const;
  // The SQLSTATE of the last command, when it failed; empty after a success.
  const std::string& last_sqlstate() const;
  // A statement or the COMMIT of the transaction begun last failed with
  // 40001 or 40P01: running the transaction again may succeed.
  bool retryable_failure() const;

  static constexpr std::size_t kMaxPrepared = 256;

 private:
  friend class PgTransaction;
  explicit PgConnection(std::unique_ptr<PgSession> session);
  std::unique_ptr<PgSession> session_;
};

// The isolation levels Berth asks for (PostgreSQL's names).
enum class Isolation { kReadCommitted, kRepeatableRead, kSerializable };
std::string_view IsolationName(Isolation level);

// A transaction on one connection: BEGIN at `level` in Begin(), COMMIT in
// Commit(), ROLLBACK when destroyed without a successful Commit() (also
// after a failed statement, which in PostgreSQL aborts the transaction).
class PgTransaction {
 public:
  explicit PgTransaction(PgConnection& conn, Isolation level = Isolation::kReadCommitted)
      : conn_(conn), level_(level) {}
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;
  ~PgTransaction();

  [[nodiscard]] Status Begin();
  // Fails when PostgreSQL rolled the transaction back instead (a statement
  // of it had failed, or committing it would break serializability), and
  // when the connection was lost during COMMIT: the outcome is then
  // unknown, and the message says so.
  [[nodiscard]] Status Commit();

  PgConnection& connection() { return conn_; }
  Isolation level() const { return level_; }

 private:
  PgConnection& conn_;
  Isolation level_;
  bool open_ = false;
};

struct TxOptions {
  Isolation level = Isolation::kSerializable;
  // Runs in all, the first included; at least 1.
  int max_attempts = 5;
};

// Runs `body` inside a transaction at `options.level` and commits it. When
// PostgreSQL aborts the transaction with 40001 or 40P01 (in a statement of
// the body or at COMMIT), it runs the whole body again in a new
// transaction, up to `options.max_attempts` runs, waiting a millisecond more
// before each; past that the error is kUnavailable and names the attempts.
// Any other failure of the body is returned as it is, after one run. The
// body must therefore be safe to run again: it reads what it needs inside
// the transaction and keeps no effect outside it until the call returns.
// `attempts`, when given, receives the number of runs.
[[nodiscard]] Status RunTransaction(PgConnection& conn, const TxOptions& options,
                                    const std::function<Status(PgTransaction&)>& body,
                                    int* attempts = nullptr);

// Every row `st` steps to, each turned into a T by `read(st)`.
template <typename T, typename Read>
Result<std::vector<T>> CollectPgRows(PgStatement& st, Read read) {
  std::vector<T> out;
  for (;;) {
    auto row = st.Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) return out;
    out.push_back(read(st));
  }
}

}  // namespace berth::store
