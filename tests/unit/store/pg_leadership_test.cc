// Leadership (store/pg_leadership.h) of two berthd played by two Leadership
// objects on one real server with a manual clock: the first takes the
// lease, the second stands by and sees who leads; when the leader's lease
// lapses (its clock jumped past it, as after a pause) it steps down by
// itself and the standby takes over at the next term. A renewal that hangs
// (here: behind another session's lock on the lease row, as behind a cut
// link) does not keep the leader in office past its deadline.
#include "store/pg_leadership.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "support/pg_fixture.h"

namespace berth::store {
namespace {

using namespace std::chrono_literals;
using ::testing::AnyOf;
using ::testing::HasSubstr;

const LeadershipOptions kFast{3000ms, 100ms, 20ms};

class PgLeadershipTest : public tests::PgServerTest {
 protected:
  std::unique_ptr<Leadership> Open(const std::string& holder) {
    auto lead = Leadership::Open(server_->conninfo(), holder, clock_, kFast);
    EXPECT_TRUE(lead.has_value()) << lead.error().message;
    return lead ? std::move(*lead) : nullptr;
  }

  ManualClock clock_;
};

TEST_F(PgLeadershipTest, TheStandbyTakesOverOnceTheLeadersLeaseLapsesAndTheLeaderStepsDown) {
  auto a = Open("berthd-a");
  auto b = Open("berthd-b");
  ASSERT_TRUE(a && b);
  auto a_term = a->Acquire();
  ASSERT_TRUE(a_term.has_value()) << a_term.error().message;
  EXPECT_EQ(*a_term, 1);
  EXPECT_TRUE(a->leading());
  EXPECT_EQ(a->leading_since(), clock_.NowMs());
  std::promise<std::string> lost;
  a->KeepRenewing([&](const std::string& why) { lost.set_value(why); });

  // b stands by while a renews, and knows who leads.
  auto b_term = std::async(std::launch::async, [&] { return b->Acquire(); });
  EXPECT_EQ(b_term.wait_for(400ms), std::future_status::timeout);
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(b->last_seen().holder, "berthd-a");
  EXPECT_EQ(b->last_seen().term, 1);

  // Time jumps past a's lease: a cannot renew and steps down; b takes over.
  clock_.Advance(3001);
  auto got = b_term.get();
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(*got, 2);
  EXPECT_TRUE(b->leading());
  auto why = lost.get_future();
  ASSERT_EQ(why.wait_for(5s), std::future_status::ready);
  EXPECT_THAT(why.get(), AnyOf(HasSubstr("lapsed"), HasSubstr("deposed")));
  EXPECT_FALSE(a->leading());
}

TEST_F(PgLeadershipTest, StopEndsAStandbysWaitAndBadTimingsAreRefused) {
  auto a = Open("berthd-a");
  auto b = Open("berthd-b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Acquire().has_value());
  auto waiting = std::async(std::launch::async, [&] { return b->Acquire(); });
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout);
  b->Stop();
  auto ended = waiting.get();
  ASSERT_FALSE(ended.has_value());
  EXPECT_EQ(ended.error().code, Code::kUnavailable);

  auto slow = CheckLeadershipOptions(LeadershipOptions{3000ms, 2000ms, 100ms}, "--leader-ttl");
  ASSERT_FALSE(slow.has_value());
  EXPECT_EQ(slow.error().field, "--leader-ttl");
  EXPECT_THAT(slow.error().message, HasSubstr("three renewals"));
  EXPECT_FALSE(Leadership::Open(server_->conninfo(), "", clock_, kFast).has_value());
}

TEST_F(PgLeadershipTest, ALeaderThatReleasesTheLeaseHandsOverWithoutTheWait) {
  auto a = Open("berthd-a");
  auto b = Open("berthd-b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Acquire().has_value());
  a->KeepRenewing([](const std::string&) { ADD_FAILURE() << "a released, it did not lose"; });
  auto b_term = std::async(std::launch::async, [&] { return b->Acquire(); });
  EXPECT_EQ(b_term.wait_for(300ms), std::future_status::timeout);
  a->Release();  // the clock never moves: only the release lets b in
  EXPECT_FALSE(a->leading());
  ASSERT_EQ(b_term.wait_for(5s), std::future_status::ready);
  auto got = b_term.get();
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(*got, 2);
  a->Release();  // twice: nothing more
}

TEST_F(PgLeadershipTest, ALeaderWhoseRenewalHangsStepsDownBeforeItsLeaseLapses) {
  auto a = Open("berthd-a");
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->Acquire().has_value());
  std::promise<std::string> lost;
  a->KeepRenewing([&](const std::string& why) { lost.set_value(why); });
  auto why = lost.get_future();
  // Another session holds the lease row: a's next renewal waits on it and
  // would wait for as long as it is held.
  auto blocker = PgConnection::Open(server_->conninfo());
  ASSERT_TRUE(blocker.has_value()) << blocker.error().message;
  ASSERT_TRUE(blocker->Exec("BEGIN; SELECT * FROM leader_lease FOR UPDATE").has_value());
  std::this_thread::sleep_for(300ms);  // a renewal is under way and stuck
  EXPECT_EQ(why.wait_for(0ms), std::future_status::timeout);
  EXPECT_TRUE(a->leading());
  // Its deadline passes on the local clock: it steps down at once, the
  // renewal still waiting.
  clock_.Advance(3000 - 100);
  ASSERT_EQ(why.wait_for(5s), std::future_status::ready);
  EXPECT_THAT(why.get(), HasSubstr("would have lapsed"));
  EXPECT_FALSE(a->leading());
  ASSERT_TRUE(blocker->Exec("ROLLBACK").has_value());
}

}  // namespace
}  // namespace berth::store
