// Usage records built from a real SqliteStore's runs (store::MeterStore +
// server::Meter) on a manual clock: price changes split a run, slices pay
// their share, open runs end at now, windows clip exactly, and budget
// alerts are raised once per threshold per month.
#include "meter/metering.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "control/lifecycle.h"
#include "meter/alerting.h"
#include "store/sqlite_store.h"
#include "unit/builders.h"

namespace berth::server {
namespace {

constexpr TimeMs kHour = 3'600'000;
constexpr TimeMs kNov30 = 1'795'996'800'000;  // 2026-11-30T00:00:00Z

class MeteringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-meter-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = store::SqliteStore::Open(dir_, clock_.NowMs());
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    auto m = store::MeterStore::Open(dir_);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    meter_store_ = std::move(*m);
    meter_ = std::make_unique<Meter>(*meter_store_, *store_);
    alerts_ = std::make_unique<AlertRouter>(*store_);
    meter_->set_alerts(alerts_.get());
    model::NodeInfo n = tests::H100Node(8);
    ASSERT_TRUE(store_->UpsertNode(n, clock_.NowMs()).has_value());
  }
  void TearDown() override {
    meter_.reset();
    alerts_.reset();
    meter_store_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A job placed on n1's first `gpus` GPUs and started now; its run id.
  std::string Start(std::uint32_t gpus, std::uint32_t share_millis = 0,
                    model::Priority priority = model::Priority::kNormal,
                    std::optional<model::ServiceOwner> service = std::nullopt) {
    model::JobSpec s;
    s.name = "j";
    s.service = std::move(service);
    s.command = {"true"};
    s.resources.gpus = gpus;
    s.resources.gpu_share_millis = share_millis;
    s.priority = priority;
    const auto id = *store_->CreateJob(s, clock_.NowMs(), "alice");
    sched::Placement p{id, {{0, "n1", {}}}};
    for (std::uint32_t g = 0; g < std::max(gpus, 1u); ++g) p.replicas[0].gpu_indices.push_back(g);
    sched::Plan plan;
    plan.placements.push_back(p);
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, clock_.NowMs()).has_value());
    const std::string run_id = store_->GetJob(id)->runs.at(0).run_id;
    EXPECT_TRUE(
        control::MarkRunStarted(*store_, run_id, 42, clock_.NowMs(), clock_.NowMs()).has_value());
    return run_id;
  }
  void End(const std::string& run_id) {
    store::RunExit e;
    e.run_id = run_id;
    e.ended_at_ms = clock_.NowMs();
    ASSERT_TRUE(control::MarkRunExited(*store_, e, clock_.NowMs()).has_value());
  }
  std::vector<model::UsageRecord> Records(TimeMs from, TimeMs to) {
    auto r = meter_->Records(from, to, "", model::TenantScope::All(), clock_.NowMs());
    EXPECT_TRUE(r.has_value()) << r.error().message;
    return r.value_or(std::vector<model::UsageRecord>{});
  }
  void Prices(const std::string& yaml) {
    auto v = meter_store_->ApplyPrices(yaml, "alice", "", clock_.NowMs());
    ASSERT_TRUE(v.has_value()) << v.error().message;
  }

  ManualClock clock_{kNov30};
  std::unique_ptr<AlertRouter> alerts_;
  std::filesystem::path dir_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<store::MeterStore> meter_store_;
  std::unique_ptr<Meter> meter_;
};

