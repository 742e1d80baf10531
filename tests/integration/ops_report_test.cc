// The operations report through a real berthd on simulated GPUs: runs that
// succeed, fail and are preempted; the report's allocated GPU-time and cost
// equal `berth usage`'s totals for the same window exactly, its queue-wait
// figures equal those computed from the jobs' timelines, an admin's cordon
// is an intervention (a user cancelling its own job is not), and a member
// of one tenant sees that tenant only, without fleet-wide figures.
#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t FirstEvent(const json& job, const std::string& event) {
  for (const auto& e : job["timeline"]) {
    if (e["event"] == event) return e["time_ms"].get<std::int64_t>();
  }
  return -1;
}

TEST_F(IntegrationTest, OpsReportAgreesWithUsageTimelinesAndAudit) {
  Berthd& berthd = NewBerthd(AllInOne({"--stop-grace", "2s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  const std::int64_t from = NowMs() - 1;
  ASSERT_EQ(admin.Post("/v1/policy", kRedBlue).status, 201);
  ASSERT_EQ(admin
                .Post("/v1/prices",
                      "currency: EUR\nprices:\n  - {model: H100-80GB, per_gpu_hour: 3.60}\n",
                      "application/yaml")
                .status,
            201);
  auto in = [](const std::string& tenant) { return json{{"tenant", tenant}, {"queue", "main"}}; };
  auto in_prio = [](const std::string& tenant, const std::string& priority) {
    return json{{"tenant", tenant}, {"queue", "main"}, {"priority", priority}};
  };
  const auto ok = berthd.Submit(JobSpecJson("ok", Sh("sleep 1"), 1, in("blue")));
  const auto failed = berthd.Submit(JobSpecJson("fails", Sh("sleep 1; exit 3"), 2, in("red")));
  ASSERT_GT(ok, 0);
  ASSERT_GT(failed, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(ok, 30s));
  ASSERT_TRUE(berthd.WaitForTerminal(failed, 30s));
  ASSERT_EQ(berthd.JobState(failed), "Failed");

  // A low-priority job fills the node; a high-priority one preempts it.
  const auto low = berthd.Submit(JobSpecJson("low", Sh("sleep 600"), 8, in_prio("red", "low")));
  ASSERT_GT(low, 0);
  ASSERT_TRUE(berthd.WaitForState(low, "Running", 30s)) << berthd.JobState(low);
  std::this_thread::sleep_for(1s);
  const auto high = berthd.Submit(JobSpecJson("high", Sh("sleep 1"), 8, in_prio("red", "high")));
  ASSERT_GT(high, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(high, 60s)) << berthd.Job(high).dump(2);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto j = berthd.Job(low);
        return j["state"] == "Running" && j["runs"].size() >= 2;
      },
      30s))
      << berthd.Job(low).dump(2);
  // Cancelled by its own submitter: not an intervention.
  ASSERT_EQ(admin.Post("/v1/jobs/" + std::to_string(low) + "/cancel", "").status, 200);
  ASSERT_TRUE(berthd.WaitForTerminal(low, 30s));

  // An admin cordons and uncordons the node.
  const std::string node = berthd.Nodes().at(0).at("name");
  ASSERT_EQ(admin.Post("/v1/nodes/" + node + "/cordon?reason=maintenance", "").status, 200);
  ASSERT_EQ(admin.Post("/v1/nodes/" + node + "/uncordon", "").status, 200);
  const std::int64_t to = NowMs() + 1;
  const std::string window = "?from=" + std::to_string(from) + "&to=" + std::to_string(to);

  auto cli = Cli(berthd, {"report", "ops", "--from", std::to_string(from), "--to",
                          std::to_string(to), "-o", "json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  const json report = json::parse(cli.out);
  auto usage = Cli(berthd, {"usage", "--from", std::to_string(from), "--to", std::to_string(to),
                            "--by", "tenant", "-o", "json"});
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  const json totals = json::parse(usage.out);

  // Allocation and cost: exactly berth usage's, overall and per tenant.
  EXPECT_EQ(report["currency"], "EUR");
  EXPECT_EQ(report["total"]["allocated_mgpu_ms"], totals["total"]["mgpu_ms"]) << report.dump(2);
  EXPECT_EQ(report["total"]["cost_micros"], totals["total"]["cost_micros"]);
  EXPECT_GT(report["total"]["allocated_mgpu_ms"].get<std::int64_t>(), 8 * 1000 * 1000);
  std::map<std::string, json> by_tenant;
  for (const auto& t : report["tenants"]) by_tenant[t["tenant"].get<std::string>()] = t;
  for (const auto& row : totals["rows"]) {
    const std::string t = row["key"]["tenant"];
    ASSERT_TRUE(by_tenant.contains(t)) << t;
    EXPECT_EQ(by_tenant[t]["allocated_mgpu_ms"], row["mgpu_ms"]) << t;
    EXPECT_EQ(by_tenant[t]["cost_micros"], row["cost_micros"]) << t;
  }
  EXPECT_EQ(report["fleet"]["gpus"], 8);
  // berthd wires the telemetry store: the report is measured (how much was
  // sampled depends on the agents' --telemetry-interval).
  EXPECT_TRUE(report["measured"].get<bool>());
  EXPECT_TRUE(report["total"]["measured"].is_object()) << report["total"].dump();

  // Queue wait: first Started minus Submitted, from each job's timeline.
  std::vector<std::int64_t> waits;
  for (auto id : {ok, failed, low, high}) {
    const json job = berthd.Job(id);
    const auto started = FirstEvent(job, "Started");
    const auto submitted = FirstEvent(job, "Submitted");
    ASSERT_GE(started, 0) << job.dump(2);
    ASSERT_GE(submitted, 0) << job.dump(2);
    waits.push_back(started - submitted);
  }
  std::sort(waits.begin(), waits.end());
  std::int64_t total_wait = 0;
  for (auto w : waits) total_wait += w;
  const json& wait = report["total"]["wait"];
  EXPECT_EQ(wait["started"], 4);
  EXPECT_EQ(wait["total_wait_ms"], total_wait) << wait.dump();
  EXPECT_EQ(wait["p95_wait_ms"], waits.back());  // ceil(0.95 x 4) = the 4th
  EXPECT_EQ(wait["waiting"], 0);

  // Outcomes: 1 succeeded + high succeeded, 1 failed (user_code), 1
  // preempted, 1 cancelled.
  const json& total = report["total"];
  EXPECT_EQ(total["runs_finished"], 5) << total.dump(2);
  EXPECT_EQ(total["runs_failed"], 1);
  EXPECT_EQ(total["outcomes"]["succeeded"], 2);
  EXPECT_EQ(total["outcomes"]["preempted"], 1);
  EXPECT_EQ(total["outcomes"]["cancelled"], 1);
  EXPECT_EQ(total["failures_by_class"]["user_code"], 1);
  EXPECT_EQ(total["evictions"]["preempted"], 1);
  ASSERT_EQ(report["evictions"].size(), 1u);
  const json& ev = report["evictions"][0];
  const json low_job = berthd.Job(low);
  const json& first_run = low_job["runs"][0];
  EXPECT_EQ(ev["run_id"], first_run["run_id"]);
  EXPECT_EQ(ev["lost_since"], "start");
  EXPECT_EQ(ev["lost_mgpu_ms"], 8000 * (first_run["finished_at_ms"].get<std::int64_t>() -
                                        first_run["started_at_ms"].get<std::int64_t>()));
  EXPECT_EQ(by_tenant["red"]["lost_mgpu_ms"], ev["lost_mgpu_ms"]);

  // Interventions: the policy, the prices, the cordon and the uncordon;
  // the owner's cancel is not one.
  const json& acts = report["interventions_by_action"];
  EXPECT_EQ(acts.value("node.cordon", 0), 1) << acts.dump();
  EXPECT_EQ(acts.value("node.uncordon", 0), 1) << acts.dump();
  EXPECT_EQ(acts.value("policy.apply", 0), 1) << acts.dump();
  EXPECT_EQ(acts.value("price.apply", 0), 1) << acts.dump();
  EXPECT_FALSE(acts.contains("job.cancel")) << acts.dump();
  bool saw_cordon = false;
  for (const auto& i : report["interventions"]) {
    if (i["action"] == "node.cordon") {
      EXPECT_EQ(i["object"], "node/" + node);
      saw_cordon = true;
    }
  }
  EXPECT_TRUE(saw_cordon);

  // Markdown and HTML through the CLI, to a file.
  for (const char* format : {"markdown", "html"}) {
    const auto out = dir_ / (std::string("report.") + format);
    auto r = Cli(berthd, {"report", "ops", "--from", std::to_string(from), "--to",
                          std::to_string(to), "-o", format, "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string text = ReadFile(out);
    EXPECT_NE(text.find("Manual interventions"), std::string::npos) << text;
    EXPECT_NE(text.find("node/" + node), std::string::npos) << text;
  }
  auto bad = Cli(berthd, {"report", "ops", "--from", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--from"), std::string::npos) << bad.err;
  auto csv = Cli(berthd, {"report", "ops", "-o", "csv"});
  EXPECT_EQ(csv.exit_code, 2);
  auto empty =
      admin.Get("/v1/reports/ops?from=" + std::to_string(to) + "&to=" + std::to_string(from));
  EXPECT_EQ(empty.status, 400);
  EXPECT_EQ(empty.body["error"]["field"], "to") << empty.text;

  // A member of red: red only, no fleet, no node interventions.
  const std::string token = MemberToken(admin, "rita", "red", "member", "1h");
  ASSERT_FALSE(token.empty());
  Http member(berthd.api_port());
  member.set_token(token);
  auto mine = member.Get("/v1/reports/ops" + window);
  ASSERT_EQ(mine.status, 200) << mine.text;
  ASSERT_EQ(mine.body["tenants"].size(), 1u) << mine.text;
  EXPECT_EQ(mine.body["tenants"][0]["tenant"], "red");
  EXPECT_TRUE(mine.body["fleet"].is_null());
  EXPECT_EQ(mine.body["total"]["allocated_mgpu_ms"], by_tenant["red"]["allocated_mgpu_ms"]);
  EXPECT_EQ(mine.body["total"]["wait"]["started"], 3);
  EXPECT_TRUE(mine.body["interventions"].empty()) << mine.text;
}

}  // namespace
}  // namespace berth::it
