#include "store/pg_db.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <thread>
#include <unordered_map>

namespace berth::store {

struct PgSession {
  PGconn* conn = nullptr;
  // Prepared statements of this connection: SQL text -> server-side name.
  std::unordered_map<std::string, std::string> prepared;
  std::uint64_t next_name = 1;
  std::string last_sqlstate;
  // A 40001 or 40P01 since the last BEGIN (see retryable_failure()).
  bool retryable = false;
  // Called once when the session is found lost (set_on_lost).
  std::function<void(const std::string&)> on_lost;

  PgSession() = default;
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;
  ~PgSession() {
    if (conn != nullptr) PQfinish(conn);
  }
};

namespace {

// Type OIDs of the binds (pg_type.h is a server header; these never change).
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;

// libpq's messages span lines ("ERROR: ...\nDETAIL: ..."); Berth's errors
// are one line.
std::string PgOneLine(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

// At most the first 80 characters of a statement, for error messages.
std::string PgSqlHead(std::string_view sql) {
  std::string head = PgOneLine(sql.substr(0, 80));
  if (sql.size() > 80) head += "...";
  return head;
}

// The error of a failed command, from its result (null when libpq returned
// none) or else the connection. Records the SQLSTATE on the session.
std::unexpected<Error> PgFailed(PgSession& s, const PGresult* res, std::string_view what) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state != nullptr ? state : "";
  std::string msg;
  if (const char* primary =
          res != nullptr ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr) {
    msg = primary;
    if (const char* detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL)) {
      msg += fmt::format(" ({})", detail);
    }
  } else {
    msg = PQerrorMessage(s.conn);
  }
  const bool lost = PQstatus(s.conn) != CONNECTION_OK;
  if (lost && sqlstate.empty()) sqlstate = "08006";  // connection_failure
  s.last_sqlstate = sqlstate;
  if (PgRetryable(sqlstate)) s.retryable = true;
  const Code code = lost ? Code::kUnavailable : PgCodeFor(sqlstate);
  std::string text =
      fmt::format("store: {}: {} (SQLSTATE {}{})", what, PgOneLine(msg),
                  sqlstate.empty() ? "none" : sqlstate, lost ? ", connection lost" : "");
  if (lost && s.on_lost) {
    auto call = std::move(s.on_lost);
    s.on_lost = nullptr;
    call(text);
  }
  return Fail(code, std::move(text));
}

// A result that was a success: a command or rows.
bool PgSucceeded(const PGresult* res) {
  const auto status = PQresultStatus(res);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

void PgIgnoreNotice(void* /*arg*/, const char* /*message*/) {
  // Notices ("relation already exists, skipping") are not errors and would
  // otherwise go to stderr; the layer reports what failed, nothing else.
}

}  // namespace

Code PgCodeFor(std::string_view s) {
  if (s.size() != 5) return Code::kInternal;
  // A taken key: the SQLite stores report a taken name or id the same way.
  if (s == "23505") return Code::kAlreadyExists;
  if (PgRetryable(s)) return Code::kUnavailable;
  if (s == "55P03") return Code::kUnavailable;  // lock_not_available (NOWAIT, lock_timeout)
  if (s == "57014") return Code::kUnavailable;  // query_canceled (statement_timeout)
  if (s == "25006")
    return Code::kUnavailable;  // read_only_sql_transaction: a standby, not the primary
  if (s == "53300") return Code::kUnavailable;  // too_many_connections
  // Berth's write fence (pg_lease.h): this session's leader was deposed.
  if (s == "BF001") return Code::kFailedPrecondition;
  const std::string_view cls = s.substr(0, 2);
  // Foreign key, NOT NULL, CHECK, exclusion: the write refers to or breaks
  // the state it found.
  if (cls == "23") return Code::kFailedPrecondition;
  if (cls == "08") return Code::kUnavailable;  // connection exceptions
  // Operator intervention: the backend was terminated, the server is
  // shutting down, crashed or not yet accepting connections.
  if (cls == "57") return Code::kUnavailable;
  if (cls == "53") return Code::kResourceExhausted;  // disk full, out of memory
  // Syntax errors, unknown tables or columns, bad casts: Berth's SQL is wrong.
  return Code::kInternal;
}

bool PgRetryable(std::string_view sqlstate) {
  return sqlstate == "40001" || sqlstate == "40P01";
}

// --- PgStatement -----------------------------------------------------------

PgStatement::PgStatement(PgStatement&& o) noexcept
    : session_(o.session_),
      sql_(std::move(o.sql_)),
      values_(std::move(o.values_)),
      types_(std::move(o.types_)),
      bind_error_(std::move(o.bind_error_)),
      result_(o.result_),
      executed_(o.executed_),
      row_(o.row_) {
  o.result_ = nullptr;
}

PgStatement::~PgStatement() {
  if (result_ != nullptr) PQclear(result_);
}

void PgStatement::SetParam(int i, std::optional<std::string> value, unsigned type) {
  if (i < 1) {
    bind_error_ = fmt::format("parameter ${} does not exist (they start at $1)", i);
    return;
  }
  const auto at = static_cast<std::size_t>(i - 1);
  if (values_.size() <= at) {
    values_.resize(at + 1);
    // A parameter never bound is NULL text: PostgreSQL must know the type of
    // every parameter up to the largest, used or not.
    types_.resize(at + 1, kTextOid);
  }
  values_[at] = std::move(value);
  types_[at] = type;
}

PgStatement& PgStatement::Bind(int i, std::int64_t v) {
  SetParam(i, std::to_string(v), kInt8Oid);
  return *this;
}

PgStatement& PgStatement::Bind(int i, std::string_view v) {
  // Parameters travel as C strings in text format, so a NUL byte would cut
  // the value short without a word; PostgreSQL's text cannot hold one anyway.
  if (v.find('\0') != std::string_view::npos) {
    bind_error_ =
        fmt::format("text for ${} holds a NUL byte, which PostgreSQL text cannot store", i);
  }
  SetParam(i, std::string(v), kTextOid);
  return *this;
}

PgStatement& PgStatement::Bind(int i, std::optional<std::int64_t> v) {
  if (v) return Bind(i, *v);
  return BindNull(i);
}

PgStatement& PgStatement::BindNull(int i) {
  SetParam(i, std::nullopt, 0);
  return *this;
}

Status PgStatement::Execute() {
  if (result_ != nullptr) {
    PQclear(result_);
    result_ = nullptr;
  }
  executed_ = false;
  row_ = -1;
  if (!bind_error_.empty()) {
    return Fail(Code::kInvalidArgument,
                fmt::format("store: `{}`: {}", PgSqlHead(sql_), bind_error_));
  }
  PgSession& s = *session_;
  std::vector<const char*> values(values_.size(), nullptr);
  for (std::size_t i = 0; i < values_.size(); ++i) {
    if (values_[i]) values[i] = values_[i]->c_str();
  }
  const int n = static_cast<int>(values.size());

  auto it = s.prepared.find(sql_);
  if (it == s.prepared.end() && s.prepared.size() < PgConnection::kMaxPrepared) {
    std::string name = fmt::format("berth_{}", s.next_name++);
    PGresult* made = PQprepare(s.conn, name.c_str(), sql_.c_str(), n, types_.data());
    if (made == nullptr || !PgSucceeded(made)) {
      auto err = PgFailed(s, made, fmt::format("prepare `{}`", PgSqlHead(sql_)));
      PQclear(made);
      return err;
    }
    PQclear(made);
    it = s.prepared.emplace(sql_, std::move(name)).first;
  }
  PGresult* res = it != s.prepared.end() ? PQexecPrepared(s.conn, it->second.c_str(), n,
                                                          values.data(), nullptr, nullptr, 0)
                                         : PQexecParams(s.conn, sql_.c_str(), n, types_.data(),
                                                        values.data(), nullptr, nullptr, 0);
  if (res == nullptr || !PgSucceeded(res)) {
    auto err = PgFailed(s, res, fmt::format("`{}`", PgSqlHead(sql_)));
    PQclear(res);
    return err;
  }
  s.last_sqlstate.clear();
  result_ = res;
  executed_ = true;
  return Ok();
}

Result<bool> PgStatement::Step() {
  if (!executed_) BERTH_RETURN_IF_ERROR(Execute());
  const int rows = PQntuples(result_);
  if (row_ + 1 < rows) {
    ++row_;
    return true;
  }
  row_ = rows;
  return false;
}

Status PgStatement::Run() {
  return Execute();
}

void PgStatement::Reset() {
  if (result_ != nullptr) PQclear(result_);
  result_ = nullptr;
  values_.clear();
  types_.clear();
  bind_error_.clear();
  executed_ = false;
  row_ = -1;
}

bool PgStatement::IsNull(int col) const {
  if (result_ == nullptr || row_ < 0 || row_ >= PQntuples(result_)) return true;
  if (col < 0 || col >= PQnfields(result_)) return true;
  return PQgetisnull(result_, row_, col) != 0;
}

std::optional<std::int64_t> PgStatement::OptInt(int col) const {
  if (IsNull(col)) return std::nullopt;
  const char* v = PQgetvalue(result_, row_, col);
  std::int64_t out = 0;
  const char* end = v + PQgetlength(result_, row_, col);
  if (std::from_chars(v, end, out).ec != std::errc()) return std::nullopt;
  return out;
}

std::int64_t PgStatement::Int(int col) const {
  return OptInt(col).value_or(0);
}

std::string PgStatement::Text(int col) const {
  if (IsNull(col)) return {};
  return {PQgetvalue(result_, row_, col),
          static_cast<std::size_t>(PQgetlength(result_, row_, col))};
}

std::int64_t PgStatement::Changes() const {
  if (result_ == nullptr) return 0;
  const char* text = PQcmdTuples(result_);
  std::int64_t n = 0;
  (void)std::from_chars(text, text + std::char_traits<char>::length(text), n);
  return n;
}

// --- PgConnection ----------------------------------------------------------

PgConnection::PgConnection(std::unique_ptr<PgSession> session) : session_(std::move(session)) {}
PgConnection::PgConnection(PgConnection&& o) noexcept = default;
PgConnection::~PgConnection() = default;

Result<PgConnection> PgConnection::Open(const std::string& conninfo,
                                        std::chrono::milliseconds dead_after) {
  using std::chrono::duration_cast;
  using std::chrono::seconds;
  const auto whole_seconds = [](std::chrono::milliseconds d) {
    return std::max<std::int64_t>(
        1, duration_cast<seconds>(d + std::chrono::milliseconds(999)).count());
  };
  // Keepalives start after a third of the bound and probe every second
  // until it is spent.
  const std::int64_t idle = std::max<std::int64_t>(1, whole_seconds(dead_after) / 3);
  const std::string connect_timeout =
      std::to_string(std::max<std::int64_t>(2, whole_seconds(dead_after)));
  const std::string keepalives_idle = std::to_string(idle);
  const std::string keepalives_count =
      std::to_string(std::max<std::int64_t>(1, whole_seconds(dead_after) - idle));
  const std::string user_timeout = std::to_string(dead_after.count());
  // Ours first: the expanded connection string (dbname) overrides them.
  const std::array<const char*, 8> keywords = {
      "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname",          nullptr};
  const std::array<const char*, 8> values = {connect_timeout.c_str(),  "1",
                                             keepalives_idle.c_str(),  "1",
                                             keepalives_count.c_str(), user_timeout.c_str(),
                                             conninfo.c_str(),         nullptr};
  auto s = std::make_unique<PgSession>();
  s->conn = PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1);
  if (s->conn == nullptr) {
    return Fail(Code::kResourceExhausted, "store: cannot connect to PostgreSQL: out of memory");
  }
  if (PQstatus(s->conn) != CONNECTION_OK) {
    // The message names host and port; the connection string itself may
    // hold a password and is not repeated.
    return Fail(Code::kUnavailable, fmt::format("store: cannot connect to PostgreSQL: {}",
                                                PgOneLine(PQerrorMessage(s->conn))));
  }
  PQsetNoticeProcessor(s->conn, &PgIgnoreNotice, nullptr);
  if (PQsetClientEncoding(s->conn, "UTF8") != 0) {
    return Fail(Code::kInternal, fmt::format("store: cannot use UTF-8 with PostgreSQL: {}",
                                             PgOneLine(PQerrorMessage(s->conn))));
  }
  return PgConnection(std::move(s));
}

