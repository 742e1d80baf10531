// The GoogleTest fixture of tests that need a PostgreSQL server: a fresh
// server per test (tests/support/pg_server.h), stopped and removed after
// it. Where the server binaries are missing the test is skipped, naming the
// package, never passed.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "store/pg_db.h"
#include "support/pg_server.h"

namespace berth::tests {

class PgServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = PgServerUnavailable()) GTEST_SKIP() << *why;
    auto server = PgServer::Start(options_);
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
  }

  // A new connection to the test's server; throws (failing the test) when
  // it cannot connect.
  store::PgConnection Connect() {
    auto conn = store::PgConnection::Open(server_->conninfo());
    if (!conn) {
      throw std::runtime_error("connect: " + conn.error().message + "\nserver log:\n" +
                               server_->log());
    }
    return std::move(*conn);
  }

  // Ends the backend `pid` (pg_terminate_backend, waiting until it is gone),
  // as an operator or a crash would: its client's next command fails.
  void TerminateBackend(int pid) {
    store::PgConnection admin = Connect();
    auto st = admin.Prepare("SELECT pg_terminate_backend($1::int, 5000)");
    st.Bind(1, std::int64_t{pid});
    auto row = st.Step();
    ASSERT_TRUE(row.has_value()) << row.error().message;
    ASSERT_TRUE(*row);
    ASSERT_EQ(st.Text(0), "t") << "backend " << pid << " was not terminated";
  }

  // Whether the backend `pid` comes to wait for a lock (a row another
  // transaction holds) within about 5 s.
  bool WaitsForALock(int pid) {
    store::PgConnection watcher = Connect();
    for (int i = 0; i < 500; ++i) {
      auto st = watcher.Prepare("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1::int");
      st.Bind(1, std::int64_t{pid});
      auto row = st.Step();
      if (row.has_value() && *row && st.Text(0) == "Lock") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  PgServerOptions options_;
  std::unique_ptr<PgServer> server_;
};

}  // namespace berth::tests
