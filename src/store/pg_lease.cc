#include "store/pg_lease.h"

#include <fmt/format.h>

#include <optional>

namespace berth::store {
namespace {

// Serializes EnsureLeaseTable between processes: two concurrent CREATE
// TABLE IF NOT EXISTS can both miss the table and one then fails.
constexpr std::int64_t kLeaseDdlLock = 0x6265727468;  // "berth"

constexpr std::string_view kLeaseColumns = "holder, term, expires_at_ms";

LeaseState LeaseFromRow(const PgStatement& st) {
  return LeaseState{st.Text(0), st.Int(1), st.Int(2)};
}

std::string DeposedMessage(std::int64_t term, const LeaseState& lease) {
  return fmt::format("deposed: term {}, lease now held by {} at term {}", term,
                     lease.holder.empty() ? "nobody" : lease.holder, lease.term);
}

Status CheckLeaseArgs(std::string_view holder, std::chrono::milliseconds ttl) {
  if (holder.empty()) return InvalidField("holder", "a lease holder needs a name");
  if (ttl.count() <= 0) {
    return InvalidField("ttl",
                        fmt::format("a lease lasts a positive time, not {} ms", ttl.count()));
  }
  return Ok();
}

// The lease row after an UPDATE ... RETURNING, if it changed one.
Result<std::optional<LeaseState>> UpdatedLease(PgStatement& st) {
  auto row = st.Step();
  if (!row) return std::unexpected(std::move(row.error()));
  if (!*row) return std::nullopt;
  return LeaseFromRow(st);
}

}  // namespace

Status EnsureLeaseTable(PgConnection& conn) {
  PgTransaction tx(conn);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  BERTH_RETURN_IF_ERROR(conn.Exec(fmt::format("SELECT pg_advisory_xact_lock({})", kLeaseDdlLock)));
  // One row, id 1. holder is '' until the first acquisition; term only
  // grows; expires_at_ms is the holder's clock (milliseconds since the Unix
  // epoch) plus its time to live.
  BERTH_RETURN_IF_ERROR(
      conn.Exec("CREATE TABLE IF NOT EXISTS leader_lease ("
                " id INTEGER PRIMARY KEY CHECK (id = 1),"
                " holder TEXT NOT NULL DEFAULT '',"
                " term BIGINT NOT NULL CHECK (term >= 0),"
                " expires_at_ms BIGINT NOT NULL);"
                "INSERT INTO leader_lease (id, holder, term, expires_at_ms) VALUES (1, '', 0, 0)"
                " ON CONFLICT (id) DO NOTHING;"
                // A key column (a unique index): a takeover's new term is a
                // key update, which waits for the fence's KEY SHARE locks
                // and fails the REPEATABLE READ transactions that predate
                // it, while a renewal (expires_at_ms only) waits for none.
                "CREATE UNIQUE INDEX IF NOT EXISTS leader_lease_term ON leader_lease (term)"));
  return tx.Commit();
}

Result<LeaseState> ReadLease(PgConnection& conn) {
  auto st = conn.Prepare(fmt::format("SELECT {} FROM leader_lease WHERE id = 1", kLeaseColumns));
  auto row = st.Step();
  if (!row) return std::unexpected(std::move(row.error()));
  if (!*row) {
    return Fail(Code::kFailedPrecondition,
                "store: the leader_lease table has no row (EnsureLeaseTable makes it)");
  }
  return LeaseFromRow(st);
}

Result<LeaseAttempt> TryAcquireLease(PgConnection& conn, std::string_view holder, TimeMs now_ms,
                                     std::chrono::milliseconds ttl) {
  BERTH_RETURN_IF_ERROR(CheckLeaseArgs(holder, ttl));
  // One statement: of two contenders the second waits for the first's row
  // lock, then finds the lease taken and changes nothing.
  auto st = conn.Prepare(
      fmt::format("UPDATE leader_lease SET holder = $1, term = term + 1, expires_at_ms = $2"
                  " WHERE id = 1 AND (holder = '' OR expires_at_ms <= $3) RETURNING {}",
                  kLeaseColumns));
  st.Bind(1, holder).Bind(2, now_ms + ttl.count()).Bind(3, now_ms);
  auto taken = UpdatedLease(st);
  if (!taken) return std::unexpected(std::move(taken.error()));
  if (*taken) return LeaseAttempt{true, std::move(**taken)};
  auto lease = ReadLease(conn);
  if (!lease) return std::unexpected(std::move(lease.error()));
  return LeaseAttempt{false, std::move(*lease)};
}

Result<LeaseState> RenewLease(PgConnection& conn, std::string_view holder, std::int64_t term,
                              TimeMs now_ms, std::chrono::milliseconds ttl) {
  BERTH_RETURN_IF_ERROR(CheckLeaseArgs(holder, ttl));
  auto st = conn.Prepare(
      fmt::format("UPDATE leader_lease SET expires_at_ms = $4"
                  " WHERE id = 1 AND holder = $1 AND term = $2 AND expires_at_ms > $3 RETURNING {}",
                  kLeaseColumns));
  st.Bind(1, holder).Bind(2, term).Bind(3, now_ms).Bind(4, now_ms + ttl.count());
  auto renewed = UpdatedLease(st);
  if (!renewed) return std::unexpected(std::move(renewed.error()));
  if (*renewed) return std::move(**renewed);
  auto lease = ReadLease(conn);
  if (!lease) return std::unexpected(std::move(lease.error()));
  if (lease->term != term || lease->holder != holder) {
    return Fail(Code::kFailedPrecondition, DeposedMessage(term, *lease));
  }
  return Fail(Code::kFailedPrecondition,
              fmt::format("lease of {} at term {} lapsed at {} ms (now {} ms): acquire it again",
                          holder, term, lease->expires_at_ms, now_ms));
}

Status ReleaseLease(PgConnection& conn, std::string_view holder, std::int64_t term) {
  auto st = conn.Prepare(
      "UPDATE leader_lease SET expires_at_ms = 0 WHERE id = 1 AND holder = $1 AND term = $2");
  st.Bind(1, holder).Bind(2, term);
  return st.Run();
}

Status CheckFence(PgTransaction& tx, std::int64_t term) {
  PgConnection& conn = tx.connection();
  // Outside a transaction the share lock would end with the statement and
  // fence nothing.
  if (!conn.in_transaction()) {
    return Fail(Code::kInternal, "store: the lease fence runs inside a write transaction");
  }
  auto st = conn.Prepare(
      fmt::format("SELECT {} FROM leader_lease WHERE id = 1 FOR KEY SHARE", kLeaseColumns));
  auto row = st.Step();
  if (!row) return std::unexpected(std::move(row.error()));
  if (!*row) {
    return Fail(Code::kFailedPrecondition,
                "store: the leader_lease table has no row (EnsureLeaseTable makes it)");
  }
  const LeaseState lease = LeaseFromRow(st);
  if (lease.term != term) return Fail(Code::kFailedPrecondition, DeposedMessage(term, lease));
  return Ok();
}

Status InstallWriteFence(PgConnection& conn) {
  BERTH_RETURN_IF_ERROR(EnsureLeaseTable(conn));
  PgTransaction tx(conn);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  BERTH_RETURN_IF_ERROR(conn.Exec(fmt::format("SELECT pg_advisory_xact_lock({})", kLeaseDdlLock)));
  // The key-share lock holds until the writing transaction ends, so a
  // takeover (a new term: a key update of the row) waits for it, and every
  // statement after the takeover reads the new term: a deposed leader
  // commits nothing. The leader's renewals change no key and wait for none.
  BERTH_RETURN_IF_ERROR(conn.Exec(R"sql(
CREATE OR REPLACE FUNCTION berth_write_fence() RETURNS trigger LANGUAGE plpgsql AS $fence$
DECLARE
  lease_holder TEXT;
  lease_term BIGINT;
  session_term TEXT := coalesce(nullif(current_setting('berth.term', true), ''), 'none');
BEGIN
  SELECT holder, term INTO lease_holder, lease_term FROM leader_lease WHERE id = 1 FOR KEY SHARE;
  IF lease_holder IS NULL OR lease_holder = '' THEN
    RETURN NULL;
  END IF;
  IF session_term <> lease_term::text THEN
    RAISE EXCEPTION 'deposed: this session writes for term %, the lease is at term %, held by %',
      session_term, lease_term, lease_holder
      USING ERRCODE = 'BF001';
  END IF;
  RETURN NULL;
END
$fence$)sql"));
  BERTH_RETURN_IF_ERROR(conn.Exec(R"sql(
DO $install$
DECLARE
  t TEXT;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables
           WHERE schemaname = current_schema() AND tablename <> 'leader_lease' LOOP
    EXECUTE format('CREATE OR REPLACE TRIGGER berth_write_fence'
                   ' BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I'
                   ' FOR EACH STATEMENT EXECUTE FUNCTION berth_write_fence()', t);
  END LOOP;
END
$install$)sql"));
  return tx.Commit();
}

Status WriteForTerm(PgConnection& conn, std::int64_t term) {
  if (term <= 0) return InvalidField("term", fmt::format("a term is positive, not {}", term));
  return conn.Exec(fmt::format("SELECT set_config('berth.term', '{}', false)", term));
}

Status RunFencedTransaction(PgConnection& conn, std::int64_t term, const TxOptions& options,
                            const std::function<Status(PgTransaction&)>& body, int* attempts) {
  return RunTransaction(
      conn, options,
      [&](PgTransaction& tx) -> Status {
        BERTH_RETURN_IF_ERROR(CheckFence(tx, term));
        return body(tx);
      },
      attempts);
}

}  // namespace berth::store
