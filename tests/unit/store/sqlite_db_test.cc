// The connection's statement cache: a statement handed back is reset and
// unbound, ends the read it held, follows schema changes, and the same SQL
// can be in use twice at once; the cache stays bounded.
#include "store/sqlite_db.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

namespace berth::store {
namespace {

class SqliteDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-db-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto db = Database::Open((dir_ / "t.db").string());
    ASSERT_TRUE(db.has_value()) << db.error().message;
    db_.emplace(std::move(*db));
    ASSERT_TRUE(db_->Exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)").has_value());
    for (int i = 1; i <= 5; ++i) {
      ASSERT_TRUE(db_->Exec(fmt::format("INSERT INTO t(id, v) VALUES({}, 'v{}')", i, i)));
    }
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::vector<std::int64_t> Ids(const std::string& sql) {
    std::vector<std::int64_t> out;
    auto st = db_->Prepare(sql);
    EXPECT_TRUE(st.has_value());
    if (!st) return out;
    for (;;) {
      auto row = st->Step();
      EXPECT_TRUE(row.has_value());
      if (!row || !*row) break;
      out.push_back(st->Int(0));
    }
    return out;
  }

  std::filesystem::path dir_;
  std::optional<Database> db_;
};

TEST_F(SqliteDbTest, AStatementHandedBackMidReadStartsOverAndUnbound) {
  const std::string sql = "SELECT id FROM t WHERE ?1 IS NULL OR id >= ?1 ORDER BY id";
  {
    auto st = db_->Prepare(sql);
    ASSERT_TRUE(st.has_value());
    st->Bind(1, std::int64_t{4});
    auto row = st->Step();
    ASSERT_TRUE(row.has_value() && *row);
    EXPECT_EQ(st->Int(0), 4);
  }  // handed back after one row of two, with a bind in place
  EXPECT_EQ(db_->cached_statements(), 1u);
  // The same text again: the cached statement, from its first row, unbound.
  EXPECT_EQ(Ids(sql), (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
}

TEST_F(SqliteDbTest, TheSameSqlCanBeInUseTwiceAtOnce) {
  const std::string sql = "SELECT id FROM t ORDER BY id";
  auto outer = db_->Prepare(sql);
  ASSERT_TRUE(outer.has_value());
  std::vector<std::pair<std::int64_t, std::size_t>> seen;
  for (;;) {
    auto row = outer->Step();
    ASSERT_TRUE(row.has_value());
    if (!*row) break;
    // A nested use of the same text gets a statement of its own.
    seen.emplace_back(outer->Int(0), Ids(sql).size());
  }
  ASSERT_EQ(seen.size(), 5u);
  for (const auto& [id, inner] : seen) EXPECT_EQ(inner, 5u) << "at outer row " << id;
}

TEST_F(SqliteDbTest, AHandedBackStatementHoldsNoReadOpen) {
  const std::string sql = "SELECT id FROM t ORDER BY id";
  {
    auto st = db_->Prepare(sql);
    ASSERT_TRUE(st.has_value());
    auto row = st->Step();  // opens a read snapshot
    ASSERT_TRUE(row.has_value() && *row);
  }
  // Another connection commits a row: had the cached statement kept its
  // snapshot open, this connection would not see it.
  auto other = Database::Open((dir_ / "t.db").string());
  ASSERT_TRUE(other.has_value());
  ASSERT_TRUE(other->Exec("INSERT INTO t(id, v) VALUES(6, 'v6')").has_value());
  EXPECT_EQ(Ids(sql).size(), 6u);
}

TEST_F(SqliteDbTest, ACachedStatementFollowsASchemaChange) {
  const std::string sql = "SELECT * FROM t WHERE id=1";
  {
    auto st = db_->Prepare(sql);
    ASSERT_TRUE(st.has_value());
    ASSERT_TRUE(st->Step().value_or(false));
  }
  ASSERT_TRUE(db_->Exec("ALTER TABLE t ADD COLUMN w TEXT DEFAULT 'new'").has_value());
  auto st = db_->Prepare(sql);
  ASSERT_TRUE(st.has_value());
  ASSERT_TRUE(st->Step().value_or(false));
  EXPECT_EQ(st->Text(2), "new");
}

TEST_F(SqliteDbTest, TheCacheIsBounded) {
  const std::size_t n = StatementCache::kMaxIdle + 40;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t expected = (i >= 1 && i <= 5) ? 4u : 5u;
    EXPECT_EQ(Ids(fmt::format("SELECT id FROM t WHERE id <> {}", i)).size(), expected);
  }
  EXPECT_EQ(db_->cached_statements(), StatementCache::kMaxIdle);
}

TEST(PgPlaceholdersTest, NumbersSqliteParametersAsPostgresDoes) {
  EXPECT_EQ(PgPlaceholders("SELECT a FROM t WHERE b=? AND c=?"),
            "SELECT a FROM t WHERE b=$1 AND c=$2");
  // ?N keeps its number; a bare ? after it is one past the largest so far.
  EXPECT_EQ(PgPlaceholders("WHERE (?1 = '' OR t = ?1) AND x < ?3 LIMIT ?"),
            "WHERE ($1 = '' OR t = $1) AND x < $3 LIMIT $4");
  EXPECT_EQ(PgPlaceholders("VALUES(?2, ?)"), "VALUES($2, $3)");
}

TEST(PgPlaceholdersTest, LeavesQuotedTextAndCommentsAlone) {
  EXPECT_EQ(PgPlaceholders("SELECT '?', \"a?b\", ? -- why?\nFROM t WHERE x=?"),
            "SELECT '?', \"a?b\", $1 -- why?\nFROM t WHERE x=$2");
  // A doubled quote inside a literal is still inside it.
  EXPECT_EQ(PgPlaceholders("SELECT 'it''s ?' || ?"), "SELECT 'it''s ?' || $1");
  // An unterminated literal keeps the rest as it is.
  EXPECT_EQ(PgPlaceholders("SELECT ? || 'open ?"), "SELECT $1 || 'open ?");
}

TEST(StoreLocationTest, TheStoreFlagNamesSqliteOrPostgres) {
  auto none = ParseStoreLocation("", "/var/lib/berth");
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->postgres());
  EXPECT_EQ(none->data_dir, "/var/lib/berth");
  EXPECT_EQ(none->audit_head(), "/var/lib/berth/audit.head");

  auto dir = ParseStoreLocation("sqlite:/srv/state", "/var/lib/berth");
  ASSERT_TRUE(dir.has_value());
  EXPECT_EQ(dir->data_dir, "/srv/state");

  for (std::string_view pg : {"postgresql://berth@db.example:5432/berth?sslmode=verify-full",
                              "postgres:///berth", "host=db port=5432 dbname=berth user=berth"}) {
    auto where = ParseStoreLocation(pg, "/var/lib/berth");
    ASSERT_TRUE(where.has_value()) << pg << ": " << where.error().message;
    EXPECT_TRUE(where->postgres());
    EXPECT_EQ(where->conninfo, pg);
    EXPECT_TRUE(where->audit_head().empty()) << "the database keeps the head";
  }
}

TEST(StoreLocationTest, APasswordOnTheCommandLineOrNoStoreIsRefusedNamingTheFlag) {
  for (std::string_view bad : {"postgresql://berth:s3cret@db/berth",
                               "postgresql://db/berth?sslmode=require&password=s3cret",
                               "host=db password=s3cret dbname=berth", "host=db password =x"}) {
    auto where = ParseStoreLocation(bad, "/var/lib/berth");
    ASSERT_FALSE(where.has_value()) << bad;
    EXPECT_EQ(where.error().field, "store");
    EXPECT_NE(where.error().message.find("pgpass"), std::string::npos) << where.error().message;
    EXPECT_EQ(where.error().message.find("s3cret"), std::string::npos) << "the password is echoed";
  }
  for (std::string_view bad : {"mysql://db/berth", "/var/lib/berth", "sqlite:"}) {
    auto where = ParseStoreLocation(bad, "/var/lib/berth");
    ASSERT_FALSE(where.has_value()) << bad;
    EXPECT_EQ(where.error().field, "store");
  }
  // A user name alone is no password; passfile= names where one is.
  EXPECT_TRUE(ParseStoreLocation("postgresql://berth@db/berth", "/d").has_value());
  EXPECT_TRUE(ParseStoreLocation("host=db passfile=/etc/berth/pgpass", "/d").has_value());
}

}  // namespace
}  // namespace berth::store
