#include "store/migrate.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <memory>
#include <set>

#include "store/audit_log.h"
#include "store/identity_store.h"
#include "store/meter_store.h"
#include "store/pg_db.h"
#include "store/sqlite_store.h"
#include "store/traffic_store.h"

namespace berth::store {
namespace {

// Counted again by the next berthd that opens the database (FinishMigration).
const std::set<std::string, std::less<>> kDerived = {"pending_counts"};

// Opens every store on `where` once, as berthd does: each makes (or
// brings up to date) its tables there.
Status MakeSchema(const StoreLocation& where, TimeMs now, const TelemetryOptions& telemetry) {
  auto jobs = SqliteStore::Open(where, now);
  if (!jobs) return std::unexpected(jobs.error());
  auto audit = AuditLog::Open(where);
  if (!audit) return std::unexpected(audit.error());
  auto meter = MeterStore::Open(where);
  if (!meter) return std::unexpected(meter.error());
  auto identities = IdentityStore::Open(where);
  if (!identities) return std::unexpected(identities.error());
  auto samples = TelemetryStore::Open(where, telemetry);
  if (!samples) return std::unexpected(samples.error());
  auto traffic = ServiceTrafficStore::Open(where, telemetry.hour_retention_ms);
  if (!traffic) return std::unexpected(traffic.error());
  return Ok();
}

Result<std::int64_t> PgCount(PgConnection& pg, const std::string& sql) {
  auto st = pg.Prepare(sql);
  auto row = st.Step();
  if (!row) return std::unexpected(row.error());
  return *row ? st.Int(0) : 0;
}

// The target must be fresh: no jobs, no audit records, never led.
Status CheckTargetIsFresh(PgConnection& pg) {
  for (const char* table : {"jobs", "audit_log", "runs"}) {
    auto n = PgCount(pg, fmt::format("SELECT count(*) FROM {}", table));
    if (!n) return std::unexpected(n.error());
    if (*n > 0) {
      return InvalidField("to", fmt::format("the target database already holds {} row(s) of {}: "
                                            "migrate into a fresh database (createdb) only",
                                            *n, table));
    }
  }
  auto lease = PgCount(pg,
                       "SELECT count(*) FROM information_schema.tables WHERE table_schema = "
                       "current_schema() AND table_name = 'leader_lease'");
  if (!lease) return std::unexpected(lease.error());
  if (*lease > 0) {
    auto held = PgCount(pg, "SELECT count(*) FROM leader_lease WHERE holder <> ''");
    if (!held) return std::unexpected(held.error());
    if (*held > 0) {
      return InvalidField("to",
                          "a berthd has already led the target database: migrate into a fresh "
                          "database (createdb) only");
    }
  }
  return Ok();
}

Result<std::vector<std::string>> SqliteNames(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return Fail(Code::kInternal, fmt::format("migrate: {}", sqlite3_errmsg(db)));
  }
  std::vector<std::string> out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));  // NOLINT
  }
  sqlite3_finalize(st);
  return out;
}

// Copies `table`'s rows (every column the source has) into PostgreSQL.
Result<std::int64_t> CopyTable(sqlite3* src, PgConnection& pg, const std::string& table) {
  auto columns = SqliteNames(src, fmt::format("SELECT name FROM pragma_table_info('{}')", table));
  if (!columns) return std::unexpected(columns.error());
  auto have = PgCount(pg, fmt::format("SELECT count(*) FROM information_schema.tables WHERE "
                                      "table_schema = current_schema() AND table_name = '{}'",
                                      table));
  if (!have) return std::unexpected(have.error());
  if (*have == 0) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("migrate: the target has no table {}: run the same berthd version "
                            "on both sides",
                            table));
  }
  std::string names;
  std::string params;
  for (std::size_t i = 0; i < columns->size(); ++i) {
    names += (i == 0 ? "" : ", ") + (*columns)[i];
    params += fmt::format("{}${}", i == 0 ? "" : ", ", i + 1);
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(src, fmt::format("SELECT {} FROM {}", names, table).c_str(), -1, &st,
                         nullptr) != SQLITE_OK) {
    return Fail(Code::kInternal, fmt::format("migrate: {}: {}", table, sqlite3_errmsg(src)));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(st, sqlite3_finalize);
  PgStatement insert =
      pg.Prepare(fmt::format("INSERT INTO {} ({}) VALUES ({})", table, names, params));
  std::int64_t rows = 0;
  for (;;) {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      return Fail(Code::kInternal, fmt::format("migrate: {}: {}", table, sqlite3_errmsg(src)));
    }
    insert.Reset();
    for (int c = 0; c < static_cast<int>(columns->size()); ++c) {
      switch (sqlite3_column_type(st, c)) {
        case SQLITE_NULL:
          insert.BindNull(c + 1);
          break;
        case SQLITE_INTEGER:
          insert.Bind(c + 1, static_cast<std::int64_t>(sqlite3_column_int64(st, c)));
          break;
        default:
          insert.Bind(
              c + 1,
              std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(st, c)),  // NOLINT
                               static_cast<std::size_t>(sqlite3_column_bytes(st, c))));
      }
    }
    BERTH_RETURN_IF_ERROR(insert.Run());
    ++rows;
  }
  // An identity column goes on after the highest id copied.
  for (const std::string& column : *columns) {
    auto identity = PgCount(
        pg, fmt::format("SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                        "current_schema() AND table_name = '{}' AND column_name = '{}' AND "
                        "is_identity = 'YES'",
                        table, column));
    if (!identity) return std::unexpected(identity.error());
    if (*identity == 0) continue;
    BERTH_RETURN_IF_ERROR(pg.Exec(fmt::format(
        "SELECT setval(pg_get_serial_sequence('{0}', '{1}'), "
        "GREATEST((SELECT MAX({1}) FROM {0}), 1), (SELECT MAX({1}) FROM {0}) IS NOT NULL)",
        table, column)));
  }
  return rows;
}

