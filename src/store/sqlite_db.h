// A thin RAII layer over the SQLite C API: a connection, prepared statements
// with typed binds and reads, and transactions. Errors come back as values.
//
// The same classes also speak to PostgreSQL (Database::Connect, over
// pg_db.h), so that the stores' code runs on either backend: SQL is written
// once with SQLite's `?` and `?N` parameters, which a PostgreSQL connection
// turns into `$N` (PgPlaceholders); the few constructs the two dialects
// spell differently are chosen by Database::dialect() at the call.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "store/pg_db.h"

namespace berth::store {

// Which SQL a Database speaks.
enum class Dialect { kSqlite, kPostgres };

// `sql` with SQLite's parameters (`?N`, and `?` for one more than the
// largest number so far) written as PostgreSQL's `$N`. Text inside quotes
// ('...', "...") and comments is left as it is.
std::string PgPlaceholders(std::string_view sql);

// Compiled statements of one connection that no Statement holds, by SQL
// text, so the hot paths (a submission's inserts, a pass's reason updates)
// compile each statement once per connection instead of once per use.
// Compiling is 10-50 us; a cached statement costs a reset. Bounded: past
// kMaxIdle idle statements a returned one is finalized instead (SQL built
// with literal values would otherwise grow it without end).
class StatementCache {
 public:
  static constexpr std::size_t kMaxIdle = 256;
  StatementCache() = default;
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache();

  // An idle compiled statement for `sql`, or nullptr.
  sqlite3_stmt* Take(std::string_view sql);
  // Takes back a statement made for `sql`: reset, unbound, kept or finalized.
  void Give(std::string sql, sqlite3_stmt* stmt);
  std::size_t idle();

 private:
  std::mutex mu_;
  std::unordered_multimap<std::string, sqlite3_stmt*> idle_;
};

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  // A statement that goes back to `cache` (keyed by `sql`) when destroyed.
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::shared_ptr<StatementCache> cache, std::string sql)
      : db_(db), stmt_(stmt), cache_(std::move(cache)), sql_(std::move(sql)) {}
  // A statement on a PostgreSQL connection; each run's count of changed
  // rows is written to `*changes` (the connection's Database::Changes()).
  Statement(std::unique_ptr<PgStatement> pg, std::int64_t* changes)
      : db_(nullptr), stmt_(nullptr), pg_(std::move(pg)), pg_changes_(changes) {}
  Statement(Statement&& o) noexcept
      : db_(o.db_),
        stmt_(o.stmt_),
        cache_(std::move(o.cache_)),
        sql_(std::move(o.sql_)),
        pg_(std::move(o.pg_)),
        pg_changes_(o.pg_changes_) {
    o.stmt_ = nullptr;
  }
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int i, std::int64_t v);
  Statement& Bind(int i, std::string_view v);
  Statement& Bind(int i, std::optional<std::int64_t> v);
  Statement& BindNull(int i);

  // Steps once: true when a row is available, false when done.
  [[nodiscard]] Result<bool> Step();
  // Steps to completion, ignoring rows.
  [[nodiscard]] Status Run();
  // Makes the statement ready to run again with new binds (clears the old
  // ones), so a loop of inserts prepares it once.
  void Reset();

  // An integer column (on PostgreSQL also a boolean one: 1 for true).
  std::int64_t Int(int col) const {
    return pg_ ? PgInt(col).value_or(0) : sqlite3_column_int64(stmt_, col);
  }
  std::optional<std::int64_t> OptInt(int col) const;
  std::string Text(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  // Set when the statement came from (and goes back to) a connection's cache.
  std::shared_ptr<StatementCache> cache_;
  std::string sql_;
  // Set on a PostgreSQL connection's statement (db_ and stmt_ are null).
  std::optional<std::int64_t> PgInt(int col) const;
  std::unique_ptr<PgStatement> pg_;
  std::int64_t* pg_changes_ = nullptr;
};

