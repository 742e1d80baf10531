// The leadership lease with fencing (store/pg_lease.h) against a real
// server, two berthd played by two connections and an injected clock: the
// lease is taken when free or lapsed with a higher term, renewed only by its
// holder and term, taken over once it lapses; and a deposed leader's write
// transaction is refused by the fence while the new leader's commits, also
// when the takeover happens while the old leader's transaction is open.
#include "store/pg_lease.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "support/pg_fixture.h"

namespace berth::store {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr TimeMs kT0 = 1'700'000'000'000;
constexpr std::chrono::milliseconds kTtl = 10s;

class PgLeaseTest : public tests::PgServerTest {
 protected:
  void SetUp() override {
    PgServerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    a_.emplace(Connect());
    b_.emplace(Connect());
    ASSERT_TRUE(EnsureLeaseTable(*a_));
    ASSERT_TRUE(EnsureLeaseTable(*b_));  // a second time changes nothing
    // What a leader writes: which leader placed a job, at which term.
    ASSERT_TRUE(a_->Exec(
        "CREATE TABLE placements(job TEXT PRIMARY KEY, leader TEXT NOT NULL, term BIGINT)"));
  }

  // Takes the lease for `holder` at `now`, expecting to get it.
  std::int64_t Acquire(PgConnection& conn, const std::string& holder, TimeMs now) {
    auto got = TryAcquireLease(conn, holder, now, kTtl);
    EXPECT_TRUE(got.has_value()) << got.error().message;
    if (!got) return -1;
    EXPECT_TRUE(got->acquired) << holder << " did not get the lease, held by " << got->lease.holder
                               << " at term " << got->lease.term;
    return got->lease.term;
  }

  static Status InsertPlacement(PgConnection& conn, const std::string& job,
                                const std::string& leader, std::int64_t term) {
    auto st = conn.Prepare("INSERT INTO placements(job, leader, term) VALUES ($1, $2, $3)");
    return st.Bind(1, job).Bind(2, leader).Bind(3, term).Run();
  }

  // A leader's write: one placement in a fenced transaction.
  static Status Place(PgConnection& conn, const std::string& job, const std::string& leader,
                      std::int64_t term) {
    return RunFencedTransaction(conn, term, TxOptions{}, [&](PgTransaction& tx) {
      return InsertPlacement(tx.connection(), job, leader, term);
    });
  }

  // The leader that placed `job`, or "" when no one did.
  std::string PlacedBy(const std::string& job) {
    auto st = b_->Prepare("SELECT leader FROM placements WHERE job = $1");
    st.Bind(1, job);
    auto row = st.Step();
    EXPECT_TRUE(row.has_value()) << row.error().message;
    return row && *row ? st.Text(0) : "";
  }

