// The alert engine on a real SqliteStore with a ManualClock: an alert is
// raised once per (rule, subject) while its condition holds and resolved by
// Berth when it clears; queue_wait names the oldest job; idle_allocation
// reads the function it is given; the webhook outbox retries with backoff
// against a real loopback receiver.
#include "meter/alerting.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "control/lifecycle.h"
#include "store/sqlite_store.h"

namespace berth::server {
namespace {

constexpr TimeMs kStart = 1'795'996'800'000;

class AlertingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-alerts-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = store::SqliteStore::Open(dir_, clock_.NowMs());
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    std::filesystem::create_directory(dir_ / "secrets");
    router_ = std::make_unique<AlertRouter>(*store_, dir_ / "secrets");
    ASSERT_TRUE(router_->Load().has_value());
    engine_ = std::make_unique<AlertEngine>(*store_, *router_, clock_);
  }
  void TearDown() override {
    engine_.reset();
    router_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Rules(const std::string& yaml) {
    auto v = router_->Apply(yaml, "admin", "", clock_.NowMs());
    ASSERT_TRUE(v.has_value()) << v.error().field << ": " << v.error().message;
  }
  void Node(const std::string& name) {
    model::NodeInfo n;
    n.name = name;
    n.cpus = 8;
    ASSERT_TRUE(store_->UpsertNode(n, clock_.NowMs()).has_value());
    ASSERT_TRUE(store_->SetNodeState(name, model::NodeState::kReady, clock_.NowMs()).has_value());
  }
  std::int64_t Submit(const std::string& name) {
    model::JobSpec s;
    s.name = name;
    s.command = {"true"};
    s.resources.gpus = 1;
    auto id = store_->CreateJob(s, clock_.NowMs(), "alice");
    EXPECT_TRUE(id.has_value());
    return id.value_or(0);
  }
  void Evaluate() {
    auto s = engine_->Evaluate(clock_.NowMs());
    ASSERT_TRUE(s.has_value()) << s.error().message;
  }
  std::vector<store::Alert> All() { return store_->ListAlerts(false).value(); }

  std::filesystem::path dir_;
  ManualClock clock_{kStart};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<AlertRouter> router_;
  std::unique_ptr<AlertEngine> engine_;
};

TEST_F(AlertingTest, TwoAppliesOnTheSameBaseOneWinsAndTheOtherIsRefusedNamingTheWinner) {
  Rules("rules: [{name: down, kind: node_not_ready, for: 2m}]");  // version 1
  std::atomic<int> applied{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> both;
  for (int i = 0; i < 2; ++i) {
    both.emplace_back([&, i] {
      auto v = router_->Apply(
          fmt::format("rules: [{{name: down, kind: node_not_ready, for: {}m}}]", 3 + i),
          fmt::format("admin{}", i), "", clock_.NowMs(), 1);
      if (v) {
        applied.fetch_add(1);
      } else {
        EXPECT_EQ(v.error().code, Code::kFailedPrecondition);
        EXPECT_EQ(v.error().field, "base_version");
        EXPECT_NE(v.error().message.find("version 2 was applied by admin"), std::string::npos)
            << v.error().message;
        refused.fetch_add(1);
      }
    });
  }
  for (auto& t : both) t.join();
  EXPECT_EQ(applied.load(), 1);
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(router_->version(), 2);
  EXPECT_TRUE(router_->Apply("rules: []", "admin", "", clock_.NowMs(), 2).has_value());
  EXPECT_EQ(router_->version(), 3);
}

TEST_F(AlertingTest, NodeNotReadyRaisedOnceAndResolvedWhenReady) {
  Rules("rules: [{name: down, kind: node_not_ready, for: 2m, severity: critical}]");
  Node("n1");
  Node("n2");
  ASSERT_TRUE(store_->SetNodeState("n1", model::NodeState::kNotReady, clock_.NowMs()).has_value());
  clock_.Advance(60'000);
  Evaluate();
  EXPECT_TRUE(All().empty()) << "NotReady for 1m of the 2m the rule asks";
  clock_.Advance(61'000);
  Evaluate();
  Evaluate();
  clock_.Advance(5'000);
  Evaluate();
  auto alerts = All();
  ASSERT_EQ(alerts.size(), 1U);
  EXPECT_EQ(alerts[0].kind, model::AlertKind::kNodeNotReady);
  EXPECT_EQ(alerts[0].rule, "down");
  EXPECT_EQ(alerts[0].subject, "n1");
  EXPECT_EQ(alerts[0].severity, model::AlertSeverity::kCritical);
  EXPECT_EQ(alerts[0].node, "n1");
  EXPECT_FALSE(alerts[0].resolved_ms.has_value());

  ASSERT_TRUE(store_->SetNodeState("n1", model::NodeState::kReady, clock_.NowMs()).has_value());
  clock_.Advance(1'000);
  Evaluate();
  alerts = All();
  ASSERT_EQ(alerts.size(), 1U);
  EXPECT_EQ(alerts[0].resolved_ms, clock_.NowMs());
  EXPECT_EQ(alerts[0].resolved_by, "berth");

  // Down again: a new alert, the old one stays resolved.
  ASSERT_TRUE(store_->SetNodeState("n1", model::NodeState::kNotReady, clock_.NowMs()).has_value());
  clock_.Advance(121'000);
  Evaluate();
  alerts = All();
  ASSERT_EQ(alerts.size(), 2U);
  EXPECT_FALSE(alerts[1].resolved_ms.has_value());
}

TEST_F(AlertingTest, DisablingTheRuleResolvesItsAlerts) {
  Rules("rules: [{name: down, kind: node_not_ready, for: 1s}]");
  Node("n1");
  ASSERT_TRUE(store_->SetNodeState("n1", model::NodeState::kNotReady, clock_.NowMs()).has_value());
  clock_.Advance(2'000);
  Evaluate();
  ASSERT_EQ(store_->ListAlerts(true)->size(), 1U);
  Rules("rules: [{name: down, kind: node_not_ready, for: 1s, enabled: false}]");
  Evaluate();
  EXPECT_TRUE(store_->ListAlerts(true)->empty());
  EXPECT_EQ(All().at(0).resolved_by, "berth");
}

TEST_F(AlertingTest, QueueWaitNamesTheOldestJobPerQueue) {
  Rules("rules: [{name: waits, kind: queue_wait, queue: '*', threshold: 30m}]");
  const auto first = Submit("first");
  clock_.Advance(10 * 60'000);
  const auto second = Submit("second");
  clock_.Advance(21 * 60'000);  // first waited 31m, second 21m
  Evaluate();
  auto alerts = All();
  ASSERT_EQ(alerts.size(), 1U);
  EXPECT_EQ(alerts[0].kind, model::AlertKind::kQueueWait);
  EXPECT_EQ(alerts[0].subject, "default/default");
  EXPECT_NE(alerts[0].message.find("job " + std::to_string(first) + " has waited 31m"),
            std::string::npos)
      << alerts[0].message;
  EXPECT_NE(alerts[0].message.find("reason"), std::string::npos) << alerts[0].message;
  // Still over the threshold: no second alert for the queue.
  clock_.Advance(60'000);
  Evaluate();
  EXPECT_EQ(All().size(), 1U);
  // The oldest leaves; the next one has waited 22m < 30m: resolved.
  ASSERT_TRUE(control::CancelJob(*store_, first, "admin", clock_.NowMs()).has_value());
  Evaluate();
  alerts = All();
  ASSERT_EQ(alerts.size(), 1U);
  EXPECT_EQ(alerts[0].resolved_by, "berth");
  clock_.Advance(9 * 60'000);  // second: 31m
  Evaluate();
  alerts = All();
  ASSERT_EQ(alerts.size(), 2U);
  EXPECT_NE(alerts[1].message.find("job " + std::to_string(second)), std::string::npos);
}

TEST_F(AlertingTest, QueueWaitForAnotherQueueStaysQuiet) {
  Rules("rules: [{name: waits, kind: queue_wait, queue: vision/training, threshold: 1m}]");
  Submit("j");
  clock_.Advance(5 * 60'000);
  Evaluate();
  EXPECT_TRUE(All().empty());
}

// Utilization samples per run, as telemetry would keep them: the input the
// idle rule is evaluated through.
struct Samples {
  std::map<std::string, std::vector<std::pair<TimeMs, int>>> by_run;  // run -> (time, percent)
  Result<std::vector<IdleAllocation>> Idle(TimeMs now, const model::AlertRule& rule) const {
    std::vector<IdleAllocation> out;
    for (const auto& [run, samples] : by_run) {
      // Idle since the first sample after the last busy one.
      std::optional<TimeMs> since;
      for (const auto& [t, pct] : samples) {
        if (t > now) break;
        if (pct >= rule.threshold_percent) {
          since.reset();
        } else if (!since) {
          since = t;
        }
      }
      if (since) out.push_back({7, run, "vision", "n1", {0, 1}, *since});
    }
    return out;
  }
};

TEST_F(AlertingTest, IdleAllocationFromTheInputFunction) {
  Rules("rules: [{name: idle, kind: idle_allocation, threshold: 5, window: 30m}]");
  Samples samples;
  engine_->set_idle_source(
      [&samples](TimeMs now, const model::AlertRule& rule) { return samples.Idle(now, rule); });
  for (int m = 0; m <= 40; ++m) {
    samples.by_run["7.0.0"].push_back({kStart + m * 60'000, m < 5 ? 90 : 2});  // idle from 5m
    samples.by_run["8.0.0"].push_back({kStart + m * 60'000, 50});              // busy
  }
  clock_.Set(kStart + 30 * 60'000);  // idle for 25m
  Evaluate();
  EXPECT_TRUE(All().empty());
  clock_.Set(kStart + 36 * 60'000);  // 31m
  Evaluate();
  auto alerts = All();
  ASSERT_EQ(alerts.size(), 1U);
  EXPECT_EQ(alerts[0].kind, model::AlertKind::kIdleAllocation);
  EXPECT_EQ(alerts[0].subject, "7.0.0");
  EXPECT_NE(alerts[0].message.find("under 5%"), std::string::npos) << alerts[0].message;
  // Busy again: resolved.
  for (auto& [t, pct] : samples.by_run["7.0.0"]) {
    if (t >= kStart + 37 * 60'000) pct = 80;
  }
  clock_.Set(kStart + 38 * 60'000);
  Evaluate();
  EXPECT_TRUE(store_->ListAlerts(true)->empty());
  EXPECT_EQ(All().at(0).resolved_by, "berth");
}

TEST(ServiceSloBurn, IsTheBadShareOverTheErrorBudget) {
  ServiceSloFigures f;
  f.availability_ppm = 999'000;  // a budget of 0.1%
  f.requests = 9;
  f.errors = 9;
  EXPECT_FALSE(BurnOf(f).has_value());  // too few requests to say
  f.requests = 1000;
  f.errors = 1;
  EXPECT_EQ(BurnOf(f)->availability_milli, 1000);  // exactly at the budget's rate
  f.errors = 20;
  EXPECT_EQ(BurnOf(f)->availability_milli, 20'000);
  EXPECT_EQ(BurnOf(f)->latency_milli, 0);  // no latency target
  f.latency_p95_ms = 500;
  f.windows = 100;
  f.windows_missed = 1;
  EXPECT_EQ(BurnOf(f)->latency_milli, 10'000);
  f.availability_ppm = 1'000'000;  // no budget: any failure burns it
  EXPECT_GE(BurnOf(f)->availability_milli, std::int64_t{1'000'000'000'000});
  f.errors = 0;
  EXPECT_EQ(BurnOf(f)->availability_milli, 0);
}

TEST_F(AlertingTest, ServiceSloFiresOnABurnOverTheThresholdAndResolvesWhenItEases) {
  Rules("rules: [{name: slo, kind: service_slo, threshold: 10, window: 5m}]");
  std::vector<ServiceSloFigures> figures;
  std::int64_t asked_window = 0;
  engine_->set_slo_source([&](TimeMs, std::int64_t window_ms) {
    asked_window = window_ms;
    return Result<std::vector<ServiceSloFigures>>(figures);
  });
  ServiceSloFigures coder;
  coder.tenant = "ml";
  coder.service = "coder";
  coder.availability_ppm = 999'000;
  coder.latency_p95_ms = 800;
  coder.requests = 2000;
  coder.errors = 10;  // 5x: under the threshold
  coder.windows = 150;
  ServiceSloFigures quiet = coder;
  quiet.service = "quiet";
  quiet.requests = 5;  // too few to judge, though all failed
  quiet.errors = 5;
  figures = {coder, quiet};
  Evaluate();
  EXPECT_EQ(asked_window, 300'000);
  EXPECT_TRUE(All().empty());

  figures[0].errors = 40;  // 20x
  Evaluate();
  auto alerts = All();
  ASSERT_EQ(alerts.size(), 1U);
  EXPECT_EQ(alerts[0].kind, model::AlertKind::kServiceSlo);
  EXPECT_EQ(alerts[0].subject, "ml/coder");
  EXPECT_EQ(alerts[0].message,
            "service ml/coder burns its error budget 20.0x (threshold 10.0x) over the last 5m: 40 "
            "of 2000 requests answered 5xx against availability 99.9%");
  Evaluate();  // still burning: the same alert
  EXPECT_EQ(All().size(), 1U);

  // Errors over, latency now: a slow window in 50 burns 20x too.
  figures[0].errors = 0;
  figures[0].windows_missed = 3;
  Evaluate();
  EXPECT_EQ(All().size(), 1U);
  EXPECT_EQ(store_->ListAlerts(true)->size(), 1U);

  figures[0].windows_missed = 0;
  Evaluate();
  EXPECT_TRUE(store_->ListAlerts(true)->empty());
  EXPECT_EQ(All().at(0).resolved_by, "berth");

  // A rule for one service ignores the others.
  Rules("rules: [{name: slo, kind: service_slo, service: ml/other, threshold: 2}]");
  figures[0].errors = 500;
  Evaluate();
  EXPECT_TRUE(store_->ListAlerts(true)->empty());
}

TEST_F(AlertingTest, GpuAndBudgetRoutedByTheirRules) {
  Rules(R"(sinks: [{name: ops, url: 'http://127.0.0.1:9/x'}]
rules:
  - {name: gpus, kind: gpu_health, severity: warning, sinks: [ops]}
  - {name: money, kind: budget, enabled: false})");
  store::Alert a;
  a.subject = "n1/3";
  a.message = "Xid 79";
  a.raised_ms = clock_.NowMs();
  auto id = router_->Raise(model::AlertRuleKind::kGpuHealth, a, store::AlertDedupe::kOpen);
  ASSERT_TRUE(id.has_value() && id->has_value());
  auto again = router_->Raise(model::AlertRuleKind::kGpuHealth, a, store::AlertDedupe::kOpen);
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->has_value()) << "an open alert for n1/3 exists";
  auto budget = router_->Raise(model::AlertRuleKind::kBudget, a, store::AlertDedupe::kEver);
  ASSERT_TRUE(budget.has_value());
  EXPECT_FALSE(budget->has_value()) << "the budget rule is disabled";
  auto alerts = All();
  ASSERT_EQ(alerts.size(), 1U);
  EXPECT_EQ(alerts[0].kind, model::AlertKind::kGpuHardware);
  EXPECT_EQ(alerts[0].severity, model::AlertSeverity::kWarning);
  EXPECT_EQ(alerts[0].sinks, std::vector<std::string>{"ops"});
  auto due = store_->DueDeliveries(clock_.NowMs(), 10);
  ASSERT_EQ(due->size(), 1U);
  EXPECT_EQ(due->at(0).event, "raised");
  // A manual resolve queues the resolved event.
  ASSERT_TRUE(store_->ResolveAlert(**id, "admin", clock_.NowMs()).value());
  EXPECT_FALSE(store_->ResolveAlert(**id, "admin", clock_.NowMs()).value());
  due = store_->DueDeliveries(clock_.NowMs(), 10);
  ASSERT_EQ(due->size(), 2U);
  EXPECT_EQ(due->at(1).event, "resolved");
}

TEST(AlertDelivererBackoff, DoublesFromOneSecondToFiveMinutes) {
  AlertDeliverer::Options o;
  EXPECT_EQ(AlertDeliverer::Backoff(1, o), 1000);
  EXPECT_EQ(AlertDeliverer::Backoff(2, o), 2000);
  EXPECT_EQ(AlertDeliverer::Backoff(5, o), 16000);
  EXPECT_EQ(AlertDeliverer::Backoff(9, o), 256000);
  EXPECT_EQ(AlertDeliverer::Backoff(10, o), 300000);
  EXPECT_EQ(AlertDeliverer::Backoff(19, o), 300000);
}

TEST_F(AlertingTest, DeliveryRetriesUntilTheReceiverAccepts) {
  httplib::Server receiver;
  std::mutex mu;
  std::vector<nlohmann::json> bodies;
  std::vector<std::string> auth;
  std::atomic<int> calls{0};
  receiver.Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    bodies.push_back(nlohmann::json::parse(req.body, nullptr, false));
    auth.push_back(req.get_header_value("Authorization"));
    res.status = ++calls <= 2 ? 500 : 200;
  });
  const int port = receiver.bind_to_any_port("127.0.0.1");
  std::thread serve([&] { receiver.listen_after_bind(); });
  while (!receiver.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto token = dir_ / "secrets" / "token";
  { std::ofstream(token) << "s3cret\n"; }
  Rules(fmt::format(R"(sinks: [{{name: ops, url: 'http://127.0.0.1:{}/hook', secret_file: {},
         send_secret_over_http: true}}]
rules: [{{name: gpus, kind: gpu_health, sinks: [ops]}}])",
                    port, token.string()));
  store::Alert a;
  a.subject = "n1/0";
  a.node = "n1";
  a.message = "Xid 48";
  a.raised_ms = clock_.NowMs();
  ASSERT_TRUE(router_->Raise(model::AlertRuleKind::kGpuHealth, a, store::AlertDedupe::kOpen));
  AlertDeliverer::Options o;
  o.version = "test";
  o.server = "http://berthd";
  AlertDeliverer deliverer(*store_, *router_, clock_, o);
  EXPECT_EQ(deliverer.DeliverDue(clock_.NowMs()).value(), 1);  // 500
  EXPECT_EQ(deliverer.DeliverDue(clock_.NowMs()).value(), 0) << "backing off for 1s";
  clock_.Advance(1'000);
  EXPECT_EQ(deliverer.DeliverDue(clock_.NowMs()).value(), 1);  // 500
  clock_.Advance(1'000);
  EXPECT_EQ(deliverer.DeliverDue(clock_.NowMs()).value(), 0) << "backing off for 2s";
  clock_.Advance(1'000);
  EXPECT_EQ(deliverer.DeliverDue(clock_.NowMs()).value(), 1);  // 200
  clock_.Advance(600'000);
  EXPECT_EQ(deliverer.DeliverDue(clock_.NowMs()).value(), 0) << "delivered: nothing left";
  receiver.stop();
  serve.join();
  ASSERT_EQ(bodies.size(), 3U);
  EXPECT_EQ(bodies[2]["event"], "raised");
  EXPECT_EQ(bodies[2]["alert"]["subject"], "n1/0");
  EXPECT_EQ(bodies[2]["alert"]["kind"], "gpu_hardware");
  EXPECT_EQ(bodies[2]["berth"]["version"], "test");
  EXPECT_EQ(auth[2], "Bearer s3cret");
  auto list = store_->ListDeliveries(10, std::nullopt).value();
  ASSERT_EQ(list.size(), 1U);
  EXPECT_EQ(list[0].attempts, 3);
  EXPECT_TRUE(list[0].delivered_ms.has_value());
}

TEST_F(AlertingTest, DeliveryGivesUpAfterTheLastAttempt) {
  Rules(R"(sinks: [{name: ops, url: 'http://127.0.0.1:9/nothing-listens', timeout: 1s}]
rules: [{name: gpus, kind: gpu_health, sinks: [ops]}])");
  store::Alert a;
  a.subject = "n1/0";
  a.message = "Xid 48";
  a.raised_ms = clock_.NowMs();
  ASSERT_TRUE(router_->Raise(model::AlertRuleKind::kGpuHealth, a, store::AlertDedupe::kOpen));
  AlertDeliverer::Options o;
  o.max_attempts = 3;
  AlertDeliverer deliverer(*store_, *router_, clock_, o);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(deliverer.DeliverDue(clock_.NowMs()).has_value());
    clock_.Advance(10'000);
  }
  auto list = store_->ListDeliveries(10, std::nullopt).value();
  ASSERT_EQ(list.size(), 1U);
  EXPECT_EQ(list[0].attempts, 3);
  EXPECT_TRUE(list[0].failed);
  EXPECT_FALSE(list[0].last_error.empty());
}

}  // namespace
}  // namespace berth::server
