// The PostgreSQL layer (store/pg_db.h) against a real server: typed binds
// and reads round trip, NULL and non-ASCII text included; a statement is
// prepared once per connection; a transaction not committed is rolled back;
// SQLSTATEs become Berth's codes; a lost connection is kUnavailable; and a
// transaction that PostgreSQL aborts to stay serializable is run again, a
// bounded number of times.
#include "store/pg_db.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "support/pg_fixture.h"

namespace berth::store {
namespace {

using ::testing::HasSubstr;

TEST(PgCodes, SqlStatesBecomeBerthCodes) {
  EXPECT_EQ(PgCodeFor("23505"), Code::kAlreadyExists);       // unique_violation
  EXPECT_EQ(PgCodeFor("23503"), Code::kFailedPrecondition);  // foreign_key_violation
  EXPECT_EQ(PgCodeFor("23502"), Code::kFailedPrecondition);  // not_null_violation
  EXPECT_EQ(PgCodeFor("40001"), Code::kUnavailable);         // serialization_failure
  EXPECT_EQ(PgCodeFor("40P01"), Code::kUnavailable);         // deadlock_detected
  EXPECT_EQ(PgCodeFor("08006"), Code::kUnavailable);         // connection_failure
  EXPECT_EQ(PgCodeFor("57P01"), Code::kUnavailable);         // admin_shutdown
  EXPECT_EQ(PgCodeFor("25006"), Code::kUnavailable);         // read-only: a standby
  EXPECT_EQ(PgCodeFor("53100"), Code::kResourceExhausted);   // disk_full
  EXPECT_EQ(PgCodeFor("42P01"), Code::kInternal);            // undefined_table: our SQL
  EXPECT_EQ(PgCodeFor(""), Code::kInternal);
  EXPECT_TRUE(PgRetryable("40001"));
  EXPECT_TRUE(PgRetryable("40P01"));
  EXPECT_FALSE(PgRetryable("23505"));
  EXPECT_FALSE(PgRetryable("40002"));  // integrity constraint at commit: not a retry
}

TEST(PgConnect, NoServerIsUnavailable) {
  auto conn = PgConnection::Open("host=127.0.0.1 port=1 user=postgres connect_timeout=2");
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(conn.error().code, Code::kUnavailable);
  EXPECT_THAT(conn.error().message, HasSubstr("cannot connect to PostgreSQL"));
  EXPECT_EQ(conn.error().message.find('\n'), std::string::npos);
}

// Where the server binaries are missing the tests are skipped with this
// message, which must name the package to install.
TEST(PgServerSupport, MissingServerBinariesAreNamedForTheSkip) {
  const char* before = std::getenv("BERTH_PG_BIN_DIR");
  const std::string saved = before != nullptr ? before : "";
  ASSERT_EQ(::setenv("BERTH_PG_BIN_DIR", "/nonexistent/postgresql/bin", 1), 0);
  auto why = tests::PgServerUnavailable();
  auto started = tests::PgServer::Start();
  if (saved.empty()) {
    ::unsetenv("BERTH_PG_BIN_DIR");
  } else {
    ::setenv("BERTH_PG_BIN_DIR", saved.c_str(), 1);
  }
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("postgresql-15"));
  EXPECT_THAT(*why, HasSubstr("/nonexistent/postgresql/bin/initdb"));
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error(), *why);
}

class PgDbTest : public tests::PgServerTest {
 protected:
  void SetUp() override {
    PgServerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    conn_.emplace(Connect());
    ASSERT_TRUE(
        conn_->Exec("CREATE TABLE t(id BIGINT PRIMARY KEY, name TEXT NOT NULL,"
                    " parent BIGINT);"
                    "CREATE TABLE counter(k BIGINT PRIMARY KEY, v BIGINT NOT NULL);"
                    "INSERT INTO counter VALUES (1, 0)"));
  }

  static std::int64_t Scalar(PgConnection& conn, const std::string& sql) {
    auto st = conn.Prepare(sql);
    auto row = st.Step();
    EXPECT_TRUE(row.has_value()) << row.error().message;
    if (!row || !*row) return -1;
    return st.Int(0);
  }

  Status Insert(PgConnection& conn, std::int64_t id, std::string_view name) {
    auto st = conn.Prepare("INSERT INTO t(id, name) VALUES ($1, $2)");
    return st.Bind(1, id).Bind(2, name).Run();
  }

  std::optional<PgConnection> conn_;
};