Status PgConnection::Exec(std::string_view sql) {
  PgSession& s = *session_;
  const std::string text(sql);
  PGresult* res = PQexec(s.conn, text.c_str());
  if (res == nullptr || !PgSucceeded(res)) {
    auto err = PgFailed(s, res, fmt::format("`{}`", PgSqlHead(sql)));
    PQclear(res);
    return err;
  }
  PQclear(res);
  s.last_sqlstate.clear();
  return Ok();
}

PgStatement PgConnection::Prepare(std::string_view sql) {
  return PgStatement(session_.get(), std::string(sql));
}

void PgConnection::set_on_lost(std::function<void(const std::string& why)> on_lost) {
  session_->on_lost = std::move(on_lost);
}

int PgConnection::BackendPid() const {
  return PQbackendPID(session_->conn);
}

bool PgConnection::broken() const {
  return PQstatus(session_->conn) != CONNECTION_OK;
}

bool PgConnection::CheckAlive() {
  PGconn* c = session_->conn;
  // A terminated backend sends its last error and closes: the first read
  // takes the error, a later one the end of the stream.
  for (int i = 0; i < 4 && PQstatus(c) == CONNECTION_OK; ++i) {
    pollfd ready{PQsocket(c), POLLIN, 0};
    if (::poll(&ready, 1, 0) <= 0) break;  // nothing waiting
    if (PQconsumeInput(c) == 0) break;
  }
  return PQstatus(c) == CONNECTION_OK;
}

