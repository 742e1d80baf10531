// The store backends the conformance suites run against: conformance_test.cc
// (jobs and runs), policy_conformance_test.cc, service_conformance_test.cc,
// quota_request_conformance_test.cc, node_conformance_test.cc and alert_conformance_test.cc. A
// backend fills in the concerns it implements and leaves the others null. Every suite runs against
// each backend of StoreBackends(), which keep all four concerns; the jobs suite also against its
// jobs-only backend. To add a backend, add its factory to StoreBackends(): every suite then runs
// against it.
//
// The suites are compiled twice: into store_test (unit) against SQLite, and
// with BERTH_CONFORMANCE_POSTGRES into store_pg_test (integration) against
// SqliteStore::OpenPostgres on a real PostgreSQL 15 server that the process
// starts once (tests/support/pg_server.h), each test in a schema of its own.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "store/audit_log.h"
#include "store/sqlite_store.h"
#include "store/store.h"
#ifdef BERTH_CONFORMANCE_POSTGRES
#include "support/pg_server.h"
#endif

namespace berth::tests {

// One backend under test: the interface of each concern it implements (one
// object behind all of them where the backend keeps them together, as a
// PolicyStore's guard counts the jobs of its JobStore), how it takes a new
// active policy, and how it is closed and its state removed.
struct Backend {
  store::PolicyStore* policy = nullptr;
  store::JobStore* jobs = nullptr;
  store::NodeStore* nodes = nullptr;
  store::AlertStore* alerts = nullptr;
  std::function<void(const std::string& yaml)> use_policy;
  std::function<void()> close;
  // The audit records committed with the backend's changes, oldest first.
  std::function<std::vector<store::AuditEntry>()> audit_records;
  store::ServiceStore* services = nullptr;
  // Why this backend cannot run here (the test is skipped, saying so).
  std::string unavailable;
};

// A backend's name (the test name's suffix) and how to open a fresh one.
struct NamedBackend {
  std::string name;
  std::function<Backend()> make;
};

inline void PrintTo(const NamedBackend& backend, std::ostream* os) {
  *os << backend.name;
}

inline std::string BackendName(const ::testing::TestParamInfo<NamedBackend>& info) {
  return info.param.name;
}

// The fixture of every conformance suite: a fresh backend (the test's
// parameter) for each test, closed after it. A suite checks in its SetUp
// that the backend has the concerns it tests.
class BackendTest : public ::testing::TestWithParam<NamedBackend> {
 protected:
  // A suite's SetUp returns at once when this skipped the test.
  void SetUp() override {
    b_ = GetParam().make();
    if (!b_.unavailable.empty()) GTEST_SKIP() << b_.unavailable;
  }
  void TearDown() override {
    if (b_.close) b_.close();
  }

  Backend b_;
};

// The records of an audit log, oldest first.
inline std::vector<store::AuditEntry> AllRecords(store::AuditLog& log) {
  std::vector<store::AuditEntry> out;
  store::AuditFilter all;
  all.limit = 100000;
  auto records = log.Query(all);
  EXPECT_TRUE(records.has_value()) << records.error().message;
  if (records) out = std::move(*records);
  return out;
}

// A backend of every concern on `store` (owned; deleted by close, before
// `remove` removes its state), whose audit records are read from `where`.
inline Backend WholeStore(store::SqliteStore* store, const store::StoreLocation& where,
                          std::function<void()> remove) {
  Backend b;
  b.policy = store;
  b.jobs = store;
  b.nodes = store;
  b.alerts = store;
  b.services = store;
  b.use_policy = [store](const std::string& yaml) {
    auto v = store->ApplyPolicy(yaml, "test", "", 1000);
    ASSERT_TRUE(v.has_value()) << v.error().message;
  };
  b.close = [store, remove = std::move(remove)] {
    delete store;  // NOLINT(cppcoreguidelines-owning-memory)
    remove();
  };
  b.audit_records = [where] {
    auto log = store::AuditLog::Open(where);
    EXPECT_TRUE(log.has_value()) << log.error().message;
    if (!log) return std::vector<store::AuditEntry>{};
    return AllRecords(**log);
  };
  return b;
}

// SqliteStore on a fresh temp dir, every concern; the dir goes with close.
inline Backend Sqlite() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "berth-conf-XXXXXX").string();
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  std::filesystem::path dir = tmpl;
  const store::StoreLocation where(dir);
  auto opened = store::SqliteStore::Open(where, 1000);
  EXPECT_TRUE(opened.has_value()) << opened.error().message;
  if (!opened) {
    Backend none;
    none.close = [dir] { std::filesystem::remove_all(dir); };
    return none;
  }
  return WholeStore(opened->release(), where, [dir] { std::filesystem::remove_all(dir); });
}

#ifdef BERTH_CONFORMANCE_POSTGRES
// The process's PostgreSQL server, started at the first test that needs it
// and stopped at exit; null where it cannot start (`why` says why).
inline PgServer* ConformanceServer(std::string& why) {
  static std::string unavailable;
  static std::unique_ptr<PgServer> server = [] {
    std::unique_ptr<PgServer> out;
    if (auto missing = PgServerUnavailable()) {
      unavailable = *missing;
      return out;
    }
    auto started = PgServer::Start();
    if (!started) {
      unavailable = "the PostgreSQL server did not start: " + started.error();
      return out;
    }
    return std::move(*started);
  }();
  why = unavailable;
  return server.get();
}

// A fresh, empty schema of the process's server: its name, and a
// connection string whose search_path is that schema (empty, with `why`
// set, where there is no server).
struct PgSchema {
  std::string name;
  std::string conninfo;
};
inline PgSchema FreshPgSchema(std::string& why) {
  PgServer* server = ConformanceServer(why);
  if (server == nullptr) {
    // A missing server is a skip only where the server package is absent.
    EXPECT_TRUE(PgServerUnavailable().has_value()) << why;
    return {};
  }
  static std::atomic<int> next{0};
  const std::string schema = fmt::format("conformance_{}", next++);
  auto admin = store::Database::Connect(server->conninfo());
  EXPECT_TRUE(admin.has_value()) << admin.error().message;
  if (!admin) return {};
  auto made = admin->Exec(fmt::format("CREATE SCHEMA {}", schema));
  EXPECT_TRUE(made.has_value()) << made.error().message;
  return {schema, fmt::format("{} options='-c search_path={}'", server->conninfo(), schema)};
}

// SqliteStore::OpenPostgres in a fresh schema of the process's server; the
// schema goes with close.
inline Backend Postgres() {
  Backend none;
  const PgSchema fresh = FreshPgSchema(none.unavailable);
  if (fresh.conninfo.empty()) return none;
  PgServer* server = ConformanceServer(none.unavailable);
  const auto where = store::StoreLocation::Postgres(fresh.conninfo);
  auto opened = store::SqliteStore::Open(where, 1000);
  EXPECT_TRUE(opened.has_value()) << opened.error().message << "\nserver log:\n" << server->log();
  if (!opened) return none;
  return WholeStore(opened->release(), where, [server, schema = fresh.name] {
    auto admin = store::Database::Connect(server->conninfo());
    if (admin) (void)admin->Exec(fmt::format("DROP SCHEMA {} CASCADE", schema));
  });
}

// Every backend that keeps all four concerns.
inline std::vector<NamedBackend> StoreBackends() {
  return {{"postgresql", Postgres}};
}
#else
// Every backend that keeps all four concerns.
inline std::vector<NamedBackend> StoreBackends() {
  return {{"sqlite", Sqlite}};
}
#endif

}  // namespace berth::tests