  std::optional<PgConnection> a_;
  std::optional<PgConnection> b_;
};

TEST_F(PgLeaseTest, TheFirstAcquisitionTakesTermOneAndHoldsOthersOffUntilItLapses) {
  auto before = ReadLease(*a_);
  ASSERT_TRUE(before.has_value()) << before.error().message;
  EXPECT_EQ(*before, (LeaseState{"", 0, 0}));

  auto got = TryAcquireLease(*a_, "berthd-a", kT0, kTtl);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_TRUE(got->acquired);
  EXPECT_EQ(got->lease, (LeaseState{"berthd-a", 1, kT0 + 10'000}));

  for (TimeMs now : {kT0 + 1, kT0 + 9'999}) {
    auto refused = TryAcquireLease(*b_, "berthd-b", now, kTtl);
    ASSERT_TRUE(refused.has_value()) << refused.error().message;
    EXPECT_FALSE(refused->acquired) << "at " << now;
    EXPECT_EQ(refused->lease, (LeaseState{"berthd-a", 1, kT0 + 10'000}));
  }
  // The holder itself renews; acquiring again is not renewing.
  auto again = TryAcquireLease(*a_, "berthd-a", kT0 + 1'000, kTtl);
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->acquired);
  EXPECT_EQ(again->lease.term, 1);
}

TEST_F(PgLeaseTest, ARenewalExtendsTheLeaseOnlyForItsHolderAndTerm) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  auto renewed = RenewLease(*a_, "berthd-a", 1, kT0 + 5'000, kTtl);
  ASSERT_TRUE(renewed.has_value()) << renewed.error().message;
  EXPECT_EQ(renewed->expires_at_ms, kT0 + 15'000);
  // Past the first expiry, the renewed lease still holds b off.
  auto refused = TryAcquireLease(*b_, "berthd-b", kT0 + 12'000, kTtl);
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->acquired);

  auto wrong_holder = RenewLease(*b_, "berthd-b", 1, kT0 + 6'000, kTtl);
  ASSERT_FALSE(wrong_holder.has_value());
  EXPECT_EQ(wrong_holder.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(wrong_holder.error().message, "deposed: term 1, lease now held by berthd-a at term 1");
  auto wrong_term = RenewLease(*a_, "berthd-a", 2, kT0 + 6'000, kTtl);
  ASSERT_FALSE(wrong_term.has_value());
  EXPECT_EQ(wrong_term.error().code, Code::kFailedPrecondition);

  auto lease = ReadLease(*a_);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(*lease, (LeaseState{"berthd-a", 1, kT0 + 15'000}));
}

TEST_F(PgLeaseTest, ALapsedLeaseIsTakenOverAtAHigherTermAndTheOldHolderCannotRenew) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  // At its expiry the lease has lapsed: b takes it, at term 2.
  auto taken = TryAcquireLease(*b_, "berthd-b", kT0 + 10'000, kTtl);
  ASSERT_TRUE(taken.has_value()) << taken.error().message;
  EXPECT_TRUE(taken->acquired);
  EXPECT_EQ(taken->lease, (LeaseState{"berthd-b", 2, kT0 + 20'000}));

  auto old = RenewLease(*a_, "berthd-a", 1, kT0 + 10'001, kTtl);
  ASSERT_FALSE(old.has_value());
  EXPECT_EQ(old.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(old.error().message, "deposed: term 1, lease now held by berthd-b at term 2");
  auto back = TryAcquireLease(*a_, "berthd-a", kT0 + 15'000, kTtl);
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(back->acquired);

  // A holder that let its own lease lapse renews no more: it acquires again,
  // with a new term, so whatever it did under the old one is fenced.
  auto lapsed = RenewLease(*b_, "berthd-b", 2, kT0 + 20'000, kTtl);
  ASSERT_FALSE(lapsed.has_value());
  EXPECT_EQ(lapsed.error().code, Code::kFailedPrecondition);
  EXPECT_THAT(lapsed.error().message, HasSubstr("lapsed"));
  EXPECT_EQ(Acquire(*b_, "berthd-b", kT0 + 20'000), 3);
}

TEST_F(PgLeaseTest, ADeposedLeadersWriteIsRefusedWhileTheNewLeadersCommits) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  ASSERT_TRUE(Place(*a_, "job-1", "berthd-a", 1));
  EXPECT_EQ(PlacedBy("job-1"), "berthd-a");

  // a stops renewing (paused, cut off); its lease lapses and b takes over.
  ASSERT_EQ(Acquire(*b_, "berthd-b", kT0 + 10'000), 2);

  // a wakes up still believing it leads: its write is refused.
  auto refused = Place(*a_, "job-2", "berthd-a", 1);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(refused.error().message, "deposed: term 1, lease now held by berthd-b at term 2");
  EXPECT_EQ(PlacedBy("job-2"), "");

  // Also with its write made before the fence is checked: the transaction
  // rolls back whole.
  {
    PgTransaction tx(*a_);
    ASSERT_TRUE(tx.Begin());
    ASSERT_TRUE(InsertPlacement(*a_, "job-3", "berthd-a", 1));
    auto fence = CheckFence(tx, 1);
    ASSERT_FALSE(fence.has_value());
    EXPECT_EQ(fence.error().code, Code::kFailedPrecondition);
  }
  EXPECT_EQ(PlacedBy("job-3"), "");

  // The new leader's write commits.
  ASSERT_TRUE(Place(*b_, "job-2", "berthd-b", 2));
  EXPECT_EQ(PlacedBy("job-2"), "berthd-b");
}

TEST_F(PgLeaseTest, ATakeoverWaitsForTheFencedTransactionInFlight) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  PgTransaction tx(*a_);
  ASSERT_TRUE(tx.Begin());
  ASSERT_TRUE(CheckFence(tx, 1));
  ASSERT_TRUE(InsertPlacement(*a_, "job-1", "berthd-a", 1));

  // b finds the lease lapsed and tries to take it while a's write is open.
  const int b_pid = b_->BackendPid();
  auto takeover = std::async(std::launch::async,
                             [&] { return TryAcquireLease(*b_, "berthd-b", kT0 + 10'000, kTtl); });
  // It waits on the lease row's lock that a's fence holds.
  const bool waiting = WaitsForALock(b_pid);
  EXPECT_TRUE(waiting) << "the takeover did not wait for the fenced transaction";
  EXPECT_EQ(takeover.wait_for(0ms), std::future_status::timeout);

  // a commits under term 1, before term 2 begins.
  ASSERT_TRUE(tx.Commit());
  auto taken = takeover.get();
  ASSERT_TRUE(taken.has_value()) << taken.error().message;
  EXPECT_TRUE(taken->acquired);
  EXPECT_EQ(taken->lease.term, 2);
  EXPECT_EQ(PlacedBy("job-1"), "berthd-a");

  // From now on a's writes are refused.
  auto refused = Place(*a_, "job-2", "berthd-a", 1);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kFailedPrecondition);
}

TEST_F(PgLeaseTest, ASerializableWriteThatMissedTheTakeoverIsRunAgainAndRefused) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  int attempts = 0;
  int runs = 0;
  auto st = RunTransaction(
      *a_, TxOptions{Isolation::kSerializable, 5},
      [&](PgTransaction& tx) -> Status {
        // The snapshot is taken before the fence is checked...
        BERTH_RETURN_IF_ERROR(tx.connection().Exec("SELECT count(*) FROM placements"));
        // ... and b takes over in between, on the first run.
        if (runs++ == 0 && Acquire(*b_, "berthd-b", kT0 + 10'000) != 2) {
          return Fail(Code::kInternal, "takeover failed");
        }
        BERTH_RETURN_IF_ERROR(CheckFence(tx, 1));
        return InsertPlacement(tx.connection(), "job-1", "berthd-a", 1);
      },
      &attempts);
  ASSERT_FALSE(st.has_value());
  // The first run's fence met a row changed after its snapshot (40001); the
  // second run read the new term.
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(st.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(st.error().message, "deposed: term 1, lease now held by berthd-b at term 2");
  EXPECT_EQ(PlacedBy("job-1"), "");
}

TEST_F(PgLeaseTest, OfTwoContendersExactlyOneTakesEachLapsedLease) {
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    // Each round starts at the previous lease's expiry.
    const TimeMs now = kT0 + round * kTtl.count();
    auto take_a =
        std::async(std::launch::async, [&] { return TryAcquireLease(*a_, "berthd-a", now, kTtl); });
    auto take_b =
        std::async(std::launch::async, [&] { return TryAcquireLease(*b_, "berthd-b", now, kTtl); });
    auto got_a = take_a.get();
    auto got_b = take_b.get();
    ASSERT_TRUE(got_a.has_value()) << got_a.error().message;
    ASSERT_TRUE(got_b.has_value()) << got_b.error().message;
    EXPECT_NE(got_a->acquired, got_b->acquired) << "round " << round;
    EXPECT_EQ(got_a->lease, got_b->lease) << "round " << round;
    EXPECT_EQ(got_a->lease.term, round + 1);
  }
}

TEST_F(PgLeaseTest, BadArgumentsAndAFenceOutsideATransactionAreRefused) {
  auto nameless = TryAcquireLease(*a_, "", kT0, kTtl);
  ASSERT_FALSE(nameless.has_value());
  EXPECT_EQ(nameless.error().code, Code::kInvalidArgument);
  EXPECT_EQ(nameless.error().field, "holder");
  auto instant = TryAcquireLease(*a_, "berthd-a", kT0, 0ms);
  ASSERT_FALSE(instant.has_value());
  EXPECT_EQ(instant.error().field, "ttl");
  auto renew = RenewLease(*a_, "berthd-a", 1, kT0, -1ms);
  ASSERT_FALSE(renew.has_value());
  EXPECT_EQ(renew.error().code, Code::kInvalidArgument);

  PgTransaction not_begun(*a_);
  auto fence = CheckFence(not_begun, 0);
  ASSERT_FALSE(fence.has_value());
  EXPECT_EQ(fence.error().code, Code::kInternal);
  // Nothing was taken by any of these.
  auto lease = ReadLease(*a_);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->term, 0);
}

// The write fence in the database: every statement of a session is checked,
// in a transaction or not, without the writer's code knowing.
class PgWriteFenceTest : public PgLeaseTest {
 protected:
  void SetUp() override {
    PgLeaseTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(InstallWriteFence(*a_));
    ASSERT_TRUE(InstallWriteFence(*b_));  // twice, from two sessions: the same fence
  }
};

TEST_F(PgWriteFenceTest, ADatabaseNoBerthdEverLedIsNotFenced) {
  // One berthd on PostgreSQL, or a tool: no lease, no term, writes go on.
  EXPECT_TRUE(InsertPlacement(*a_, "job-1", "tool", 0));
  EXPECT_EQ(PlacedBy("job-1"), "tool");
}

TEST_F(PgWriteFenceTest, OnlyTheSessionsOfTheLeasesTermWriteAndADeposedOnesAreRefused) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  ASSERT_TRUE(WriteForTerm(*a_, 1));
  ASSERT_TRUE(InsertPlacement(*a_, "job-1", "berthd-a", 1));  // no transaction, no CheckFence

  // A session that declared no term (a standby, a stray tool) is refused.
  auto stray = InsertPlacement(*b_, "job-2", "stray", 0);
  ASSERT_FALSE(stray.has_value());
  EXPECT_EQ(stray.error().code, Code::kFailedPrecondition);
  EXPECT_THAT(stray.error().message,
              HasSubstr("deposed: this session writes for term none, the lease is at term 1"));

  // a's lease lapses and b takes over: a's next statements, of any kind,
  // are refused; b's go through once it declares its term.
  ASSERT_EQ(Acquire(*b_, "berthd-b", kT0 + 10'000), 2);
  for (const char* sql : {"INSERT INTO placements VALUES ('job-3', 'berthd-a', 1)",
                          "UPDATE placements SET leader = 'berthd-a' WHERE job = 'job-1'",
                          "DELETE FROM placements", "TRUNCATE placements"}) {
    auto refused = a_->Exec(sql);
    ASSERT_FALSE(refused.has_value()) << sql;
    EXPECT_EQ(refused.error().code, Code::kFailedPrecondition) << sql;
    EXPECT_THAT(refused.error().message, HasSubstr("SQLSTATE BF001")) << sql;
  }
  EXPECT_EQ(PlacedBy("job-1"), "berthd-a");
  EXPECT_EQ(PlacedBy("job-3"), "");
  ASSERT_TRUE(WriteForTerm(*b_, 2));
  EXPECT_TRUE(InsertPlacement(*b_, "job-3", "berthd-b", 2));
  EXPECT_EQ(PlacedBy("job-3"), "berthd-b");
  EXPECT_FALSE(WriteForTerm(*a_, 0).has_value());  // no term 0
}

TEST_F(PgWriteFenceTest, ATakeoverWaitsForTheFencedStatementsTransactionInFlight) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  ASSERT_TRUE(WriteForTerm(*a_, 1));
  PgTransaction tx(*a_);
  ASSERT_TRUE(tx.Begin());
  ASSERT_TRUE(InsertPlacement(*a_, "job-1", "berthd-a", 1));  // share-locks the lease row
  // b's takeover waits for a's transaction: a commits at its own term.
  auto takeover = std::async(std::launch::async,
                             [&] { return TryAcquireLease(*b_, "berthd-b", kT0 + 10'000, kTtl); });
  EXPECT_EQ(takeover.wait_for(300ms), std::future_status::timeout);
  ASSERT_TRUE(tx.Commit());
  auto took = takeover.get();
  ASSERT_TRUE(took.has_value()) << took.error().message;
  EXPECT_TRUE(took->acquired);
  EXPECT_EQ(PlacedBy("job-1"), "berthd-a");
}

TEST_F(PgWriteFenceTest, ALongFencedTransactionDoesNotHoldTheLeadersRenewalBack) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  ASSERT_TRUE(WriteForTerm(*a_, 1));
  // a's write transaction holds the fence's lock; a's renewal, on a
  // connection of its own (as berthd's leadership has), goes through at
  // once instead of waiting for it to end.
  std::optional<PgTransaction> tx(std::in_place, *a_);
  ASSERT_TRUE(tx->Begin());
  ASSERT_TRUE(InsertPlacement(*a_, "job-1", "berthd-a", 1));
  auto renewal = std::async(std::launch::async,
                            [&] { return RenewLease(*b_, "berthd-a", 1, kT0 + 5'000, kTtl); });
  const bool prompt = renewal.wait_for(5s) == std::future_status::ready;
  if (!prompt) tx.reset();  // rolls back, so that the renewal and the test end
  ASSERT_TRUE(prompt) << "the renewal waited for the leader's write transaction";
  auto renewed = renewal.get();
  ASSERT_TRUE(renewed.has_value()) << renewed.error().message;
  EXPECT_EQ(renewed->expires_at_ms, kT0 + 5'000 + kTtl.count());
  // The transaction, begun before the renewal, still commits at its term.
  ASSERT_TRUE(InsertPlacement(*a_, "job-2", "berthd-a", 1));
  ASSERT_TRUE(tx->Commit());
  EXPECT_EQ(PlacedBy("job-2"), "berthd-a");
}

TEST_F(PgWriteFenceTest, ARepeatableReadTransactionThatPredatesATakeoverCannotCommit) {
  ASSERT_EQ(Acquire(*a_, "berthd-a", kT0), 1);
  ASSERT_TRUE(WriteForTerm(*a_, 1));
  // a's snapshot is taken before the takeover; its first write comes after.
  ASSERT_TRUE(a_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM placements"));
  ASSERT_EQ(Acquire(*b_, "berthd-b", kT0 + 10'000), 2);
  auto refused = InsertPlacement(*a_, "job-1", "berthd-a", 1);
  ASSERT_FALSE(refused.has_value()) << "a wrote at term 1 after term 2 began";
  ASSERT_TRUE(a_->Exec("ROLLBACK"));
  EXPECT_EQ(PlacedBy("job-1"), "");
}

}  // namespace
}  // namespace berth::store
