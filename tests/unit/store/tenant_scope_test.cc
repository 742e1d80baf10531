// A request's tenant scope (model/tenant_scope.h) taken by every store read
// that lists tenant-owned rows: another tenant's rows are absent, and the
// scope filters before the LIMIT, so a page (or a report's capped read)
// holds as many rows of the caller's tenants as it asked for, never fewer
// because other tenants' rows took their places.
#include "model/tenant_scope.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "control/lifecycle.h"
#include "store/audit_log.h"
#include "store/meter_store.h"
#include "store/sqlite_store.h"
#include "unit/builders.h"

namespace berth::store {
namespace {

using model::TenantScope;

TEST(TenantScopeModel, AnExplicitSetSeesItsTenantsAndNothingElse) {
  const TenantScope none;
  EXPECT_TRUE(none.none());
  EXPECT_FALSE(none.Contains("vision"));
  EXPECT_FALSE(none.Contains(""));
  EXPECT_TRUE(TenantScope::Of({}).none());
  const TenantScope all = TenantScope::All();
  EXPECT_TRUE(all.all());
  EXPECT_FALSE(all.none());
  EXPECT_TRUE(all.Contains("anything"));
  const TenantScope two = TenantScope::Of({"vision", "nlp", "vision"});
  EXPECT_EQ(two.tenants(), (std::vector<std::string>{"nlp", "vision"}));
  EXPECT_TRUE(two.Contains("vision"));
  EXPECT_TRUE(two.Contains("nlp"));
  EXPECT_FALSE(two.Contains("default"));
  EXPECT_FALSE(two.Contains("visio"));
  EXPECT_FALSE(two.all());
}

class TenantScopeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-scope-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = SqliteStore::Open(dir_, 1000);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    ASSERT_TRUE(store_
                    ->ApplyPolicy("queues:\n"
                                  "  - {name: vision, children: [{name: default}]}\n"
                                  "  - {name: nlp, children: [{name: default}]}\n"
                                  "  - {name: audio, children: [{name: default}]}\n",
                                  "admin", "", 1200)
                    .has_value());
    auto m = MeterStore::Open(dir_);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    meter_ = std::move(*m);
    auto log = AuditLog::Open(dir_);
    ASSERT_TRUE(log.has_value()) << log.error().message;
    audit_ = std::move(*log);
    ASSERT_TRUE(store_->UpsertNode(tests::H100Node(8), 1300).has_value());
  }
  void TearDown() override {
    audit_.reset();
    meter_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::int64_t Submit(const std::string& tenant, TimeMs at) {
    model::JobSpec s;
    s.name = "j";
    s.tenant = tenant;
    s.command = {"true"};
    s.resources.gpus = 1;
    auto id = store_->CreateJob(s, at, "alice");
    EXPECT_TRUE(id.has_value()) << id.error().message;
    return id.value_or(0);
  }
  // A job of `tenant` placed on GPU `gpu` of n1 and started at `at`.
  void Run(const std::string& tenant, std::uint32_t gpu, TimeMs at) {
    const auto id = Submit(tenant, at);
    sched::Placement p{id, {{0, "n1", {gpu}}}};
    sched::Plan plan;
    plan.placements.push_back(p);
    auto nodes = store_->ListNodes();
    ASSERT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, at).has_value());
    const std::string run_id = store_->GetJob(id)->runs.at(0).run_id;
    ASSERT_TRUE(control::MarkRunStarted(*store_, run_id, 42, at, at).has_value());
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<MeterStore> meter_;
  std::unique_ptr<AuditLog> audit_;
};

TEST_F(TenantScopeStoreTest, AReportsJobsAreTheScopesAndTheCapCountsOnlyThem) {
  // nlp's jobs come first in the report's order (oldest first).
  for (int i = 0; i < 5; ++i) Submit("nlp", 2000 + i);
  for (int i = 0; i < 5; ++i) Submit("vision", 3000 + i);
  auto jobs = store_->JobsForWindow(1000, 10000, TenantScope::Of({"vision"}), 3);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 3U);  // not 0: nlp's older jobs did not take the places
  for (const auto& j : *jobs) EXPECT_EQ(j.spec.tenant, "vision");
  EXPECT_TRUE(store_->JobsForWindow(1000, 10000, TenantScope(), 100)->empty());
  EXPECT_EQ(store_->JobsForWindow(1000, 10000, TenantScope::All(), 100)->size(), 10U);
}