TEST_F(PgDbTest, BindsAndReadsRoundTripWithNullAndNonAsciiText) {
  const std::string text = "Grüße, 调度器 🚀 'quoted' \\ back\tslash";
  auto ins = conn_->Prepare("INSERT INTO t(id, name, parent) VALUES ($1, $2, $3)");
  ASSERT_TRUE(ins.Bind(1, INT64_MAX).Bind(2, text).Bind(3, std::optional<std::int64_t>()).Run());
  ins.Reset();
  ASSERT_TRUE(ins.Bind(1, INT64_MIN)
                  .Bind(2, std::string_view())
                  .Bind(3, std::optional<std::int64_t>(-7))
                  .Run());
  ins.Reset();
  ASSERT_TRUE(ins.Bind(1, 3).Bind(2, "x").BindNull(3).Run());
  EXPECT_EQ(ins.Changes(), 1);
  // Prepared on the server once, run three times.
  EXPECT_EQ(conn_->prepared_statements(), 1U);

  struct Row {
    std::int64_t id;
    std::string name;
    std::optional<std::int64_t> parent;
    bool parent_null;
    std::int64_t bytes;
  };
  auto sel = conn_->Prepare("SELECT id, name, parent, octet_length(name) FROM t ORDER BY id");
  auto rows = CollectPgRows<Row>(sel, [](const PgStatement& s) {
    return Row{s.Int(0), s.Text(1), s.OptInt(2), s.IsNull(2), s.Int(3)};
  });
  ASSERT_TRUE(rows.has_value()) << rows.error().message;
  ASSERT_EQ(rows->size(), 3U);
  EXPECT_EQ((*rows)[0].id, INT64_MIN);
  EXPECT_EQ((*rows)[0].name, "");
  EXPECT_EQ((*rows)[0].parent, -7);
  EXPECT_EQ((*rows)[1].id, 3);
  EXPECT_EQ((*rows)[1].parent, std::nullopt);
  EXPECT_TRUE((*rows)[1].parent_null);
  EXPECT_EQ((*rows)[2].id, INT64_MAX);
  EXPECT_EQ((*rows)[2].name, text);
  // The server holds the UTF-8 bytes as sent: none lost or re-encoded.
  EXPECT_EQ((*rows)[2].bytes, static_cast<std::int64_t>(text.size()));

  // Non-ASCII text as a parameter: matched as stored, counted as characters.
  auto find = conn_->Prepare("SELECT id, length($1) FROM t WHERE name = $1");
  find.Bind(1, text);
  auto row = find.Step();
  ASSERT_TRUE(row.has_value() && *row);
  EXPECT_EQ(find.Int(0), INT64_MAX);
  EXPECT_EQ(find.Int(1), 34);  // characters, not bytes
  auto next = find.Step();
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(*next);
}

TEST_F(PgDbTest, TextWithANulByteIsRefusedNotCut) {
  auto ins = conn_->Prepare("INSERT INTO t(id, name) VALUES ($1, $2)");
  auto st = ins.Bind(1, 1).Bind(2, std::string_view("ab\0cd", 5)).Run();
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, Code::kInvalidArgument);
  EXPECT_THAT(st.error().message, HasSubstr("NUL"));
  EXPECT_EQ(Scalar(*conn_, "SELECT count(*) FROM t"), 0);
}

TEST_F(PgDbTest, ATransactionNotCommittedIsRolledBackWhenDestroyed) {
  PgConnection other = Connect();
  {
    PgTransaction tx(*conn_);
    ASSERT_TRUE(tx.Begin());
    ASSERT_TRUE(Insert(*conn_, 1, "uncommitted"));
    EXPECT_TRUE(conn_->in_transaction());
    EXPECT_EQ(Scalar(*conn_, "SELECT count(*) FROM t"), 1);
    EXPECT_EQ(Scalar(other, "SELECT count(*) FROM t"), 0);
  }
  EXPECT_FALSE(conn_->in_transaction());
  EXPECT_EQ(Scalar(*conn_, "SELECT count(*) FROM t"), 0);

  PgTransaction tx(*conn_);
  ASSERT_TRUE(tx.Begin());
  ASSERT_TRUE(Insert(*conn_, 2, "committed"));
  ASSERT_TRUE(tx.Commit());
  EXPECT_EQ(Scalar(other, "SELECT count(*) FROM t"), 1);
}

TEST_F(PgDbTest, CommitAfterAFailedStatementReportsTheRollback) {
  PgTransaction tx(*conn_);
  ASSERT_TRUE(tx.Begin());
  ASSERT_TRUE(Insert(*conn_, 1, "lost with the transaction"));
  auto bad = conn_->Exec("SELECT * FROM no_such_table");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Code::kInternal);
  EXPECT_EQ(conn_->last_sqlstate(), "42P01");
  auto committed = tx.Commit();
  ASSERT_FALSE(committed.has_value());
  EXPECT_THAT(committed.error().message, HasSubstr("rolled the transaction back"));
  EXPECT_FALSE(conn_->in_transaction());
  EXPECT_EQ(Scalar(*conn_, "SELECT count(*) FROM t"), 0);
}

