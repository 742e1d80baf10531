// GPU telemetry end to end through a real berthd on simulated GPUs: the
// embedded agents sample each GPU from the running job's declared load
// profile and stream the samples to berthd, which keeps them as minute
// buckets. The job's utilization summary, the usage records' used and idle
// GPU-time, the usage report and the DCGM gauges in /metrics all agree.
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

// The value of every `name{...}` sample whose labels contain `label`.
std::vector<double> Gauge(const std::string& text, const std::string& name,
                          const std::string& label) {
  std::vector<double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    if (line.find(label) == std::string::npos) continue;
    out.push_back(std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return out;
}

TEST_F(IntegrationTest, TelemetryFeedsJobSummaryUsageAndMetricsThatAgree) {
  Berthd& berthd = NewBerthd(
      AllInOne({"--telemetry-interval", "200ms", "--idle-window", "2s", "--stop-grace", "2s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  WriteFile(dir_ / "prices.yaml", "currency: EUR\ndefault: 3.60\n");
  ASSERT_EQ(Cli(berthd, {"price", "apply", (dir_ / "prices.yaml").string()}).exit_code, 0);

  // A busy job on two GPUs and an idle one on a third.
  const auto busy = berthd.Submit(
      JobSpecJson("busy", Sh("sleep 5"), 2, {{"load", {{"utilization", 60}, {"memory", "50%"}}}}));
  const auto idle = berthd.Submit(
      JobSpecJson("idle", Sh("sleep 5"), 1, {{"load", {{"pattern", "idle"}, {"memory", "10%"}}}}));
  ASSERT_GT(busy, 0);
  ASSERT_GT(idle, 0);
  ASSERT_TRUE(berthd.WaitForState(busy, "Running", 30s));

  // While it runs, /metrics shows its GPUs busy under the DCGM names,
  // labelled with the job and tenant.
  std::string metrics;
  ASSERT_TRUE(WaitFor(
      [&] {
        metrics = berthd.http().Get("/metrics").text;
        auto util = Gauge(metrics, "DCGM_FI_DEV_GPU_UTIL", "job=\"" + std::to_string(busy) + "\"");
        return util.size() == 2 && util[0] >= 55 && util[1] >= 55;
      },
      20s))
      << metrics;
  EXPECT_EQ(Gauge(metrics, "DCGM_FI_DEV_GPU_UTIL", "model=\"H100-80GB\"").size(), 8u);

  // The fleet map's view of the same GPUs (GET /v1/gpus): each card's
  // newest reading, and the idle job's card flagged allocated but idle.
  json gpus;
  ASSERT_TRUE(WaitFor(
      [&] {
        gpus = berthd.http().Get("/v1/gpus").body;
        int idle_held = 0;
        for (const auto& g : gpus.at("gpus")) idle_held += g.value("idle_allocated", false);
        return idle_held == 1;
      },
      20s))
      << gpus.dump(2);
  int busy_cards = 0;
  for (const auto& g : gpus.at("gpus")) {
    ASSERT_TRUE(g.at("telemetry").is_object()) << g.dump();
    const bool held = g.at("job").is_object();
    const auto holder = held ? g.at("job").value("id", std::int64_t{0}) : 0;
    if (holder == busy) {
      ++busy_cards;
      EXPECT_GE(g.at("telemetry").at("util_pct").get<int>(), 55) << g.dump();
      EXPECT_FALSE(g.at("idle_allocated").get<bool>()) << g.dump();
    } else if (holder == idle) {
      EXPECT_TRUE(g.at("idle_allocated").get<bool>()) << g.dump();
    } else {
      EXPECT_FALSE(g.at("idle_allocated").get<bool>()) << g.dump();  // free: idle, not held
    }
  }
  EXPECT_EQ(busy_cards, 2) << gpus.dump(2);
  for (double v : Gauge(metrics, "DCGM_FI_DEV_FB_USED", "job=\"" + std::to_string(busy) + "\"")) {
    EXPECT_NEAR(v, 40 * 1024, 1);  // half of 80 GiB, in MiB
  }

  ASSERT_TRUE(berthd.WaitForTerminal(busy, 30s));
  ASSERT_TRUE(berthd.WaitForTerminal(idle, 30s));

  // The job's summary: 60% +/- the simulated jitter, half the memory.
  const json job = berthd.Job(busy);
  const json& u = job["utilization"];
  ASSERT_TRUE(u.is_object()) << job.dump(2);
  EXPECT_GT(u["samples"].get<std::int64_t>(), 10);
  EXPECT_NEAR(u["avg_util_pct"].get<double>(), 60, 2.5);
  EXPECT_NEAR(u["avg_memory_used_bytes"].get<double>(), 40.0 * (1LL << 30), 1 << 20);
  EXPECT_EQ(u["memory_total_bytes"], 80LL << 30);
  EXPECT_EQ(u["idle_fraction"], 0);
  auto shown = Cli(berthd, {"job", std::to_string(busy)});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("GPU util"), std::string::npos) << shown.out;

  // Usage records: used and idle follow the samples of each run exactly.
  const json telemetry = berthd.http().Get("/v1/jobs/" + std::to_string(busy) + "/telemetry").body;
  const json records = berthd.http().Get("/v1/usage/records?from=0&limit=1000").body;
  ASSERT_TRUE(records["telemetry"].get<bool>()) << records.dump(2);
  std::int64_t used = 0;
  std::int64_t idle_ms = 0;
  for (const auto& rec : records["records"]) {
    const std::int64_t mgpu_ms = rec["mgpu_ms"];
    used += rec["used_mgpu_ms"].get<std::int64_t>();
    idle_ms += rec["idle_mgpu_ms"].get<std::int64_t>();
    EXPECT_EQ(rec["measured_mgpu_ms"], mgpu_ms) << rec.dump();
    if (rec["job_id"] == busy) {
      EXPECT_NEAR(static_cast<double>(rec["used_mgpu_ms"].get<std::int64_t>()) / mgpu_ms, 0.60,
                  0.03)
          << rec.dump();
      EXPECT_EQ(rec["idle_mgpu_ms"], 0);
      EXPECT_FALSE(rec["idle"].get<bool>());
    } else {
      EXPECT_EQ(rec["used_mgpu_ms"], 0) << rec.dump();
      EXPECT_EQ(rec["idle_mgpu_ms"], mgpu_ms) << rec.dump();
      EXPECT_TRUE(rec["idle"].get<bool>()) << rec.dump();  // idle for 5 s > the 2 s window
    }
  }
  // The report's totals are the records' sums to the mGPU-millisecond.
  auto usage = Cli(berthd, {"usage", "--from", "0", "--by", "tenant", "-o", "json"});
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  const json report = json::parse(usage.out);
  EXPECT_EQ(report["total"]["used_mgpu_ms"], used) << usage.out;
  EXPECT_EQ(report["total"]["idle_mgpu_ms"], idle_ms) << usage.out;
  EXPECT_EQ(report["total"]["idle_runs"], 1) << usage.out;
  auto table = Cli(berthd, {"usage", "--from", "0"});
  EXPECT_NE(table.out.find("IDLE RUNS"), std::string::npos) << table.out;
  EXPECT_TRUE(telemetry.is_object()) << telemetry.dump(2);
}

}  // namespace
}  // namespace berth::it