class Database {
 public:
  // Opens (creating) the database file in WAL mode with synchronous=FULL: a
  // commit returns only once the WAL is on disk.
  static Result<Database> Open(const std::string& path);
  // A second connection to an existing database for reads only (PRAGMA
  // query_only): in WAL mode its reads see the last committed state and
  // neither wait for the writer nor make it wait, except at a checkpoint.
  static Result<Database> OpenReader(const std::string& path);
  // Berth's state database, <data_dir>/berth.db, creating the directory.
  static Result<Database> OpenState(const std::filesystem::path& data_dir);
  // A connection to a PostgreSQL database (a libpq connection string or
  // postgresql:// URI). Its transactions are READ COMMITTED; a
  // ReadTransaction is a REPEATABLE READ, READ ONLY snapshot.
  static Result<Database> Connect(const std::string& conninfo);
  Database(Database&& o) noexcept
      : db_(o.db_), hook_(std::move(o.hook_)), cache_(std::move(o.cache_)), pg_(std::move(o.pg_)) {
    o.db_ = nullptr;
  }
  Database& operator=(Database&&) = delete;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  [[nodiscard]] Status Exec(std::string_view sql);
  // A compiled statement for `sql`: from the connection's cache when one is
  // idle, compiled otherwise; it goes back to the cache when destroyed.
  [[nodiscard]] Result<Statement> Prepare(std::string_view sql);
  // PostgreSQL: see PgConnection::set_on_lost. SQLite: nothing.
  void set_on_session_lost(std::function<void(const std::string& why)> on_lost) {
    if (pg_) pg_->conn.set_on_lost(std::move(on_lost));
  }
  // The id the last INSERT into a table with a generated id gave its row.
  std::int64_t LastInsertId() const;
  // Rows the last INSERT, UPDATE or DELETE changed.
  std::int64_t Changes() const { return pg_ ? pg_->changes : sqlite3_changes(db_); }
  Dialect dialect() const { return pg_ ? Dialect::kPostgres : Dialect::kSqlite; }
  // Compiled statements waiting in the cache for their next use.
  std::size_t cached_statements() const { return cache_->idle(); }
  // Calls `hook(arg, table, rowid)` for every row this connection inserts,
  // updates or deletes in a rowid table, in transactions that later roll
  // back too (SQLite's update hook; not for a DELETE without WHERE). Null
  // removes it. PostgreSQL has no such hook: on its connections this does
  // nothing, and a caller must find its changed rows another way.
  using RowHook = void (*)(void* arg, std::string_view table, std::int64_t rowid);
  void SetRowHook(RowHook hook, void* arg);

 private:
  explicit Database(sqlite3* db) : db_(db), cache_(std::make_shared<StatementCache>()) {}
  // A PostgreSQL connection and the rows its last statement changed; on the
  // heap so that statements keep a valid pointer when the Database moves.
  struct PgSide {
    explicit PgSide(PgConnection c) : conn(std::move(c)) {}
    PgConnection conn;
    std::int64_t changes = 0;
  };
  explicit Database(std::unique_ptr<PgSide> pg)
      : db_(nullptr), cache_(std::make_shared<StatementCache>()), pg_(std::move(pg)) {}
  sqlite3* db_;
  struct Hook {
    RowHook fn = nullptr;
    void* arg = nullptr;
  };
  // Where SQLite's callback finds the hook; its address outlives moves.
  std::unique_ptr<Hook> hook_;
  // Shared with the Statements it lent, which may outlive a moved-from or
  // closed Database: sqlite3_close_v2 waits for their finalization.
  std::shared_ptr<StatementCache> cache_;
  std::unique_ptr<PgSide> pg_;  // set on a PostgreSQL connection (db_ is null)
};

// Where Berth's state lives: `<data_dir>/berth.db` (SQLite, the embedded
// default) or a PostgreSQL database (a libpq connection string or
// postgresql:// URI). Every store opens its connections from one.
struct StoreLocation {
  // SQLite in `dir` (implicit, so a store opened on a data directory reads
  // as before).
  StoreLocation(std::filesystem::path dir) : data_dir(std::move(dir)) {}  // NOLINT
  static StoreLocation Postgres(std::string conninfo) {
    StoreLocation where{std::filesystem::path()};
    where.conninfo = std::move(conninfo);
    return where;
  }
  bool postgres() const { return !conninfo.empty(); }
  // The audit chain's head file: in the data directory on SQLite; none on
  // PostgreSQL, where the database keeps the head (the berthd that takes
  // over shares the database, not a directory).
  std::filesystem::path audit_head() const {
    return postgres() ? std::filesystem::path() : data_dir / "audit.head";
  }