TEST_F(PgDbTest, ConstraintViolationsBecomeBerthCodes) {
  ASSERT_TRUE(Insert(*conn_, 1, "first"));
  auto dup = Insert(*conn_, 1, "second");
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().code, Code::kAlreadyExists);
  EXPECT_EQ(conn_->last_sqlstate(), "23505");
  EXPECT_THAT(dup.error().message, HasSubstr("SQLSTATE 23505"));
  EXPECT_THAT(dup.error().message, HasSubstr("t_pkey"));
  EXPECT_EQ(dup.error().message.find('\n'), std::string::npos);

  ASSERT_TRUE(conn_->Exec("CREATE TABLE child(id BIGINT REFERENCES t(id))"));
  auto orphan = conn_->Exec("INSERT INTO child VALUES (99)");
  ASSERT_FALSE(orphan.has_value());
  EXPECT_EQ(orphan.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(conn_->last_sqlstate(), "23503");
  // A success clears the last failure.
  ASSERT_TRUE(conn_->Exec("SELECT 1"));
  EXPECT_EQ(conn_->last_sqlstate(), "");
}

TEST_F(PgDbTest, ATransactionRunsAtTheIsolationLevelAsked) {
  const std::vector<std::pair<Isolation, std::string>> levels = {
      {Isolation::kReadCommitted, "read committed"},
      {Isolation::kRepeatableRead, "repeatable read"},
      {Isolation::kSerializable, "serializable"}};
  for (const auto& [level, name] : levels) {
    PgTransaction tx(*conn_, level);
    ASSERT_TRUE(tx.Begin());
    auto st = conn_->Prepare("SELECT current_setting('transaction_isolation')");
    auto row = st.Step();
    ASSERT_TRUE(row.has_value() && *row);
    EXPECT_EQ(st.Text(0), name);
  }
  // And one transaction at a time per connection.
  PgTransaction outer(*conn_);
  ASSERT_TRUE(outer.Begin());
  PgTransaction inner(*conn_);
  auto nested = inner.Begin();
  ASSERT_FALSE(nested.has_value());
  EXPECT_THAT(nested.error().message, HasSubstr("already open"));
}

TEST_F(PgDbTest, ALostConnectionIsUnavailable) {
  TerminateBackend(conn_->BackendPid());
  auto st = conn_->Exec("SELECT 1");
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, Code::kUnavailable);
  EXPECT_TRUE(conn_->broken());
  EXPECT_FALSE(conn_->CheckAlive());
  PgTransaction tx(*conn_);
  auto begun = tx.Begin();
  ASSERT_FALSE(begun.has_value());
  EXPECT_EQ(begun.error().code, Code::kUnavailable);
}

TEST_F(PgDbTest, ALostSessionIsReportedOnceToItsOwner) {
  // berthd's leader steps down on it (StoreLocation::on_session_lost).
  std::vector<std::string> lost;
  conn_->set_on_lost([&](const std::string& why) { lost.push_back(why); });
  ASSERT_TRUE(conn_->Exec("SELECT 1").has_value());
  EXPECT_TRUE(lost.empty());  // a working session says nothing
  auto bad = conn_->Exec("SELECT * FROM no_such_table");
  ASSERT_FALSE(bad.has_value());
  EXPECT_TRUE(lost.empty());  // a failed statement is not a lost session
  TerminateBackend(conn_->BackendPid());
  EXPECT_FALSE(conn_->Exec("SELECT 1").has_value());
  EXPECT_FALSE(conn_->Prepare("SELECT 2").Run().has_value());
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find("connection lost"), std::string::npos) << lost[0];
}

// Reads the counter, then adds `add` to what it read: a read-modify-write
// that a concurrent update between the two makes PostgreSQL abort at
// SERIALIZABLE (40001).
Status AddToCounter(PgTransaction& tx, std::int64_t add) {
  auto read = tx.connection().Prepare("SELECT v FROM counter WHERE k = 1");
  auto row = read.Step();
  if (!row) return std::unexpected(row.error());
  const std::int64_t v = read.Int(0);
  auto write = tx.connection().Prepare("UPDATE counter SET v = $1 WHERE k = 1");
  return write.Bind(1, v + add).Run();
}

