// The store's schema is written for SQLite and turned into PostgreSQL's by
// SchemaFor (sqlite_db.h): this checks that the two databases the store
// makes hold the same tables with the same columns, so a column one dialect
// gets and the other does not (a migration's ALTER, a table made in one
// branch) fails here, not in production. It also checks PostgreSQL's one
// column of its own, jobs.change_seq, by which the pending queue is kept
// where SQLite has a row hook.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <utility>

#include "control/lifecycle.h"
#include "model/job.h"
#include "unit/store/backends.h"

namespace berth::store {
namespace {

using Columns = std::set<std::pair<std::string, std::string>>;

// Columns only PostgreSQL's schema has, each for a reason of its dialect.
const Columns kPostgresOnly = {
    {"jobs", "change_seq"},  // the pending queue's change marker (no row hook)
};

Columns Read(Database& db, std::string_view sql) {
  Columns out;
  auto st = db.Prepare(sql);
  EXPECT_TRUE(st.has_value()) << st.error().message;
  if (!st) return out;
  for (;;) {
    auto row = st->Step();
    EXPECT_TRUE(row.has_value()) << row.error().message;
    if (!row || !*row) return out;
    out.emplace(st->Text(0), st->Text(1));
  }
}

TEST(StoreSchemaTest, SqliteAndPostgresHoldTheSameTablesAndColumns) {
  std::string why;
  const tests::PgSchema pg = tests::FreshPgSchema(why);
  if (pg.conninfo.empty()) GTEST_SKIP() << why;

  std::string tmpl = (std::filesystem::temp_directory_path() / "berth-schema-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = tmpl;
  Columns sqlite_columns;
  {
    auto store = SqliteStore::Open(dir, 1000);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    auto db = Database::OpenReader((dir / "berth.db").string());
    ASSERT_TRUE(db.has_value()) << db.error().message;
    sqlite_columns = Read(*db,
                          "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p "
                          "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'");
  }
  std::filesystem::remove_all(dir);

  auto store = SqliteStore::Open(StoreLocation::Postgres(pg.conninfo), 1000);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  auto db = Database::Connect(pg.conninfo);
  ASSERT_TRUE(db.has_value()) << db.error().message;
  const Columns pg_columns =
      Read(*db,
           "SELECT table_name::text, column_name::text FROM "
           "information_schema.columns WHERE table_schema = current_schema()");

  ASSERT_GT(sqlite_columns.size(), 100U);  // every table was read
  for (const auto& [table, column] : sqlite_columns) {
    EXPECT_TRUE(pg_columns.contains({table, column}))
        << table << "." << column << " is in the SQLite schema but not the PostgreSQL one";
  }
  for (const auto& [table, column] : pg_columns) {
    if (kPostgresOnly.contains({table, column})) continue;
    EXPECT_TRUE(sqlite_columns.contains({table, column}))
        << table << "." << column << " is in the PostgreSQL schema but not the SQLite one";
  }
}

model::JobSpec OneGpu(std::string name) {
  model::JobSpec s;
  s.name = std::move(name);
  s.command = {"true"};
  s.resources.gpus = 1;
  return s;
}

std::vector<std::int64_t> PendingIds(SqliteStore& store) {
  std::vector<std::int64_t> ids;
  auto pending = store.PendingJobs();
  EXPECT_TRUE(pending.has_value()) << pending.error().message;
  if (pending) {
    for (const auto& j : *pending) ids.push_back(j.id);
  }
  return ids;
}

// A database made before jobs.change_seq gets the column, its sequence and
// trigger when a berthd opens it, and the pending queue read from it after
// follows every change.
TEST(StoreSchemaTest, ADatabaseFromBeforeChangeSeqGetsItOnOpen) {
  std::string why;
  const tests::PgSchema pg = tests::FreshPgSchema(why);
  if (pg.conninfo.empty()) GTEST_SKIP() << why;
  const auto where = StoreLocation::Postgres(pg.conninfo);
  std::int64_t old_job = 0;
  {
    auto store = SqliteStore::Open(where, 1000);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    auto id = (*store)->CreateJob(OneGpu("old"), 1100, "alice");
    ASSERT_TRUE(id.has_value()) << id.error().message;
    old_job = *id;
  }
  auto db = Database::Connect(pg.conninfo);
  ASSERT_TRUE(db.has_value()) << db.error().message;
  ASSERT_TRUE(db->Exec("DROP TRIGGER jobs_change_seq ON jobs; "
                       "ALTER TABLE jobs DROP COLUMN change_seq; DROP SEQUENCE jobs_change_seq")
                  .has_value());

  auto store = SqliteStore::Open(where, 2000);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  auto marked = db->Prepare("SELECT change_seq FROM jobs WHERE id = $1");
  ASSERT_TRUE(marked.has_value()) << marked.error().message;
  marked->Bind(1, old_job);
  auto row = marked->Step();
  ASSERT_TRUE(row.has_value()) << row.error().message;
  ASSERT_TRUE(*row);
  EXPECT_GT(marked->Int(0), 0);
  marked->Reset();

  EXPECT_EQ(PendingIds(**store), std::vector<std::int64_t>{old_job});
  auto added = (*store)->CreateJob(OneGpu("new"), 2100, "alice");
  ASSERT_TRUE(added.has_value()) << added.error().message;
  EXPECT_EQ(PendingIds(**store), (std::vector<std::int64_t>{old_job, *added}));
  ASSERT_TRUE(control::CancelJob(**store, old_job, "alice", 2200).has_value());
  EXPECT_EQ(PendingIds(**store), std::vector<std::int64_t>{*added});
}

// A change_seq taken by a transaction still open can commit below one
// already read. The leader's own transactions are never open across its
// reads of the queue, and its fence refuses every other writer's; a store
// that is not the only writer (the fault trials' fence.off) reads the queue
// whole each time instead, and sees such a change once it commits.
TEST(StoreSchemaTest, AStoreThatIsNotTheOnlyWriterSeesAChangeCommittedOutOfOrder) {
  std::string why;
  const tests::PgSchema pg = tests::FreshPgSchema(why);
  if (pg.conninfo.empty()) GTEST_SKIP() << why;
  auto shared_where = StoreLocation::Postgres(pg.conninfo);
  shared_where.sole_writer = false;
  auto reader = SqliteStore::Open(shared_where, 1000);
  ASSERT_TRUE(reader.has_value()) << reader.error().message;
  auto writer = SqliteStore::Open(StoreLocation::Postgres(pg.conninfo), 1000);
  ASSERT_TRUE(writer.has_value()) << writer.error().message;
  auto first = (*writer)->CreateJob(OneGpu("a"), 1100, "alice");
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(PendingIds(**reader), std::vector<std::int64_t>{*first});

  // Another session ends job a in a transaction left open while the writer
  // commits a newer job, whose change_seq is higher.
  auto other = Database::Connect(pg.conninfo);
  ASSERT_TRUE(other.has_value()) << other.error().message;
  ASSERT_TRUE(other->Exec("BEGIN").has_value());
  ASSERT_TRUE(other->Exec(fmt::format("UPDATE jobs SET state = 'Cancelled' WHERE id = {}", *first))
                  .has_value());
  // (bob's: alice's pending count is locked by that transaction.)
  auto second = (*writer)->CreateJob(OneGpu("b"), 1200, "bob");
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(PendingIds(**reader), (std::vector<std::int64_t>{*first, *second}));
  ASSERT_TRUE(other->Exec("COMMIT").has_value());
  EXPECT_EQ(PendingIds(**reader), std::vector<std::int64_t>{*second});
}

}  // namespace
}  // namespace berth::store
