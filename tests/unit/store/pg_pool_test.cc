// The PostgreSQL connection pool (store/pg_pool.h) against a real server:
// it never opens more than its bound, a borrower past the bound waits for a
// connection given back or times out, and a lost connection (its backend
// terminated, while lent or while idle) is closed, never lent again.
#include "store/pg_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "support/pg_fixture.h"

namespace berth::store {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class PgPoolTest : public tests::PgServerTest {};

TEST_F(PgPoolTest, ABorrowerPastTheBoundWaitsForOneGivenBackOrTimesOut) {
  PgPool pool(server_->conninfo(), 2);
  auto a = pool.Acquire(5s);
  auto b = pool.Acquire(5s);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_TRUE(b.has_value()) << b.error().message;
  const int a_pid = (*a)->BackendPid();
  EXPECT_NE(a_pid, (*b)->BackendPid());
  EXPECT_EQ(pool.open(), 2U);

  const auto start = std::chrono::steady_clock::now();
  auto none = pool.Acquire(150ms);
  ASSERT_FALSE(none.has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
  EXPECT_EQ(none.error().code, Code::kUnavailable);
  EXPECT_THAT(none.error().message, HasSubstr("2 of 2 in use"));
  EXPECT_EQ(pool.open(), 2U);

  // A waiting borrower gets the connection given back, not a third one.
  std::optional<PgPool::Handle> first(std::move(*a));
  std::thread giver([&] {
    std::this_thread::sleep_for(100ms);
    first.reset();
  });
  auto c = pool.Acquire(5s);
  giver.join();
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ((*c)->BackendPid(), a_pid);
  EXPECT_EQ(pool.open(), 2U);
}

TEST_F(PgPoolTest, ManyThreadsShareTheBoundedConnections) {
  PgPool pool(server_->conninfo(), 3);
  std::atomic<int> lent{0};
  std::atomic<int> most{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        auto h = pool.Acquire(5s);
        if (!h || !(*h)->Exec("SELECT pg_sleep(0.01)")) {
          ++failures;
          continue;
        }
        const int now = ++lent;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(5ms);
        --lent;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(most.load(), 3);
  EXPECT_LE(pool.open(), 3U);
  EXPECT_EQ(pool.idle(), pool.open());
}

TEST_F(PgPoolTest, AConnectionLostWhileLentIsDroppedNotGivenBack) {
  PgPool pool(server_->conninfo(), 2);
  int dead_pid = 0;
  {
    auto h = pool.Acquire(5s);
    ASSERT_TRUE(h.has_value()) << h.error().message;
    dead_pid = (*h)->BackendPid();
    TerminateBackend(dead_pid);
    auto st = (*h)->Exec("SELECT 1");
    ASSERT_FALSE(st.has_value());
    EXPECT_EQ(st.error().code, Code::kUnavailable);
  }
  EXPECT_EQ(pool.open(), 0U);
  EXPECT_EQ(pool.idle(), 0U);
  auto h = pool.Acquire(5s);
  ASSERT_TRUE(h.has_value()) << h.error().message;
  EXPECT_NE((*h)->BackendPid(), dead_pid);
  EXPECT_TRUE((*h)->Exec("SELECT 1"));
}

TEST_F(PgPoolTest, AConnectionLostWhileIdleIsNotLent) {
  PgPool pool(server_->conninfo(), 2);
  int dead_pid = 0;
  {
    auto h = pool.Acquire(5s);
    ASSERT_TRUE(h.has_value()) << h.error().message;
    dead_pid = (*h)->BackendPid();
  }
  ASSERT_EQ(pool.idle(), 1U);
  TerminateBackend(dead_pid);
  auto h = pool.Acquire(5s);
  ASSERT_TRUE(h.has_value()) << h.error().message;
  EXPECT_NE((*h)->BackendPid(), dead_pid);
  // The borrower's first command works: it never saw the dead connection.
  EXPECT_TRUE((*h)->Exec("SELECT 1"));
  EXPECT_EQ(pool.open(), 1U);
}

TEST_F(PgPoolTest, AConnectionGivenBackInsideATransactionIsClosed) {
  PgPool pool(server_->conninfo(), 2);
  {
    auto h = pool.Acquire(5s);
    ASSERT_TRUE(h.has_value()) << h.error().message;
    ASSERT_TRUE((*h)->Exec("CREATE TABLE t(id BIGINT)"));
    ASSERT_TRUE((*h)->Exec("BEGIN; INSERT INTO t VALUES (1)"));
  }
  EXPECT_EQ(pool.open(), 0U);
  auto h = pool.Acquire(5s);
  ASSERT_TRUE(h.has_value()) << h.error().message;
  EXPECT_FALSE((*h)->in_transaction());
  auto st = (*h)->Prepare("SELECT count(*) FROM t");
  auto row = st.Step();
  ASSERT_TRUE(row.has_value() && *row);
  EXPECT_EQ(st.Int(0), 0);  // the open transaction ended with its connection
}

}  // namespace
}  // namespace berth::store