TEST_F(PgDbTest, ASerializationFailureIsRetriedUntilItCommits) {
  PgConnection other = Connect();
  int attempts = 0;
  int runs = 0;
  auto st = RunTransaction(
      *conn_, TxOptions{Isolation::kSerializable, 5},
      [&](PgTransaction& tx) -> Status {
        auto read = tx.connection().Prepare("SELECT v FROM counter WHERE k = 1");
        BERTH_RETURN_IF_ERROR(read.Run());  // the transaction's snapshot
        if (runs++ == 0) {
          // Another writer commits after the snapshot, before our write.
          BERTH_RETURN_IF_ERROR(other.Exec("UPDATE counter SET v = v + 1 WHERE k = 1"));
        }
        return AddToCounter(tx, 10);
      },
      &attempts);
  ASSERT_TRUE(st.has_value()) << st.error().message;
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(runs, 2);
  // The second run read the other writer's 1: no update was lost.
  EXPECT_EQ(Scalar(other, "SELECT v FROM counter WHERE k = 1"), 11);
}

TEST_F(PgDbTest, RetriesAreBoundedAndTheErrorNamesThem) {
  PgConnection other = Connect();
  int attempts = 0;
  auto st = RunTransaction(
      *conn_, TxOptions{Isolation::kSerializable, 3},
      [&](PgTransaction& tx) -> Status {
        BERTH_RETURN_IF_ERROR(tx.connection().Exec("SELECT v FROM counter WHERE k = 1"));
        BERTH_RETURN_IF_ERROR(other.Exec("UPDATE counter SET v = v + 1 WHERE k = 1"));
        return AddToCounter(tx, 10);
      },
      &attempts);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, Code::kUnavailable);
  EXPECT_THAT(st.error().message, HasSubstr("each of 3 attempts"));
  EXPECT_THAT(st.error().message, HasSubstr("40001"));
  EXPECT_EQ(attempts, 3);
  // The other writer's three updates, none of ours.
  EXPECT_EQ(Scalar(other, "SELECT v FROM counter WHERE k = 1"), 3);
  EXPECT_FALSE(conn_->in_transaction());
}

TEST_F(PgDbTest, ADeadlockIsRetried) {
  ASSERT_TRUE(conn_->Exec("INSERT INTO counter VALUES (2, 0)"));
  // This side finds the deadlock (the other one would wait 1 s to look).
  ASSERT_TRUE(conn_->Exec("SET deadlock_timeout = '10ms'"));
  PgConnection other = Connect();
  const int other_pid = other.BackendPid();
  std::future<Status> other_done;
  int runs = 0;
  int attempts = 0;
  auto st = RunTransaction(
      *conn_, TxOptions{Isolation::kReadCommitted, 3},
      [&](PgTransaction& tx) -> Status {
        BERTH_RETURN_IF_ERROR(tx.connection().Exec("UPDATE counter SET v = v + 1 WHERE k = 1"));
        if (runs++ == 0) {
          // The other holds row 2 and comes to wait for our row 1...
          BERTH_RETURN_IF_ERROR(other.Exec("BEGIN; UPDATE counter SET v = v + 10 WHERE k = 2"));
          other_done = std::async(std::launch::async, [&]() -> Status {
            BERTH_RETURN_IF_ERROR(other.Exec("UPDATE counter SET v = v + 10 WHERE k = 1"));
            return other.Exec("COMMIT");
          });
          if (!WaitsForALock(other_pid)) return Fail(Code::kInternal, "the other did not wait");
        }
        // ... while we wait for its row 2: 40P01 for us, and our rollback
        // lets it commit.
        return tx.connection().Exec("UPDATE counter SET v = v + 1 WHERE k = 2");
      },
      &attempts);
  ASSERT_TRUE(st.has_value()) << st.error().message;
  EXPECT_EQ(attempts, 2);
  ASSERT_TRUE(other_done.valid());
  auto theirs = other_done.get();
  EXPECT_TRUE(theirs.has_value()) << theirs.error().message;
  EXPECT_EQ(Scalar(*conn_, "SELECT v FROM counter WHERE k = 1"), 11);
  EXPECT_EQ(Scalar(*conn_, "SELECT v FROM counter WHERE k = 2"), 11);
}

TEST_F(PgDbTest, OtherFailuresAreNotRetried) {
  int attempts = 0;
  auto refused = RunTransaction(
      *conn_, TxOptions{},
      [&](PgTransaction& tx) -> Status {
        BERTH_RETURN_IF_ERROR(Insert(tx.connection(), 1, "written, then refused"));
        return InvalidField("name", "refused by the body");
      },
      &attempts);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kInvalidArgument);
  EXPECT_EQ(refused.error().field, "name");
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(Scalar(*conn_, "SELECT count(*) FROM t"), 0);

  ASSERT_TRUE(Insert(*conn_, 1, "taken"));
  auto dup = RunTransaction(
      *conn_, TxOptions{}, [&](PgTransaction& tx) { return Insert(tx.connection(), 1, "again"); },
      &attempts);
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().code, Code::kAlreadyExists);
  EXPECT_EQ(attempts, 1);
}

}  // namespace
}  // namespace berth::store