TEST_F(MeteringTest, APriceApplyOnAStaleBaseIsRefusedNamingTheVersionThatLanded) {
  Prices("prices: [{model: H100-80GB, per_gpu_hour: 2.00}]");  // version 1
  std::atomic<int> applied{0};
  std::vector<std::thread> both;
  std::vector<Error> errors(2);
  for (int i = 0; i < 2; ++i) {
    both.emplace_back([&, i] {
      auto v = meter_store_->ApplyPrices(
          fmt::format("prices: [{{model: H100-80GB, per_gpu_hour: {}.00}}]", 3 + i),
          fmt::format("admin{}", i), "", clock_.NowMs(), 1);
      if (v) {
        applied.fetch_add(1);
      } else {
        errors[static_cast<std::size_t>(i)] = v.error();
      }
    });
  }
  for (auto& t : both) t.join();
  EXPECT_EQ(applied.load(), 1);
  const Error& e = errors[0].message.empty() ? errors[1] : errors[0];
  EXPECT_EQ(e.code, Code::kFailedPrecondition);
  EXPECT_EQ(e.field, "base_version");
  EXPECT_NE(e.message.find("version 2 was applied by admin"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("--base 2"), std::string::npos) << e.message;
  auto versions = meter_store_->PriceVersions();
  ASSERT_TRUE(versions.has_value());
  EXPECT_EQ(versions->size(), 2U);
  EXPECT_TRUE(meter_store_
                  ->ApplyPrices("prices: [{model: H100-80GB, per_gpu_hour: 9.00}]", "admin", "",
                                clock_.NowMs(), 2)
                  .has_value());
}

TEST_F(MeteringTest, ARunSpanningAPriceChangeIsSplitAtIt) {
  Prices("prices: [{model: H100-80GB, pool: default, per_gpu_hour: 2.00}]");
  clock_.Advance(kHour);
  const auto run = Start(2);
  clock_.Advance(kHour);
  Prices("prices: [{model: H100-80GB, per_gpu_hour: 5.00}]");
  clock_.Advance(kHour / 2);
  End(run);
  auto records = Records(0, clock_.NowMs() + kHour);
  ASSERT_EQ(records.size(), 1u);
  const auto& r = records[0];
  EXPECT_EQ(r.run_id, run);
  EXPECT_EQ(r.user, "alice");
  EXPECT_EQ(r.pool, "default");
  EXPECT_EQ(r.gpu_model, "H100-80GB");
  EXPECT_EQ(r.gpu_uuids, (std::vector<std::string>{"uuid-0", "uuid-1"}));
  EXPECT_EQ(r.mgpu, 2000);
  EXPECT_EQ(r.start_ms, kNov30 + kHour);
  EXPECT_EQ(r.end_ms, kNov30 + 2 * kHour + kHour / 2);
  EXPECT_EQ(r.outcome, "succeeded");
  ASSERT_EQ(r.pieces.size(), 2u);
  EXPECT_EQ(r.pieces[0].price_version, 1);
  EXPECT_EQ(r.pieces[1].price_version, 2);
  EXPECT_EQ(r.mgpu_ms, 2000 * (kHour + kHour / 2));
  EXPECT_EQ(r.cost_micros, 2 * 2'000'000 + 2 * 5'000'000 / 2);  // 4.00 + 5.00
}

TEST_F(MeteringTest, SlicesPayTheirShareAndOpenRunsEndNow) {
  Prices("default: 4");
  const auto slice = Start(0, 250);
  clock_.Advance(2 * kHour);
  auto records = Records(0, clock_.NowMs() + kHour);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].run_id, slice);
  EXPECT_TRUE(records[0].open);
  EXPECT_EQ(records[0].outcome, "running");
  EXPECT_EQ(records[0].end_ms, clock_.NowMs());
  EXPECT_EQ(records[0].mgpu, 250);
  EXPECT_EQ(records[0].cost_micros, 2'000'000);  // a quarter GPU, 2 h, at 4.00
}

// A service's replicas are metered and priced as jobs are, and a report by
// service puts them under tenant/name, beside the row of every other job.
TEST_F(MeteringTest, ReplicasAreMeteredPerService) {
  Prices("default: 2");
  const auto training = Start(2);
  const auto replica = Start(1, 0, model::Priority::kNormal, model::ServiceOwner{"coder", 1, 8000});
  clock_.Advance(3 * kHour);
  End(training);
  End(replica);
  auto records = Records(0, clock_.NowMs());
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    EXPECT_EQ(r.service, r.run_id == replica ? "coder" : "") << r.run_id;
  }
  auto keys = model::ParseUsageKeys("tenant,service");
  ASSERT_TRUE(keys.has_value());
  const model::UsageReport report = model::Aggregate(records, *keys);
  ASSERT_EQ(report.rows.size(), 2u);
  EXPECT_EQ(report.rows[0].key, (std::vector<std::string>{"default", ""}));
  EXPECT_EQ(report.rows[0].cost_micros, 12'000'000);  // 2 GPUs, 3 h, at 2.00
  EXPECT_EQ(report.rows[1].key, (std::vector<std::string>{"default", "default/coder"}));
  EXPECT_EQ(report.rows[1].cost_micros, 6'000'000);
  EXPECT_EQ(report.rows[1].mgpu_ms, 1000 * 3 * kHour);
  EXPECT_EQ(report.total.cost_micros, 18'000'000);
}

