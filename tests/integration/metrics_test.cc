// GET /metrics through a real berthd on simulated GPUs: after a job that
// succeeds and one that fails, the outcomes, GPU counts and job gauges agree
// with the REST API, and a preemption, a GPU cordon and an admin's cancel
// are counted; `promtool check metrics` finds nothing wrong with the
// document; and a real Prometheus server scrapes it with a bearer token
// file and answers a query with berthd's value.
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

// The value of the one sample that starts with `series` (name and labels as
// written), or -1 when there is none.
double Value(const std::string& text, const std::string& series) {
  std::size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      return std::stod(text.substr(pos + series.size() + 1));
    }
    pos += series.size();
  }
  return -1;
}

TEST_F(IntegrationTest, MetricsAgreeWithTheApiAndPrometheusScrapesThem) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  auto ok = berthd.Submit(JobSpecJson("ok", Sh("true"), 1));
  auto failed = berthd.Submit(JobSpecJson("fails", Sh("exit 3"), 2));
  ASSERT_GT(ok, 0);
  ASSERT_GT(failed, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(ok, 30s));
  ASSERT_TRUE(berthd.WaitForTerminal(failed, 30s));
  ASSERT_EQ(berthd.JobState(ok), "Succeeded");
  ASSERT_EQ(berthd.JobState(failed), "Failed");
  // One that holds three GPUs while the metrics are read.
  auto running = berthd.Submit(JobSpecJson("holds", Sh("sleep 600"), 3));
  ASSERT_GT(running, 0);
  ASSERT_TRUE(berthd.WaitForState(running, "Running", 30s));

  auto reply = berthd.http().Get("/metrics");
  ASSERT_EQ(reply.status, 200) << reply.text;
  const std::string text = reply.text;
  const std::string tenant = berthd.Job(ok)["spec"]["tenant"];
  EXPECT_EQ(Value(text, R"(berth_job_outcomes_total{tenant=")" + tenant +
                            R"(",outcome="Succeeded",failure_class=""})"),
            1)
      << text;
  EXPECT_EQ(Value(text, R"(berth_job_outcomes_total{tenant=")" + tenant +
                            R"(",outcome="Failed",failure_class="user_code"})"),
            1)
      << text;
  EXPECT_EQ(Value(text, R"(berth_jobs{state="Running"})"), 1) << text;
  EXPECT_EQ(Value(text, R"(berth_nodes{state="Ready"})"), 1) << text;
  EXPECT_GE(Value(text, "berth_scheduler_placements_total"), 3) << text;
  EXPECT_GE(Value(text, "berth_scheduler_cycle_seconds_count"), 1) << text;

  // GPU counts match /v1/gpus: 8 in all, 3 held by the running job.
  const json gpus = berthd.http().Get("/v1/gpus").body["gpus"];
  ASSERT_EQ(gpus.size(), 8u) << gpus.dump(2);
  std::size_t held = 0;
  for (const auto& g : gpus) held += g["job"].is_null() ? 0 : 1;
  EXPECT_EQ(held, 3u);
  const std::string model = gpus[0]["model"];
  double allocated = 0;
  double all = 0;
  // A berth_gpus sample: model, state, count.
  const std::string pattern =
      "^berth_gpus\\{pool=\"[^\"]*\",model=\"([^\"]*)\",state=\"([a-z]+)\"\\} ([0-9]+)$";
  const std::regex gpus_line(pattern);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, gpus_line)) continue;
    EXPECT_EQ(m[1], model);
    all += std::stod(m[3]);
    if (m[2] == "allocated") allocated += std::stod(m[3]);
  }
  EXPECT_EQ(all, 8);
  EXPECT_EQ(allocated, static_cast<double>(held));
  const std::string id = std::to_string(running);
  std::size_t info_for_job = 0;
  for (std::size_t pos = 0; (pos = text.find(",job=\"" + id + "\",", pos)) != std::string::npos;
       ++pos) {
    ++info_for_job;
  }
  EXPECT_EQ(info_for_job, 3u) << text;

  // An operator cordons a free GPU: one intervention, one cordoned GPU.
  json free_gpu;
  for (const auto& g : gpus) {
    if (g["job"].is_null()) free_gpu = g;
  }
  ASSERT_FALSE(free_gpu.is_null());
  const std::string cordon_path = "/v1/nodes/" + free_gpu["node"].get<std::string>() + "/gpus/" +
                                  std::to_string(free_gpu["index"].get<int>()) +
                                  "/cordon?reason=metrics";
  ASSERT_EQ(berthd.http().Post(cordon_path, "").status, 200);
  const std::string after = berthd.http().Get("/metrics").text;
  EXPECT_EQ(Value(after, R"(berth_admin_interventions_total{action="gpu_cordon"})"), 1) << after;
  EXPECT_NE(after.find(R"(,state="cordoned"} 1)"), std::string::npos) << after;

  // A high-priority job preempts a low-priority one (the 4 GPUs left are
  // not enough for both); a platform admin then cancels the victim.
  auto low = berthd.Submit(JobSpecJson("low", Sh("sleep 600"), 4, {{"priority", "low"}}));
  ASSERT_GT(low, 0);
  ASSERT_TRUE(berthd.WaitForState(low, "Running", 30s)) << berthd.Job(low).dump(2);
  std::this_thread::sleep_for(1s);
  auto high = berthd.Submit(JobSpecJson("high", Sh("sleep 1"), 4, {{"priority", "high"}}));
  ASSERT_GT(high, 0);
  ASSERT_TRUE(berthd.WaitForTerminal(high, 60s)) << berthd.Job(high).dump(2);
  // Cancel the victim as soon as its second attempt is placed, started or
  // not: a cancel before the start order went out settles the run as never
  // started, so the job still ends Cancelled.
  ASSERT_TRUE(WaitFor([&] { return berthd.Job(low)["runs"].size() >= 2; }, 30s))
      << berthd.Job(low).dump(2);
  ASSERT_EQ(berthd.http().Post("/v1/jobs/" + std::to_string(low) + "/cancel", "").status, 200);
  ASSERT_TRUE(berthd.WaitForTerminal(low, 30s));
  ASSERT_TRUE(berthd.WaitForState(running, "Running", 30s));
  const std::string later = berthd.http().Get("/metrics").text;
  EXPECT_EQ(Value(later, R"(berth_preemptions_total{reason="preempt"})"), 1) << later;
  EXPECT_EQ(Value(later, R"(berth_admin_interventions_total{action="cancel"})"), 1) << later;
  EXPECT_EQ(Value(later, R"(berth_job_outcomes_total{tenant=")" + tenant +
                             R"(",outcome="Cancelled",failure_class=""})"),
            1)
      << later;
  EXPECT_EQ(Value(later, R"(berth_job_outcomes_total{tenant=")" + tenant +
                             R"(",outcome="Succeeded",failure_class=""})"),
            2)
      << later;

  // Without a token: 401, nothing leaks.
  Http anonymous(berthd.api_port());
  EXPECT_EQ(anonymous.Get("/metrics").status, 401);

  // (b) promtool finds nothing to complain about.
  const std::filesystem::path promtool = "/usr/bin/promtool";
  const std::filesystem::path prometheus = "/usr/bin/prometheus";
  if (!std::filesystem::exists(promtool) || !std::filesystem::exists(prometheus)) {
    GTEST_SKIP() << "promtool or prometheus is not installed (Debian package prometheus)";
  }
  WriteFile(dir_ / "metrics.txt", text);
  auto checked = RunCommand(
      "/bin/sh", {"-c", promtool.string() + " check metrics < " + (dir_ / "metrics.txt").string()},
      dir_.path());
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out + checked.err, "") << "promtool found problems";

  // (c) a real Prometheus scrapes berthd with the token from a file.
  WriteFile(dir_ / "token", berthd.http().token());
  const int port = FreePort();
  WriteFile(dir_ / "prometheus.yml",
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: berthd\n"
            "    authorization: {type: Bearer, credentials_file: " +
                (dir_ / "token").string() +
                "}\n"
                "    static_configs: [{targets: ['127.0.0.1:" +
                std::to_string(berthd.api_port()) + "']}]\n");
  Process prom(prometheus,
               {"--config.file=" + (dir_ / "prometheus.yml").string(),
                "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
                "--web.listen-address=127.0.0.1:" + std::to_string(port)},
               dir_ / "prometheus.log");
  Http query(port);
  json result;
  const bool scraped = WaitFor(
      [&] {
        auto r = query.Get("/api/v1/query?query=berth_jobs%7Bstate%3D%22Running%22%7D");
        if (r.status != 200 || r.body["data"]["result"].empty()) return false;
        result = r.body["data"]["result"];
        return true;
      },
      30s, 250ms);
  ASSERT_TRUE(scraped) << ReadFile(dir_ / "prometheus.log");
  ASSERT_EQ(result.size(), 1u) << result.dump(2);
  EXPECT_EQ(result[0]["metric"]["job"], "berthd");
  EXPECT_EQ(result[0]["value"][1], "1") << result.dump(2);
  // The scrape target is healthy: berthd accepted the token.
  auto up = query.Get("/api/v1/query?query=up");
  ASSERT_EQ(up.status, 200);
  EXPECT_EQ(up.body["data"]["result"][0]["value"][1], "1") << up.text;
}

}  // namespace
}  // namespace berth::it
