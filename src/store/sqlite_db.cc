#include "store/sqlite_db.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace berth::store {
namespace {

std::unexpected<Error> SqlError(sqlite3* db, std::string_view what) {
  return Fail(Code::kInternal, fmt::format("store: {}: {}", what, sqlite3_errmsg(db)));
}

// Berth's stores are several connections to one file (jobs, audit, identities,
// metering, telemetry), so a writer often finds another's commit in flight
// for a fraction of a millisecond. SQLite's own busy handler sleeps 1, 2, 5,
// 10 ms... between tries, which turned each such meeting into milliseconds of
// idle waiting on the submission path. This one retries after 20 us at first,
// then 100 us, then 1 ms, and gives up after about kBusyTimeoutMs as before.
constexpr int kBusyFastTries = 25;    // 25 x 20 us = 0.5 ms
constexpr int kBusyMediumTries = 75;  // + 50 x 100 us = 5.5 ms
constexpr int kBusyTimeoutMs = 5000;

int BusyRetry(void* /*unused*/, int tries) {
  if (tries >= kBusyMediumTries + kBusyTimeoutMs) return 0;  // SQLITE_BUSY to the caller
  const int micros = tries < kBusyFastTries ? 20 : tries < kBusyMediumTries ? 100 : 1000;
  std::this_thread::sleep_for(std::chrono::microseconds(micros));
  return 1;
}

}  // namespace

std::string PgPlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int largest = 0;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {  // a quoted literal or identifier, as it is
      const std::size_t end = sql.find(c, i + 1);
      const std::size_t stop = end == std::string_view::npos ? sql.size() : end + 1;
      out.append(sql.substr(i, stop - i));
      i = stop - 1;
      continue;
    }
    if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {  // a comment to the line's end
      const std::size_t end = sql.find('\n', i);
      const std::size_t stop = end == std::string_view::npos ? sql.size() : end;
      out.append(sql.substr(i, stop - i));
      i = stop - 1;
      continue;
    }
    if (c != '?') {
      out.push_back(c);
      continue;
    }
    std::size_t j = i + 1;
    int n = 0;
    while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') n = n * 10 + (sql[j++] - '0');
    if (j == i + 1) n = largest + 1;
    largest = std::max(largest, n);
    out += fmt::format("${}", n);
    i = j - 1;
  }
  return out;
}

StatementCache::~StatementCache() {
  for (auto& [sql, stmt] : idle_) sqlite3_finalize(stmt);
}

sqlite3_stmt* StatementCache::Take(std::string_view sql) {
  std::lock_guard lock(mu_);
  auto it = idle_.find(std::string(sql));
  if (it == idle_.end()) return nullptr;
  sqlite3_stmt* stmt = it->second;
  idle_.erase(it);
  return stmt;
}

void StatementCache::Give(std::string sql, sqlite3_stmt* stmt) {
  // Reset ends any read it still holds open, exactly as finalizing would.
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  {
    std::lock_guard lock(mu_);
    if (idle_.size() < kMaxIdle) {
      idle_.emplace(std::move(sql), stmt);
      return;
    }
  }
  sqlite3_finalize(stmt);
}