  std::filesystem::path data_dir;
  std::string conninfo;
  // On PostgreSQL with leadership: the term of the lease this berthd holds.
  // Every connection opened from here declares it (WriteForTerm), so the
  // database's write fence lets its writes through only while that term
  // leads. 0: none declared (one berthd, no lease, or a tool).
  std::int64_t fence_term = 0;
  // With fence_term: PostgreSQL ends a session of this berthd that sits
  // idle inside a transaction this long (idle_in_transaction_session_
  // timeout), so that a leader paused mid-transaction, whose share lock on
  // the lease holds a takeover back, lets it go. 0: no limit.
  std::int64_t fence_idle_ms = 0;
  // On PostgreSQL: called once per connection opened from here when that
  // session is found lost (PgConnection::set_on_lost). berthd's leader
  // steps down on it.
  std::function<void(const std::string& why)> on_session_lost;
  // Every change to jobs while the store is open is made through it (one
  // berthd, or the leader, whose fence refuses every other writer): the
  // pending queue is kept between passes by reading only the rows that
  // changed. false where another process may write the same database at
  // once (the fault trials' fence.off): each pass reads the queue whole.
  bool sole_writer = true;
};

// berthd's --store value: empty is SQLite in `data_dir`; "sqlite:DIR" is
// SQLite in DIR; "postgresql://..." (or "postgres://...") and a libpq
// "key=value ..." string name a PostgreSQL database. A password in the value
// is refused: a command line is readable by every local user
// (/proc/PID/cmdline), so it belongs in a pgpass file (passfile=...) or
// PGPASSFILE. Errors name the field "store".
Result<StoreLocation> ParseStoreLocation(std::string_view value,
                                         const std::filesystem::path& data_dir);

// A store's writing connection, and a connection for its long reads (on
// SQLite a query_only one; on PostgreSQL a second session).
Result<Database> OpenStateDatabase(const StoreLocation& where);
Result<Database> OpenReadDatabase(const StoreLocation& where);

// A schema written for SQLite (CREATE TABLE and CREATE INDEX only) as
// `d` takes it: on PostgreSQL INTEGER is BIGINT (Berth keeps milliseconds),
// an INTEGER PRIMARY KEY is an identity column, BLOB is BYTEA, REAL is
// DOUBLE PRECISION and WITHOUT ROWID goes. Unchanged for SQLite.
std::string SchemaFor(Dialect d, std::string_view sqlite_ddl);

// The text at `key` of the JSON object in the text expression `expr`.
std::string SqlJsonText(Dialect d, std::string_view expr, std::string_view key);
// The length of the JSON array in the text expression `expr`.
std::string SqlJsonArrayLength(Dialect d, std::string_view expr);
// A subquery of the integers of a JSON array bound, as text, to `param`
// (`?` or `?N`): for `id IN (...)` with any number of ids.
std::string SqlJsonInts(Dialect d, std::string_view param);
// The larger of two integer expressions (SQLite's two-argument MAX,
// PostgreSQL's GREATEST).
std::string SqlMax(Dialect d, std::string_view a, std::string_view b);

// A read transaction: every statement between construction and destruction
// reads the same committed snapshot (a deferred BEGIN; WAL keeps it while
// writers go on). Ends with COMMIT, which on a read-only one releases it.
class ReadTransaction {
 public:
  explicit ReadTransaction(Database& db) : db_(db) {}
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;
  ~ReadTransaction();
  [[nodiscard]] Status Begin();

 private:
  Database& db_;
  bool open_ = false;
};

// Rolls back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Database& db) : db_(db) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  [[nodiscard]] Status Begin();
  [[nodiscard]] Status Commit();

 private:
  Database& db_;
  bool open_ = false;
};

// Every row `st` steps to, each turned into a T by `read(st)`.
template <typename T, typename Read>
Result<std::vector<T>> CollectRows(Statement& st, Read read) {
  std::vector<T> out;
  for (;;) {
    auto row = st.Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) return out;
    out.push_back(read(st));
  }
}

}  // namespace berth::store
