// The leadership lease with fencing that Berth's high availability (issue
// 20) builds on: several berthd share one PostgreSQL database and one of
// them is active. The lease is one row, leader_lease(id = 1, holder, term,
// expires_at_ms):
//
//  - TryAcquireLease takes it when it is free or has lapsed, and bumps the
//    term: every leadership has its own term, higher than all before it.
//  - RenewLease extends it, only for the holder and term that hold it now
//    and only before it lapses; a leader that cannot renew steps down.
//  - CheckFence, run inside a write transaction, key-share-locks the row
//    and refuses the transaction when the term moved on. `term` is a key
//    column (it has a unique index), so a takeover's UPDATE is a key update:
//    it waits for every fenced transaction in flight to end, and every
//    fenced transaction after it sees the new term (one at REPEATABLE READ
//    or SERIALIZABLE whose snapshot predates it fails with 40001). A deposed
//    leader that wakes up (a pause, a partition) therefore cannot commit
//    anything, by construction, whatever its clock or its belief says.
//
// A renewal changes expires_at_ms only, no key: it takes no lock that
// conflicts with the fence's, so a long write transaction of the leader (a
// 10,000-job array takes seconds) never holds its own renewal back. With a
// plain share lock it did, and such a submission made the leader step down.
// Release changes no key either.
//
// Time is injected: callers pass `now_ms` from their Clock; nothing here
// reads a clock. Expiry compares one contender's clock with the time another
// one wrote, so clocks that disagree by more than a lease's margin can end a
// lease early or late; the fence keeps that from ever letting two leaders
// commit, it only costs a needless takeover.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "store/pg_db.h"

namespace berth::store {

// The lease row as it stands.
struct LeaseState {
  std::string holder;  // empty: never held
  std::int64_t term = 0;
  TimeMs expires_at_ms = 0;

  // Free or lapsed at `now_ms`: anyone may take it.
  bool TakeableAt(TimeMs now_ms) const { return holder.empty() || expires_at_ms <= now_ms; }
  friend bool operator==(const LeaseState&, const LeaseState&) = default;
};

// What TryAcquireLease found: whether the caller took the lease (then
// `lease` is its new term) or who holds it.
struct LeaseAttempt {
  bool acquired = false;
  LeaseState lease;
};

// Creates the lease table and its one row (never held, term 0) unless they
// exist. Safe to run from several processes at once.
[[nodiscard]] Status EnsureLeaseTable(PgConnection& conn);

// Reads the lease row.
[[nodiscard]] Result<LeaseState> ReadLease(PgConnection& conn);

// Takes the lease for `holder` until now_ms + ttl when it is free or has
// lapsed (expires_at_ms <= now_ms), with term + 1. A lease that another
// holder, or this one, holds unexpired is not taken: acquired is false and
// `lease` says who holds it. One UPDATE: of two contenders, one wins.
[[nodiscard]] Result<LeaseAttempt> TryAcquireLease(PgConnection& conn, std::string_view holder,
                                                   TimeMs now_ms, std::chrono::milliseconds ttl);

// Extends the lease to now_ms + ttl while `holder` holds it at `term` and it
// has not lapsed. Else kFailedPrecondition: deposed (another term holds it)
// or lapsed (acquire it again, with a new term).
[[nodiscard]] Result<LeaseState> RenewLease(PgConnection& conn, std::string_view holder,
                                            std::int64_t term, TimeMs now_ms,
                                            std::chrono::milliseconds ttl);

// Gives the lease up at once (it lapses now) while `holder` holds it at
// `term`: a leader that shuts down cleanly spares its standbys the wait.
// Nothing happens when another term holds it.
[[nodiscard]] Status ReleaseLease(PgConnection& conn, std::string_view holder, std::int64_t term);

// The fence: run inside every write transaction of the leader of `term`,
// anywhere before its Commit (first is cheapest). Key-share-locks the lease row
// until the transaction ends and fails with kFailedPrecondition ("deposed:
// term N, lease now held by X at term M") when the lease's term is no
// longer `term`, so the caller's transaction rolls back. At REPEATABLE READ
// or SERIALIZABLE a takeover after the transaction's snapshot fails it
// with 40001 instead, and RunTransaction's next run meets the new term here.
[[nodiscard]] Status CheckFence(PgTransaction& tx, std::int64_t term);

// The fence in the database itself: a statement trigger on every table of
// the schema (but leader_lease) that key-share-locks the lease row, as
// CheckFence does, and refuses the statement (SQLSTATE BF001, read as
// kFailedPrecondition "deposed: ...") unless the session declared the
// lease's term with WriteForTerm. Every write is fenced this way, in a
// transaction or not, whichever store or connection makes it, without
// the stores' code knowing. It engages once a berthd has held the lease:
// a database no berthd ever led (one berthd on PostgreSQL, a test) is not
// fenced. Run again after migrations that add tables; safe from several
// processes at once.
[[nodiscard]] Status InstallWriteFence(PgConnection& conn);

// Declares that this session writes for the leader of `term` (a session
// setting, berth.term): the write fence lets its statements through while
// the lease is at `term`. A session that reconnects has lost it, and is
// refused: it fails closed.
[[nodiscard]] Status WriteForTerm(PgConnection& conn, std::int64_t term);

// Runs `body` as RunTransaction does, with CheckFence(term) first.
[[nodiscard]] Status RunFencedTransaction(PgConnection& conn, std::int64_t term,
                                          const TxOptions& options,
                                          const std::function<Status(PgTransaction&)>& body,
                                          int* attempts = nullptr);

}  // namespace berth::store
