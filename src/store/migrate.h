// `berthd migrate --from sqlite:DIR --to postgresql://...` (issue 20):
// moves an installation's whole state from SQLite to PostgreSQL.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "store/sqlite_db.h"
#include "store/telemetry_store.h"

namespace berth::store {

struct MigrationReport {
  // Rows copied, table by table, in the order copied.
  std::vector<std::pair<std::string, std::int64_t>> tables;
  std::int64_t rows = 0;
};

// Copies every table of `<data_dir>/berth.db` into the PostgreSQL database
// `to` in one transaction, after making Berth's schema there (every store
// opened once, as berthd would). The source is held under SQLite's write
// lock for the copy, so no berthd writes it meanwhile; stop berthd first.
//
// Refused, changing nothing: a source with no berth.db, a source newer
// than this berthd, a target that already holds jobs, audit records or a
// leadership lease (migrate into a fresh database only), or a table the
// target lacks. Derived tables (pending counts) are not copied: the next
// berthd that opens the database counts them again. Identity columns go on
// after the highest id copied.
Result<MigrationReport> MigrateSqliteToPostgres(const std::filesystem::path& data_dir,
                                                const StoreLocation& to, TimeMs now,
                                                const TelemetryOptions& telemetry);

}  // namespace berth::store
