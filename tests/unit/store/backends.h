// The store backends the conformance suites run against: conformance_test.cc
// (jobs and runs), policy_conformance_test.cc, service_conformance_test.cc,
// quota_request_conformance_test.cc, node_conformance_test.cc and alert_conformance_test.cc. A
// backend fills in the concerns it implements and leaves the others null. Every suite runs against
// each backend of StoreBackends(), which keep all four concerns; the jobs suite also against its
// jobs-only backend. To add a backend (PostgreSQL next), add its factory to StoreBackends(): every
// suite then runs against it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "store/audit_log.h"
#include "store/sqlite_store.h"
#include "store/store.h"

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
  void SetUp() override { b_ = GetParam().make(); }
  void TearDown() override {
    if (b_.close) b_.close();
  }

  Backend b_;
};

// SqliteStore on a fresh temp dir, every concern; the dir goes with close.
inline Backend Sqlite() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "berth-conf-XXXXXX").string();
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  std::filesystem::path dir = tmpl;
  auto opened = store::SqliteStore::Open(dir, 1000);
  EXPECT_TRUE(opened.has_value()) << opened.error().message;
  if (!opened) {
    Backend none;
    none.close = [dir] { std::filesystem::remove_all(dir); };
    return none;
  }
  auto* store = opened->release();
  Backend b{store,
            store,
            store,
            store,
            [store](const std::string& yaml) {
              auto v = store->ApplyPolicy(yaml, "test", "", 1000);
              ASSERT_TRUE(v.has_value()) << v.error().message;
            },
            [store, dir] {
              delete store;  // NOLINT(cppcoreguidelines-owning-memory)
              std::filesystem::remove_all(dir);
            },
            [dir] {
              std::vector<store::AuditEntry> out;
              auto log = store::AuditLog::Open(dir);
              EXPECT_TRUE(log.has_value()) << log.error().message;
              if (!log) return out;
              store::AuditFilter all;
              all.limit = 100000;
              auto records = (*log)->Query(all);
              EXPECT_TRUE(records.has_value()) << records.error().message;
              if (records) out = std::move(*records);
              return out;
            }};
  b.services = store;
  return b;
}

// Every backend that keeps all four concerns.
inline std::vector<NamedBackend> StoreBackends() {
  return {{"sqlite", Sqlite}};
}

}  // namespace berth::tests