bool PgConnection::in_transaction() const {
  return PQtransactionStatus(session_->conn) != PQTRANS_IDLE;
}

std::size_t PgConnection::prepared_statements() const {
  return session_->prepared.size();
}

const std::string& PgConnection::last_sqlstate() const {
  return session_->last_sqlstate;
}

bool PgConnection::retryable_failure() const {
  return session_->retryable;
}

// --- transactions ----------------------------------------------------------

std::string_view IsolationName(Isolation level) {
  switch (level) {
    case Isolation::kReadCommitted:
      return "READ COMMITTED";
    case Isolation::kRepeatableRead:
      return "REPEATABLE READ";
    case Isolation::kSerializable:
      return "SERIALIZABLE";
  }
  return "READ COMMITTED";
}

PgTransaction::~PgTransaction() {
  // A failed statement leaves the transaction aborted; ROLLBACK ends it
  // either way. On a lost connection the server has rolled it back.
  if (open_ && !conn_.broken()) (void)conn_.Exec("ROLLBACK");
}

Status PgTransaction::Begin() {
  if (conn_.broken()) {
    return Fail(Code::kUnavailable, "store: begin: the connection to PostgreSQL is lost");
  }
  if (conn_.in_transaction()) {
    return Fail(Code::kInternal, "store: begin: a transaction is already open on this connection");
  }
  conn_.session_->retryable = false;
  BERTH_RETURN_IF_ERROR(conn_.Exec(fmt::format("BEGIN ISOLATION LEVEL {}", IsolationName(level_))));
  open_ = true;
  return Ok();
}