// `tables` ordered so that every table comes after the tables its foreign
// keys refer to (PostgreSQL's catalog says which); a cycle keeps the rest in
// the order given.
Result<std::vector<std::string>> ParentsFirst(PgConnection& pg, std::vector<std::string> tables) {
  auto st = pg.Prepare(
      "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
      "WHERE contype = 'f' AND connamespace = current_schema()::regnamespace");
  std::vector<std::pair<std::string, std::string>> refs;  // child, parent
  for (;;) {
    auto row = st.Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    if (st.Text(0) != st.Text(1)) refs.emplace_back(st.Text(0), st.Text(1));
  }
  std::vector<std::string> out;
  while (!tables.empty()) {
    auto ready = std::ranges::find_if(tables, [&](const std::string& t) {
      return std::ranges::none_of(refs, [&](const auto& r) {
        return r.first == t && std::ranges::find(tables, r.second) != tables.end();
      });
    });
    if (ready == tables.end()) ready = tables.begin();
    out.push_back(*ready);
    tables.erase(ready);
  }
  return out;
}

}  // namespace

Result<MigrationReport> MigrateSqliteToPostgres(const std::filesystem::path& data_dir,
                                                const StoreLocation& to, TimeMs now,
                                                const TelemetryOptions& telemetry) {
  if (!to.postgres()) {
    return InvalidField("to", "migrate moves the state into PostgreSQL: give postgresql://...");
  }
  const std::filesystem::path file = data_dir / "berth.db";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    return InvalidField(
        "from", fmt::format("{} holds no berth.db: name berthd's --data-dir", data_dir.string()));
  }
  // Both sides at this berthd's schema (the source as its next start would
  // bring it; a newer source is refused here).
  BERTH_RETURN_IF_ERROR(MakeSchema(StoreLocation(data_dir), now, telemetry));
  auto pg = PgConnection::Open(to.conninfo);
  if (!pg) return std::unexpected(pg.error());
  {
    auto has_jobs = PgCount(*pg,
                            "SELECT count(*) FROM information_schema.tables WHERE table_schema = "
                            "current_schema() AND table_name = 'jobs'");
    if (!has_jobs) return std::unexpected(has_jobs.error());
    if (*has_jobs > 0) BERTH_RETURN_IF_ERROR(CheckTargetIsFresh(*pg));
  }
  BERTH_RETURN_IF_ERROR(MakeSchema(to, now, telemetry));

  sqlite3* raw = nullptr;
  if (sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    const std::string why = raw != nullptr ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return Fail(Code::kUnavailable, fmt::format("migrate: cannot open {}: {}", file.string(), why));
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> src(raw, sqlite3_close);
  sqlite3_busy_timeout(raw, 5000);
  // The write lock for the whole copy: a berthd still running on the source
  // cannot commit meanwhile (it waits, or fails its writes).
  if (sqlite3_exec(raw, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Fail(Code::kUnavailable, fmt::format("migrate: {} is busy: stop berthd on it first ({})",
                                                file.string(), sqlite3_errmsg(raw)));
  }
  auto names = SqliteNames(raw,
                           "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                           "LIKE 'sqlite_%' ORDER BY name");
  if (!names) return std::unexpected(names.error());
  std::erase_if(*names, [](const std::string& t) { return kDerived.contains(t); });
  auto tables = ParentsFirst(*pg, std::move(*names));
  if (!tables) return std::unexpected(tables.error());

  MigrationReport report;
  PgTransaction tx(*pg);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  BERTH_RETURN_IF_ERROR(CheckTargetIsFresh(*pg));
  // What opening the stores put there (the first policy, a schema version)
  // gives way to the source's rows: children first.
  for (auto it = tables->rbegin(); it != tables->rend(); ++it) {
    auto have = PgCount(*pg, fmt::format("SELECT count(*) FROM information_schema.tables WHERE "
                                         "table_schema = current_schema() AND table_name = '{}'",
                                         *it));
    if (!have) return std::unexpected(have.error());
    if (*have > 0) BERTH_RETURN_IF_ERROR(pg->Exec(fmt::format("DELETE FROM {}", *it)));
  }
  for (const std::string& table : *tables) {
    auto rows = CopyTable(raw, *pg, table);
    if (!rows) return std::unexpected(rows.error());
    report.tables.emplace_back(table, *rows);
    report.rows += *rows;
  }
  BERTH_RETURN_IF_ERROR(pg->Exec("DELETE FROM pending_counts"));
  BERTH_RETURN_IF_ERROR(tx.Commit());
  sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
  // Counts the pending jobs again, as every open does.
  BERTH_RETURN_IF_ERROR(MakeSchema(to, now, telemetry));
  return report;
}

}  // namespace berth::store
