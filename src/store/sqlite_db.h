// A thin RAII layer over the SQLite C API: a connection, prepared statements
// with typed binds and reads, and transactions. Errors come back as values.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::store {

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

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

  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::optional<std::int64_t> OptInt(int col) const;
  std::string Text(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
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
  Database(Database&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Database& operator=(Database&&) = delete;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  [[nodiscard]] Status Exec(std::string_view sql);
  [[nodiscard]] Result<Statement> Prepare(std::string_view sql);
  std::int64_t LastInsertId() const { return sqlite3_last_insert_rowid(db_); }
  // Rows the last INSERT, UPDATE or DELETE changed.
  std::int64_t Changes() const { return sqlite3_changes(db_); }

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

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

}  // namespace berth::store