TEST_F(TenantScopeStoreTest, QuotaRequestsAreTheScopesAndAPageIsNeverShort) {
  auto ask = [&](const std::string& queue, TimeMs at) {
    QuotaRequest r;
    r.queue = queue;
    r.resource = "gpus";
    r.guaranteed = 2000;
    r.reason = "more";
    ASSERT_TRUE(store_->FileQuotaRequest(r, "alice", at).has_value());
  };
  for (int i = 0; i < 3; ++i) ask("vision/default", 2000 + i);
  // Newer, so first in the list's order (newest first).
  for (int i = 0; i < 3; ++i) ask("nlp/default", 3000 + i);
  QuotaRequestFilter filter;
  filter.limit = 3;
  filter.tenants = TenantScope::Of({"vision", "audio"});
  auto page = store_->ListQuotaRequests(filter);
  ASSERT_TRUE(page.has_value()) << page.error().message;
  ASSERT_EQ(page->size(), 3U);
  for (const auto& r : *page) EXPECT_EQ(r.tenant, "vision");
  // Naming another tenant does not widen the scope.
  filter.tenant = "nlp";
  EXPECT_TRUE(store_->ListQuotaRequests(filter)->empty());
  filter.tenant.clear();
  filter.tenants = TenantScope();
  EXPECT_TRUE(store_->ListQuotaRequests(filter)->empty());
  filter.tenants = TenantScope::All();
  filter.limit = 100;
  EXPECT_EQ(store_->ListQuotaRequests(filter)->size(), 6U);
}

TEST_F(TenantScopeStoreTest, UsageRunsAndBudgetsAreTheScopes) {
  Run("nlp", 0, 2000);
  Run("nlp", 1, 2001);
  Run("vision", 2, 3000);
  Run("audio", 3, 3001);
  // The cap counts only the scope's runs: one row asked, vision's one row
  // read, although nlp's two started first.
  auto runs = meter_->UsageRuns(1000, 10000, "", TenantScope::Of({"vision", "audio"}), 1);
  ASSERT_TRUE(runs.has_value()) << runs.error().message;
  ASSERT_EQ(runs->size(), 1U);
  EXPECT_EQ(runs->front().tenant, "vision");
  runs = meter_->UsageRuns(1000, 10000, "", TenantScope::Of({"vision", "audio"}), 10);
  ASSERT_EQ(runs->size(), 2U);
  EXPECT_EQ(runs->at(1).tenant, "audio");
  EXPECT_TRUE(meter_->UsageRuns(1000, 10000, "nlp", TenantScope::Of({"vision"}), 10)->empty());
  EXPECT_TRUE(meter_->UsageRuns(1000, 10000, "", TenantScope(), 10)->empty());
  EXPECT_EQ(meter_->UsageRuns(1000, 10000, "", TenantScope::All(), 10)->size(), 4U);
  EXPECT_EQ(meter_->UsageRuns(1000, 10000, "nlp", TenantScope::All(), 10)->size(), 2U);

  for (const char* t : {"audio", "nlp", "vision"}) {
    model::Budget b;
    b.tenant = t;
    b.mgpu_ms = 1000;
    b.set_ms = 4000;
    b.set_by = "admin";
    ASSERT_TRUE(meter_->SetBudget(b).has_value());
  }
  auto budgets = meter_->ListBudgets(TenantScope::Of({"vision"}));
  ASSERT_TRUE(budgets.has_value()) << budgets.error().message;
  ASSERT_EQ(budgets->size(), 1U);
  EXPECT_EQ(budgets->front().tenant, "vision");
  EXPECT_TRUE(meter_->ListBudgets(TenantScope())->empty());
  EXPECT_EQ(meter_->ListBudgets(TenantScope::All())->size(), 3U);
}

TEST_F(TenantScopeStoreTest, AuditRecordsAreTheScopesAndThoseOfNoTenant) {
  auto append = [&](const std::string& tenant, int i) {
    AuditEntry e;
    e.time_ms = 5000 + i;
    e.actor = "alice";
    e.tenant = tenant;
    e.action = "job.submit";
    e.object = "job/" + std::to_string(i);
    ASSERT_TRUE(audit_->Append(e).has_value());
  };
  append("vision", 1);
  append("", 2);
  append("vision", 3);
  // The newest records are nlp's: a capped read must not be filled by them.
  for (int i = 4; i < 10; ++i) append("nlp", i);
  AuditFilter filter;
  filter.tenants = TenantScope::Of({"vision"});
  filter.limit = 3;
  auto records = audit_->Query(filter);
  ASSERT_TRUE(records.has_value()) << records.error().message;
  ASSERT_EQ(records->size(), 3U);
  EXPECT_EQ(records->at(0).tenant, "vision");
  EXPECT_EQ(records->at(1).tenant, "");
  EXPECT_EQ(records->at(2).tenant, "vision");
  filter.tenants = TenantScope();
  records = audit_->Query(filter);
  ASSERT_EQ(records->size(), 1U);  // only the record of no tenant
  EXPECT_EQ(records->front().tenant, "");
  filter.tenants = TenantScope::All();
  filter.limit = 100;
  EXPECT_EQ(audit_->Query(filter)->size(), 9U);
}

}  // namespace
}  // namespace berth::store
