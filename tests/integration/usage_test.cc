// Metering through a real berthd on simulated GPUs: a run that succeeds, one
// that fails and one preempted by a higher-priority job each leave a usage
// record whose start and end are the run's own, and `berth usage -o json`
// totals equal the sum of /v1/usage/records exactly. An enforced budget
// makes a new low-priority job wait with OverBudget and raises an alert once.
#include <map>
#include <set>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

json Records(const Berthd& berthd) {
  auto reply = GetAllPages(berthd.http(), "/v1/usage/records?from=0&limit=5000", "records");
  EXPECT_EQ(reply.status, 200) << reply.text;
  return reply.body;
}

TEST_F(IntegrationTest, UsageRecordsAgreeWithRunsAndReportsReconcile) {
  Berthd& berthd = NewBerthd(AllInOne({"--stop-grace", "2s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  // 3.60 per GPU-hour is 1 micro-unit per GPU-millisecond: every cost below
  // is mgpu_ms / 1000 exactly.
  const std::string prices =
      "currency: EUR\ndefault: 1.00\nprices:\n  - {model: H100-80GB, per_gpu_hour: 3.60}\n";
  WriteFile(dir_ / "prices.yaml", prices);
  auto applied = Cli(berthd, {"price", "apply", (dir_ / "prices.yaml").string()});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  // Bad input names the field and changes nothing.
  auto bad = berthd.http().Post("/v1/prices", "prices: [{model: X, per_gpu_hour: -1}]",
                                "application/yaml");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "prices[0].per_gpu_hour") << bad.text;
  // Both attempts are in the audit trail: the apply and the refusal.
  const json audit = berthd.http().Get("/v1/audit?action=price.apply").body;
  ASSERT_EQ(audit["records"].size(), 2u) << audit.dump(2);
  EXPECT_EQ(audit["records"][0]["outcome"], "ok");
  EXPECT_EQ(audit["records"][0]["object"], "prices/v1");
  EXPECT_EQ(audit["records"][1]["outcome"].get<std::string>().rfind("denied", 0), 0u);
  auto shown = Cli(berthd, {"price", "show", "-o", "json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["version"], 1) << shown.out;

  auto ok = berthd.Submit(JobSpecJson("ok", Sh("sleep 1"), 1));
  auto failed = berthd.Submit(JobSpecJson("fails", Sh("sleep 1; exit 3"), 2));
  ASSERT_GT(ok, 0);
  ASSERT_GT(failed, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(ok, 30s));
  ASSERT_TRUE(berthd.WaitForTerminal(failed, 30s));
  EXPECT_EQ(berthd.JobState(ok), "Succeeded");
  EXPECT_EQ(berthd.JobState(failed), "Failed");

  // A low-priority job holds the whole node; a high-priority one preempts it.
  auto low = berthd.Submit(JobSpecJson("low", Sh("sleep 600"), 8, {{"priority", "low"}}));
  ASSERT_GT(low, 0);
  ASSERT_TRUE(berthd.WaitForState(low, "Running", 30s)) << berthd.JobState(low);
  std::this_thread::sleep_for(1s);
  auto high = berthd.Submit(JobSpecJson("high", Sh("sleep 1"), 8, {{"priority", "high"}}));
  ASSERT_GT(high, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(high, 60s)) << berthd.Job(high).dump(2);
  // The preempted job runs again (a second attempt); cancel it so every run
  // has ended and the records are final.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto j = berthd.Job(low);
        return j["state"] == "Running" && j["runs"].size() >= 2;
      },
      30s))
      << berthd.Job(low).dump(2);
  ASSERT_EQ(berthd.http().Post("/v1/jobs/" + std::to_string(low) + "/cancel", "").status, 200);
  ASSERT_TRUE(berthd.WaitForTerminal(low, 30s));

  // Every run, as the jobs report it.
  std::map<std::string, json> runs;
  for (auto id : {ok, failed, low, high}) {
    const json job = berthd.Job(id);  // bound first: GCC 12 lacks P2718
    for (const auto& r : job["runs"]) runs[r["run_id"].get<std::string>()] = r;
  }
  ASSERT_GE(runs.size(), 5u);

  const json records = Records(berthd);
  ASSERT_TRUE(records.is_object());
  ASSERT_EQ(records["records"].size(), runs.size()) << records.dump(2);
  std::int64_t sum_mgpu_ms = 0;
  std::int64_t sum_cost = 0;
  std::set<std::string> outcomes;
  for (const auto& rec : records["records"]) {
    const std::string run_id = rec["run_id"];
    ASSERT_TRUE(runs.contains(run_id)) << run_id;
    const json& run = runs[run_id];
    EXPECT_EQ(rec["start_ms"], run["started_at_ms"]) << run_id;
    EXPECT_EQ(rec["end_ms"], run["finished_at_ms"]) << run_id;
    EXPECT_FALSE(rec["open"].get<bool>());
    const std::int64_t gpus = static_cast<std::int64_t>(run["gpus"].size());
    const std::int64_t ms =
        run["finished_at_ms"].get<std::int64_t>() - run["started_at_ms"].get<std::int64_t>();
    EXPECT_EQ(rec["mgpu_ms"], gpus * 1000 * ms) << run_id;
    EXPECT_EQ(rec["cost_micros"], gpus * ms) << run_id;
    EXPECT_EQ(rec["gpu_model"], "H100-80GB");
    EXPECT_EQ(rec["tenant"], "default");
    EXPECT_EQ(rec["pool"], "default");
    EXPECT_EQ(rec["gpu_uuids"], run["gpu_uuids"]);
    EXPECT_LE(rec["used_mgpu_ms"].get<std::int64_t>(), rec["mgpu_ms"].get<std::int64_t>());
    sum_mgpu_ms += rec["mgpu_ms"].get<std::int64_t>();
    sum_cost += rec["cost_micros"].get<std::int64_t>();
    outcomes.insert(rec["outcome"].get<std::string>());
  }
  EXPECT_TRUE(outcomes.contains("succeeded")) << json(outcomes).dump();
  EXPECT_TRUE(outcomes.contains("preempted")) << json(outcomes).dump();
  EXPECT_TRUE(outcomes.contains("cancelled")) << json(outcomes).dump();
  EXPECT_EQ(records["total"]["mgpu_ms"], sum_mgpu_ms);
  EXPECT_EQ(records["total"]["cost_micros"], sum_cost);

  // The report, through the CLI, in several groupings: the same totals.
  for (const std::vector<std::string>& by : {std::vector<std::string>{"tenant"},
                                             {"queue", "model"},
                                             {"day"},
                                             {"user", "node", "month"}}) {
    std::vector<std::string> args{"usage", "--from", "0", "-o", "json"};
    for (const auto& b : by) {
      args.push_back("--by");
      args.push_back(b);
    }
    auto usage = Cli(berthd, args);
    ASSERT_EQ(usage.exit_code, 0) << usage.err;
    const json report = json::parse(usage.out);
    EXPECT_EQ(report["currency"], "EUR");
    EXPECT_EQ(report["total"]["mgpu_ms"], sum_mgpu_ms) << usage.out;
    EXPECT_EQ(report["total"]["cost_micros"], sum_cost) << usage.out;
    EXPECT_EQ(report["total"]["runs"], static_cast<std::int64_t>(runs.size()));
    EXPECT_TRUE(report["telemetry"].get<bool>()) << usage.out;
    std::int64_t rows_mgpu_ms = 0;
    std::int64_t rows_cost = 0;
    for (const auto& row : report["rows"]) {
      rows_mgpu_ms += row["mgpu_ms"].get<std::int64_t>();
      rows_cost += row["cost_micros"].get<std::int64_t>();
    }
    EXPECT_EQ(rows_mgpu_ms, sum_mgpu_ms);
    EXPECT_EQ(rows_cost, sum_cost);
  }
  auto csv = Cli(berthd, {"usage", "--from", "0", "--by", "tenant", "-o", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find(std::to_string(sum_mgpu_ms)), std::string::npos) << csv.out;
  auto table = Cli(berthd, {"usage", "--from", "0"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("IDLE RUNS"), std::string::npos) << table.out;
  auto bad_by = Cli(berthd, {"usage", "--by", "week"});
  EXPECT_NE(bad_by.exit_code, 0);
  EXPECT_NE(bad_by.err.find("week"), std::string::npos) << bad_by.err;
}

TEST_F(IntegrationTest, EnforcedBudgetHoldsNewLowPriorityJobsAndAlertsOnce) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  // 0.0001 GPU-hours is 0.36 GPU-seconds: one second of one GPU is over it.
  auto set = Cli(berthd, {"budget", "set", "default", "--gpu-hours", "0.0001", "--alert", "50,100",
                          "--enforce"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  auto unknown = Cli(berthd, {"budget", "set", "nobody", "--gpu-hours", "5"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("nobody"), std::string::npos) << unknown.err;

  const json audit = berthd.http().Get("/v1/audit?action=budget.set").body;
  ASSERT_EQ(audit["records"].size(), 2u) << audit.dump(2);
  EXPECT_EQ(audit["records"][0]["object"], "budget/default");
  EXPECT_EQ(audit["records"][0]["outcome"], "ok");
  EXPECT_EQ(audit["records"][1]["outcome"].get<std::string>().rfind("denied", 0), 0u);

  auto first = berthd.Submit(JobSpecJson("spend", Sh("sleep 1"), 1));
  ASSERT_GT(first, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(first, 30s));
  // berthd checks budgets at most once a second: the critical (100%) alert
  // is raised by the same check that starts holding the tenant's jobs.
  ASSERT_TRUE(WaitFor(
      [&] {
        const json alerts = berthd.http().Get("/v1/alerts").body;
        for (const auto& a : alerts["alerts"]) {
          if (a["kind"] == "budget" && a["severity"] == "critical") return true;
        }
        return false;
      },
      20s));

  auto low = berthd.Submit(JobSpecJson("low", Sh("true"), 1, {{"priority", "low"}}));
  ASSERT_GT(low, 0);
  ASSERT_TRUE(WaitFor([&] { return berthd.Job(low)["reason"]["code"] == "OverBudget"; }, 20s))
      << berthd.Job(low).dump(2);
  const json reason = berthd.Job(low)["reason"];
  EXPECT_EQ(reason["counts"]["budget_limit_micros"], 100);
  EXPECT_GE(reason["counts"]["budget_used_micros"].get<std::int64_t>(), 100);
  EXPECT_NE(reason["message"].get<std::string>().find("GPU-hours"), std::string::npos);
  auto why = berthd.http().Get("/v1/jobs/" + std::to_string(low) + "/why?lang=zh");
  EXPECT_NE(why.text.find("预算"), std::string::npos) << why.text;

  // A normal-priority job of the same tenant still runs.
  auto normal = berthd.Submit(JobSpecJson("normal", Sh("true"), 1));
  ASSERT_TRUE(berthd.WaitForTerminal(normal, 30s));
  EXPECT_EQ(berthd.JobState(normal), "Succeeded");
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(berthd.JobState(low), "Pending");

  // One alert per threshold this month, however many passes ran.
  const json alerts = berthd.http().Get("/v1/alerts").body;
  std::map<std::string, int> budget_alerts;
  for (const auto& a : alerts["alerts"]) {
    if (a["kind"] == "budget") ++budget_alerts[a["severity"].get<std::string>()];
  }
  EXPECT_EQ(budget_alerts["warning"], 1) << alerts.dump(2);
  EXPECT_EQ(budget_alerts["critical"], 1) << alerts.dump(2);
  auto list = Cli(berthd, {"budget", "list", "-o", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const json budgets = json::parse(list.out)["budgets"];
  ASSERT_EQ(budgets.size(), 1u);
  EXPECT_TRUE(budgets[0]["over"].get<bool>());
  EXPECT_EQ(budgets[0]["crossed"], json({50, 100}));

  // A larger budget lets it run.
  ASSERT_EQ(Cli(berthd, {"budget", "set", "default", "--gpu-hours", "100", "--enforce"}).exit_code,
            0);
  ASSERT_TRUE(berthd.WaitForTerminal(low, 30s)) << berthd.Job(low).dump(2);
  EXPECT_EQ(berthd.JobState(low), "Succeeded");
}

}  // namespace
}  // namespace berth::it
