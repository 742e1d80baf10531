// The store's schema is written for SQLite and turned into PostgreSQL's by
// SchemaFor (sqlite_db.h): this checks that the two databases the store
// makes hold the same tables with the same columns, so a column one dialect
// gets and the other does not (a migration's ALTER, a table made in one
// branch) fails here, not in production. It also checks that a store reads the
// pending queue whole when another process may write jobs beside it.
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

// Between passes the leader reads again only the jobs its own statements
// wrote: its fence refuses every other process's writes. A store that is
// not the only writer (the fault trials' fence.off) reads the queue whole
// each time, so it sees what another process submitted and cancelled; the
// only writer sees its own changes.
TEST(StoreSchemaTest, AStoreThatIsNotTheOnlyWriterSeesAnotherWritersChanges) {
  std::string why;
  const tests::PgSchema pg = tests::FreshPgSchema(why);
  if (pg.conninfo.empty()) GTEST_SKIP() << why;
  auto shared_where = StoreLocation::Postgres(pg.conninfo);
  shared_where.sole_writer = false;
  auto reader = SqliteStore::Open(shared_where, 1000);
  ASSERT_TRUE(reader.has_value()) << reader.error().message;
  auto writer = SqliteStore::Open(StoreLocation::Postgres(pg.conninfo), 1000);
  ASSERT_TRUE(writer.has_value()) << writer.error().message;
  EXPECT_TRUE(PendingIds(**reader).empty());
  EXPECT_TRUE(PendingIds(**writer).empty());

  auto first = (*writer)->CreateJob(OneGpu("a"), 1100, "alice");
  ASSERT_TRUE(first.has_value()) << first.error().message;
  auto second = (*writer)->CreateJob(OneGpu("b"), 1200, "alice");
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(PendingIds(**reader), (std::vector<std::int64_t>{*first, *second}));
  EXPECT_EQ(PendingIds(**writer), (std::vector<std::int64_t>{*first, *second}));
  ASSERT_TRUE(control::CancelJob(**writer, *first, "alice", 1300).has_value());
  EXPECT_EQ(PendingIds(**reader), std::vector<std::int64_t>{*second});
  EXPECT_EQ(PendingIds(**writer), std::vector<std::int64_t>{*second});
}

}  // namespace
}  // namespace berth::store
