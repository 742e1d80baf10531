#include "store/sqlite_db.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <regex>
#include <thread>
#include <utility>

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

Result<StoreLocation> ParseStoreLocation(std::string_view value,
                                         const std::filesystem::path& data_dir) {
  if (value.empty()) return StoreLocation(data_dir);
  if (value.starts_with("sqlite:")) {
    value.remove_prefix(7);
    if (value.empty()) {
      return InvalidField("store", "sqlite: names no directory; use sqlite:DIR");
    }
    return StoreLocation(std::filesystem::path(value));
  }
  constexpr std::string_view kPasswordFix =
      "a password on the command line is readable by every user of this host; put it in a pgpass "
      "file (mode 0600) and name that file with passfile=... or PGPASSFILE";
  const bool uri = value.starts_with("postgresql://") || value.starts_with("postgres://");
  if (uri) {
    // postgresql://[user[:password]@][host][:port][/db][?param=value&...]
    const std::string_view rest = value.substr(value.find("://") + 3);
    const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
    const std::size_t at = authority.rfind('@');
    if (at != std::string_view::npos &&
        authority.substr(0, at).find(':') != std::string_view::npos) {
      return InvalidField("store", fmt::format("the URI holds a password: {}", kPasswordFix));
    }
    const std::size_t query = rest.find('?');
    if (query != std::string_view::npos) {
      std::string_view params = rest.substr(query + 1);
      while (!params.empty()) {
        const std::string_view param = params.substr(0, params.find('&'));
        if (param.starts_with("password=")) {
          return InvalidField("store", fmt::format("the URI holds a password: {}", kPasswordFix));
        }
        params.remove_prefix(std::min(params.size(), param.size() + 1));
      }
    }
    return StoreLocation::Postgres(std::string(value));
  }
  if (value.find('=') != std::string_view::npos) {
    // key=value pairs separated by spaces (libpq's other form).
    std::size_t at = 0;
    while (at < value.size()) {
      while (at < value.size() && value[at] == ' ') ++at;
      if (value.substr(at).starts_with("password")) {
        std::size_t eq = at + 8;
        while (eq < value.size() && value[eq] == ' ') ++eq;
        if (eq < value.size() && value[eq] == '=') {
          return InvalidField(
              "store", fmt::format("the connection string holds a password: {}", kPasswordFix));
        }
      }
      at = value.find(' ', at);
      if (at == std::string_view::npos) break;
    }
    return StoreLocation::Postgres(std::string(value));
  }
  // Not echoed: it may hold a secret in a form this does not know.
  return InvalidField("store",
                      "the value names no store: use postgresql://HOST[:PORT]/DATABASE, or leave "
                      "--store out to keep the state in SQLite under --data-dir");
}

namespace {

// A PostgreSQL connection that declares the term it writes for, if any.
Result<Database> ConnectFenced(const StoreLocation& where) {
  auto db = Database::Connect(where.conninfo);
  if (!db) return std::unexpected(db.error());
  if (where.on_session_lost) db->set_on_session_lost(where.on_session_lost);
  if (where.fence_term > 0) {
    BERTH_RETURN_IF_ERROR(
        db->Exec(fmt::format("SELECT set_config('berth.term', '{}', false)", where.fence_term)));
    if (where.fence_idle_ms > 0) {
      BERTH_RETURN_IF_ERROR(db->Exec(
          fmt::format("SELECT set_config('idle_in_transaction_session_timeout', '{}', false)",
                      where.fence_idle_ms)));
    }
  }
  return db;
}

}  // namespace

Result<Database> OpenStateDatabase(const StoreLocation& where) {
  if (where.postgres()) return ConnectFenced(where);
  return Database::OpenState(where.data_dir);
}

Result<Database> OpenReadDatabase(const StoreLocation& where) {
  if (where.postgres()) return ConnectFenced(where);
  return Database::OpenReader((where.data_dir / "berth.db").string());
}

std::string SchemaFor(Dialect d, std::string_view sqlite_ddl) {
  std::string out(sqlite_ddl);
  if (d == Dialect::kSqlite) return out;
  static const std::array<std::pair<std::regex, const char*>, 5> kRewrites = {{
      {std::regex(R"(\bINTEGER PRIMARY KEY( AUTOINCREMENT)?\b)"),
       "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
      {std::regex(R"(\bINTEGER\b)"), "BIGINT"},
      {std::regex(R"(\bBLOB\b)"), "BYTEA"},
      {std::regex(R"(\bREAL\b)"), "DOUBLE PRECISION"},
      {std::regex(R"(\s*\bWITHOUT ROWID\b)"), ""},
  }};
  for (const auto& [pattern, replacement] : kRewrites) {
    out = std::regex_replace(out, pattern, replacement);
  }
  return out;
}

std::string SqlJsonText(Dialect d, std::string_view expr, std::string_view key) {
  return d == Dialect::kPostgres ? fmt::format("(({})::jsonb ->> '{}')", expr, key)
                                 : fmt::format("json_extract({}, '$.{}')", expr, key);
}

std::string SqlJsonArrayLength(Dialect d, std::string_view expr) {
  return d == Dialect::kPostgres ? fmt::format("jsonb_array_length(({})::jsonb)", expr)
                                 : fmt::format("json_array_length({})", expr);
}

std::string SqlJsonInts(Dialect d, std::string_view param) {
  return d == Dialect::kPostgres
             ? fmt::format("SELECT jsonb_array_elements_text(CAST({} AS jsonb))::bigint", param)
             : fmt::format("SELECT value FROM json_each({})", param);
}

std::string SqlMax(Dialect d, std::string_view a, std::string_view b) {
  return fmt::format("{}({}, {})", d == Dialect::kPostgres ? "GREATEST" : "MAX", a, b);
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