Status PgTransaction::Commit() {
  if (!open_) return Fail(Code::kInternal, "store: commit: no transaction is open");
  PgSession& s = *conn_.session_;
  PGresult* res = PQexec(s.conn, "COMMIT");
  // Whatever COMMIT answered, the transaction is over: committed, rolled
  // back, or (connection lost) decided by the server without us.
  open_ = false;
  if (res == nullptr || !PgSucceeded(res)) {
    auto err = PgFailed(s, res, "commit");
    PQclear(res);
    if (conn_.broken()) {
      err.error().message += "; the transaction's outcome is unknown";
    }
    return err;
  }
  // COMMIT of a transaction whose statement failed succeeds as a command
  // and rolls back: its tag says which.
  const std::string tag = PQcmdStatus(res);
  PQclear(res);
  if (tag != "COMMIT") {
    return Fail(s.retryable ? Code::kUnavailable : Code::kInternal,
                fmt::format("store: commit: PostgreSQL rolled the transaction back ({}), since a "
                            "statement in it had failed",
                            tag));
  }
  s.last_sqlstate.clear();
  return Ok();
}

Status RunTransaction(PgConnection& conn, const TxOptions& options,
                      const std::function<Status(PgTransaction&)>& body, int* attempts) {
  const int max_attempts = std::max(1, options.max_attempts);
  Error last;
  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    if (attempts != nullptr) *attempts = attempt;
    // Two transactions that keep aborting each other may both commit once
    // one of them starts a little later.
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(attempt - 1));
    bool retry = false;
    {
      PgTransaction tx(conn, options.level);
      Status st = tx.Begin();
      if (st) st = body(tx);
      if (st) st = tx.Commit();
      if (st) return Ok();
      retry = conn.retryable_failure() && !conn.broken();
      last = std::move(st.error());
    }  // rolls back what is still open
    if (!retry) return std::unexpected(std::move(last));
  }
  return Fail(Code::kUnavailable,
              fmt::format("store: transaction aborted by PostgreSQL in each of {} attempts "
                          "(serialization failure or deadlock); the last: {}",
                          max_attempts, last.message));
}

}  // namespace berth::store
