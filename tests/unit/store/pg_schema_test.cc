// The store's schema is written for SQLite and turned into PostgreSQL's by
// SchemaFor (sqlite_db.h): this checks that the two databases the store
// makes hold the same tables with the same columns, so a column one dialect
// gets and the other does not (a migration's ALTER, a table made in one
// branch) fails here, not in production.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <utility>

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

}  // namespace
}  // namespace berth::store