TEST_F(MeteringTest, AWindowClipsRecordsExactly) {
  Prices("default: 1");
  const auto run = Start(1);
  clock_.Advance(4 * kHour);
  End(run);
  auto clipped = Records(kNov30 + kHour, kNov30 + 2 * kHour + 1);
  ASSERT_EQ(clipped.size(), 1u);
  EXPECT_EQ(clipped[0].mgpu_ms, 1000 * (kHour + 1));
  EXPECT_TRUE(Records(kNov30 + 5 * kHour, kNov30 + 6 * kHour).empty());
}

TEST_F(MeteringTest, BudgetAlertsOncePerThresholdAndEnforcement) {
  model::Budget b;
  b.tenant = "default";
  b.mgpu_ms = 1000 * kHour;  // one GPU-hour
  b.alert_percents = {50, 100};
  b.enforce = true;
  ASSERT_TRUE(meter_store_->SetBudget(b).has_value());
  const auto run = Start(1);
  clock_.Advance(kHour / 2);
  auto over = meter_->CheckBudgets(clock_.NowMs());
  ASSERT_TRUE(over.has_value()) << over.error().message;
  EXPECT_TRUE(over->empty());
  clock_.Advance(kHour / 2);
  over = meter_->CheckBudgets(clock_.NowMs());
  ASSERT_TRUE(over.has_value());
  ASSERT_TRUE(over->contains("default"));
  const model::Reason& reason = over->at("default");
  EXPECT_EQ(reason.code, model::ReasonCode::kOverBudget);
  EXPECT_EQ(reason.counts.at(std::string(model::kBudgetUsed)), 1'000'000);
  EXPECT_EQ(reason.counts.at(std::string(model::kBudgetLimit)), 1'000'000);
  EXPECT_EQ(reason.detail, "2026-11 GPU-hours");
  EXPECT_NE(model::RenderReason(reason).find("used 1.00 of 1.00 GPU-hours"), std::string::npos)
      << model::RenderReason(reason);
  ASSERT_TRUE(meter_->CheckBudgets(clock_.NowMs()).has_value());
  auto alerts = store_->ListAlerts(true);
  ASSERT_TRUE(alerts.has_value());
  ASSERT_EQ(alerts->size(), 2u);
  EXPECT_EQ((*alerts)[0].kind, model::AlertKind::kBudget);
  EXPECT_EQ((*alerts)[0].severity, model::AlertSeverity::kWarning);
  EXPECT_EQ((*alerts)[1].severity, model::AlertSeverity::kCritical);
  EXPECT_EQ((*alerts)[0].rule, "budget");
  EXPECT_EQ((*alerts)[0].subject, "default/2026-11/50");
  // Resolved by hand, a threshold is still not raised again this month.
  ASSERT_TRUE(store_->ResolveAlert((*alerts)[0].id, "admin", clock_.NowMs()).has_value());
  ASSERT_TRUE(meter_->CheckBudgets(clock_.NowMs()).has_value());
  EXPECT_EQ(store_->ListAlerts(false)->size(), 2u);
  // Not enforced: over, but nobody waits.
  b.enforce = false;
  ASSERT_TRUE(meter_store_->SetBudget(b).has_value());
  over = meter_->CheckBudgets(clock_.NowMs());
  ASSERT_TRUE(over.has_value());
  EXPECT_TRUE(over->empty());
  End(run);
}

}  // namespace
}  // namespace berth::server