std::size_t StatementCache::idle() {
  std::lock_guard lock(mu_);
  return idle_.size();
}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (cache_) {
    cache_->Give(std::move(sql_), stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
}

Statement& Statement::Bind(int i, std::int64_t v) {
  if (pg_) {
    pg_->Bind(i, v);
    return *this;
  }
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

Statement& Statement::Bind(int i, std::string_view v) {
  if (pg_) {
    pg_->Bind(i, v);
    return *this;
  }
  // A default-constructed view has no data pointer, which SQLite would
  // store as NULL: an empty string is still text.
  sqlite3_bind_text(stmt_, i, v.data() != nullptr ? v.data() : "", static_cast<int>(v.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::Bind(int i, std::optional<std::int64_t> v) {
  if (v) return Bind(i, *v);
  return BindNull(i);
}

Statement& Statement::BindNull(int i) {
  if (pg_) {
    pg_->BindNull(i);
    return *this;
  }
  sqlite3_bind_null(stmt_, i);
  return *this;
}

Result<bool> Statement::Step() {
  if (pg_) {
    auto row = pg_->Step();
    if (row && pg_changes_ != nullptr) *pg_changes_ = pg_->Changes();
    return row;
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqlError(db_, "step");
}

Status Statement::Run() {
  for (;;) {
    auto row = Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) return Ok();
  }
}

void Statement::Reset() {
  if (pg_) {
    pg_->Reset();
    return;
  }
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::optional<std::int64_t> Statement::PgInt(int col) const {
  if (pg_->IsNull(col)) return std::nullopt;
  // A boolean (a comparison, EXISTS) reads as SQLite gives it: 1 or 0.
  const std::string text = pg_->Text(col);
  if (text == "t") return 1;
  if (text == "f") return 0;
  return pg_->OptInt(col);
}

std::optional<std::int64_t> Statement::OptInt(int col) const {
  if (pg_) return PgInt(col);
  if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(stmt_, col);
}

std::string Statement::Text(int col) const {
  if (pg_) return pg_->Text(col);
  const auto* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return {reinterpret_cast<const char*>(p),
          static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
}

Result<Database> Database::OpenState(const std::filesystem::path& data_dir) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    return Fail(Code::kUnavailable, fmt::format("cannot create data directory {}: {}",
                                                data_dir.string(), ec.message()));
  }
  return Open((data_dir / "berth.db").string());
}

Result<Database> Database::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  Database db(raw);
  if (rc != SQLITE_OK) {
    return Fail(Code::kUnavailable,
                fmt::format("cannot open state database {}: {}", path,
                            raw != nullptr ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_handler(raw, &BusyRetry, nullptr);
  BERTH_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL"));
  BERTH_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=FULL"));
  BERTH_RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys=ON"));
  return db;
}

Result<Database> Database::OpenReader(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr);
  Database db(raw);
  if (rc != SQLITE_OK) {
    return Fail(Code::kUnavailable,
                fmt::format("cannot open a read connection to {}: {}", path,
                            raw != nullptr ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_timeout(raw, 5000);
  // The writer set WAL on the file (it persists); a reader only reads.
  BERTH_RETURN_IF_ERROR(db.Exec("PRAGMA query_only=ON"));
  return db;
}

Result<Database> Database::Connect(const std::string& conninfo) {
  auto conn = PgConnection::Open(conninfo);
  if (!conn) return std::unexpected(conn.error());
  return Database(std::make_unique<PgSide>(std::move(*conn)));
}

std::int64_t Database::LastInsertId() const {
  if (!pg_) return sqlite3_last_insert_rowid(db_);
  // The session's last generated value, which the INSERT just drew.
  PgStatement st = pg_->conn.Prepare("SELECT lastval()");
  auto row = st.Step();
  return row && *row ? st.Int(0) : 0;
}

Database::~Database() {
  sqlite3_close_v2(db_);
}

void Database::SetRowHook(RowHook hook, void* arg) {
  if (pg_) return;
  if (hook == nullptr) {
    sqlite3_update_hook(db_, nullptr, nullptr);
    hook_.reset();
    return;
  }
  hook_ = std::make_unique<Hook>(Hook{hook, arg});
  sqlite3_update_hook(
      db_,
      [](void* h, int /*op*/, const char* /*db*/, const char* table, sqlite3_int64 rowid) {
        const auto* set = static_cast<const Hook*>(h);
        set->fn(set->arg, table, rowid);
      },
      hook_.get());
}

Status Database::Exec(std::string_view sql) {
  if (pg_) return pg_->conn.Exec(sql);
  char* err = nullptr;
  std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    return Fail(Code::kInternal, fmt::format("store: {}", msg));
  }
  return Ok();
}

Result<Statement> Database::Prepare(std::string_view sql) {
  if (pg_) {
    return Statement(std::make_unique<PgStatement>(pg_->conn.Prepare(PgPlaceholders(sql))),
                     &pg_->changes);
  }
  if (sqlite3_stmt* cached = cache_->Take(sql); cached != nullptr) {
    return Statement(db_, cached, cache_, std::string(sql));
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                         &stmt, nullptr) != SQLITE_OK) {
    return SqlError(db_, "prepare");
  }
  return Statement(db_, stmt, cache_, std::string(sql));
}

ReadTransaction::~ReadTransaction() {
  if (open_) (void)db_.Exec("COMMIT");
}

Status ReadTransaction::Begin() {
  BERTH_RETURN_IF_ERROR(db_.Exec(db_.dialect() == Dialect::kPostgres
                                     ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                                     : "BEGIN DEFERRED"));
  open_ = true;
  return Ok();
}

Transaction::~Transaction() {
  if (open_) (void)db_.Exec("ROLLBACK");
}

Status Transaction::Begin() {
  // PostgreSQL: READ COMMITTED. The stores serialise their writers in the
  // process, and one berthd writes at a time.
  BERTH_RETURN_IF_ERROR(
      db_.Exec(db_.dialect() == Dialect::kPostgres ? "BEGIN" : "BEGIN IMMEDIATE"));
  open_ = true;
  return Ok();
}

Status Transaction::Commit() {
  BERTH_RETURN_IF_ERROR(db_.Exec("COMMIT"));
  open_ = false;
  return Ok();
}

}  // namespace berth::store
