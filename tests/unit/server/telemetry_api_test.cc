// The telemetry endpoints through the real Api with a real TelemetryStore
// fed samples by hand (as the agent stream will): a job's per-run summaries
// and GPU series, its utilization in GET /v1/jobs/{id}, another tenant's job
// answering 404, a GPU's series naming only runs the caller may read, and
// the DCGM gauges on /metrics labelled with the occupying job.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "control/lifecycle.h"
#include "store/telemetry_store.h"
#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

constexpr std::int64_t kMin = 60'000;

constexpr const char* kPolicy = R"(queues:
  - name: red
    quota: {gpus: {guaranteed: 2}}
    children:
      - name: main
  - name: blue
    quota: {gpus: {guaranteed: 2}}
    children:
      - name: main
)";

class TelemetryApiTest : public ApiHarness {
 protected:
  void SetUp() override {
    ApiHarness::SetUp();
    auto v = store_->ApplyPolicy(kPolicy, "root", "", clock_.NowMs());
    ASSERT_TRUE(v.has_value()) << v.error().message;
    auto t = store::TelemetryStore::Open(dir_, {});
    ASSERT_TRUE(t.has_value()) << t.error().message;
    telemetry_ = std::move(*t);
    api_->set_telemetry(telemetry_.get());
    api_->set_metrics(&metrics_);
    model::NodeInfo n;
    n.name = "n1";
    n.cpus = 8;
    for (std::uint32_t i = 0; i < 4; ++i) {
      model::Gpu g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      g.model = "H100-80GB";
      g.memory_bytes = 80ULL << 30;
      n.gpus.push_back(g);
    }
    ASSERT_TRUE(store_->UpsertNode(n, clock_.NowMs()).has_value());
    // bob reads tenant red only.
    store::Identity bob;
    bob.name = "bob";
    bob.tenants = {{"red", store::Role::kMember}};
    ASSERT_TRUE(identities_->CreateIdentity(bob).has_value());
    auto token = identities_->CreateToken("bob", "tests", std::nullopt, "tests", clock_.NowMs());
    ASSERT_TRUE(token.has_value());
    bob_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    bob_->set_bearer_token_auth(token->token);
  }
  void TearDown() override {
    ApiHarness::TearDown();
    telemetry_.reset();
  }

  // A job of `tenant` placed on n1's `gpus` and started; its id and run id.
  std::pair<std::int64_t, std::string> Start(const std::string& tenant,
                                             std::vector<std::uint32_t> gpus) {
    model::JobSpec s;
    s.name = tenant + "-job";
    s.tenant = tenant;
    s.queue = "main";
    s.command = {"true"};
    s.resources.gpus = static_cast<std::uint32_t>(gpus.size());
    auto created = store_->CreateJob(s, clock_.NowMs(), "alice");
    EXPECT_TRUE(created.has_value()) << created.error().message;
    if (!created) return {};
    const auto id = *created;
    sched::Placement p{id, {{0, "n1", gpus}}};
    sched::Plan plan;
    plan.placements.push_back(p);
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, clock_.NowMs()).has_value());
    auto job = store_->GetJob(id);
    EXPECT_TRUE(job.has_value() && !job->runs.empty());
    if (!job || job->runs.empty()) return {};
    const std::string run_id = job->runs[0].run_id;
    EXPECT_TRUE(
        control::MarkRunStarted(*store_, run_id, 42, clock_.NowMs(), clock_.NowMs()).has_value());
    return {id, run_id};
  }
  model::GpuSample Sample(TimeMs at, std::uint32_t gpu, std::uint32_t util,
                          std::vector<std::string> runs) {
    model::GpuSample s;
    s.at_ms = at;
    s.node = "n1";
    s.gpu = gpu;
    s.uuid = "GPU-" + std::to_string(gpu);
    s.util_pct = util;
    s.memory_used_bytes = 1000 * std::uint64_t{util};
    s.memory_total_bytes = 80ULL << 30;
    s.power_mw = 250'000;
    s.temperature_c = 50;
    s.run_ids = std::move(runs);
    return s;
  }
  Answer GetAs(httplib::Client& c, const std::string& path) {
    auto res = c.Get(path);
    if (!res) return {};
    return {res->status, json::parse(res->body, nullptr, false)};
  }

  std::unique_ptr<store::TelemetryStore> telemetry_;
  ServerMetrics metrics_;
  std::unique_ptr<httplib::Client> bob_;
};

TEST_F(TelemetryApiTest, JobTelemetryAndUtilizationFromItsRunsSamples) {
  auto [red, red_run] = Start("red", {0, 1});
  const std::string job = "/v1/jobs/" + std::to_string(red);
  auto before = Get(job);
  ASSERT_EQ(before.status, 200) << before.body.dump();
  EXPECT_TRUE(before.body.contains("utilization"));
  EXPECT_TRUE(before.body["utilization"].is_null());

  auto [blue, blue_run] = Start("blue", {2});
  const TimeMs t = clock_.NowMs();
  std::vector<model::GpuSample> samples = {
      Sample(t, 0, 80, {red_run}), Sample(t + 10'000, 0, 60, {red_run}), Sample(t, 1, 0, {red_run}),
      // GPU 1 shared with blue's run for a sample: the job sees it as shared.
      Sample(t + 10'000, 1, 2, {red_run, blue_run}), Sample(t, 2, 99, {blue_run})};
  telemetry_->Ingest(samples);
  ASSERT_TRUE(telemetry_->Flush(t + kMin).has_value());  // the minute is on disk

  auto after = Get(job);
  ASSERT_EQ(after.status, 200);
  const json& u = after.body["utilization"];
  ASSERT_TRUE(u.is_object()) << after.body.dump();
  EXPECT_EQ(u["samples"], 4);
  EXPECT_EQ(u["max_util_pct"], 80);
  EXPECT_DOUBLE_EQ(u["avg_util_pct"].get<double>(), (80 + 60 + 0 + 2) / 4.0);
  EXPECT_DOUBLE_EQ(u["idle_fraction"].get<double>(), 0.5);  // 0% and 2% are under 5%
  EXPECT_EQ(u["max_memory_used_bytes"], 80'000);
  EXPECT_EQ(u["memory_total_bytes"], 80ULL << 30);

  auto tel = Get(job + "/telemetry");
  ASSERT_EQ(tel.status, 200) << tel.body.dump();
  ASSERT_EQ(tel.body["runs"].size(), 1u);
  EXPECT_EQ(tel.body["runs"][0]["run_id"], red_run);
  EXPECT_EQ(tel.body["runs"][0]["utilization"]["samples"], 4);
  ASSERT_EQ(tel.body["gpus"].size(), 2u);
  EXPECT_EQ(tel.body["gpus"][0]["uuid"], "GPU-0");
  const json& gpu1 = tel.body["gpus"][1]["buckets"];
  ASSERT_EQ(gpu1.size(), 2u) << gpu1.dump();  // one bucket per run set
  bool shared_seen = false;
  for (const auto& b : gpu1) {
    EXPECT_EQ(b["run_ids"], json::array({red_run}));  // never blue's run id
    shared_seen |= b["shared"].get<bool>();
  }
  EXPECT_TRUE(shared_seen);
  // Merged to 5 minutes: one bucket per run set still.
  auto stepped = Get(job + "/telemetry?step=5m");
  ASSERT_EQ(stepped.status, 200) << stepped.body.dump();
  EXPECT_EQ(stepped.body["step_ms"], 5 * kMin);
  EXPECT_EQ(stepped.body["gpus"][0]["buckets"][0]["width_ms"], 5 * kMin);
  EXPECT_EQ(stepped.body["gpus"][0]["buckets"][0]["util_sum"], 140);

  auto bad = Get(job + "/telemetry?step=90s");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "step");
  bad = Get(job + "/telemetry?from=" + std::to_string(t) + "&to=" + std::to_string(t - 1));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "to");
}

TEST_F(TelemetryApiTest, AnotherTenantsJobIsNotFoundAndItsRunsAreUnnamed) {
  auto [red, red_run] = Start("red", {0});
  auto [blue, blue_run] = Start("blue", {1});
  const TimeMs t = clock_.NowMs();
  telemetry_->Ingest(std::vector<model::GpuSample>{Sample(t, 0, 50, {red_run}),
                                                   Sample(t, 1, 50, {blue_run}),
                                                   Sample(t + 1, 1, 40, {blue_run, red_run})});
  EXPECT_EQ(GetAs(*bob_, "/v1/jobs/" + std::to_string(red) + "/telemetry").status, 200);
  auto other = GetAs(*bob_, "/v1/jobs/" + std::to_string(blue) + "/telemetry");
  EXPECT_EQ(other.status, 404) << other.body.dump();

  auto gpu = GetAs(*bob_, "/v1/gpus/GPU-1/telemetry");
  ASSERT_EQ(gpu.status, 200) << gpu.body.dump();
  EXPECT_EQ(gpu.body["node"], "n1");
  EXPECT_EQ(gpu.body["model"], "H100-80GB");
  const std::string text = gpu.body["buckets"].dump();
  EXPECT_EQ(text.find(blue_run), std::string::npos) << text;
  EXPECT_NE(text.find("another tenant"), std::string::npos) << text;
  EXPECT_NE(text.find(red_run), std::string::npos) << text;
  // A platform admin sees every run.
  auto all = Get("/v1/gpus/GPU-1/telemetry");
  EXPECT_NE(all.body["buckets"].dump().find(blue_run), std::string::npos);
  auto unknown = Get("/v1/gpus/GPU-nope/telemetry");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body["error"]["field"], "uuid");
}

TEST_F(TelemetryApiTest, MetricsCarryDcgmGaugesLabelledWithTheOccupant) {
  auto [red, red_run] = Start("red", {0});
  const TimeMs t = clock_.NowMs();
  auto s = Sample(t, 0, 73, {red_run});
  s.memory_used_bytes = 3ULL << 30;
  telemetry_->Ingest(std::vector<model::GpuSample>{s, Sample(t, 3, 0, {})});
  auto res = client_->Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const std::string& text = res->body;
  const std::string occupied =
      "{gpu=\"0\",UUID=\"GPU-0\",device=\"nvidia0\",model=\"H100-80GB\",Hostname=\"n1\",job=\"" +
      std::to_string(red) + "\",tenant=\"red\",queue=\"main\"}";
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_UTIL" + occupied + " 73\n"), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED" + occupied + " 3072\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE" + occupied + " 250\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"3\",UUID=\"GPU-3\",device=\"nvidia3\","
                      "model=\"H100-80GB\",Hostname=\"n1\",job=\"\",tenant=\"\",queue=\"\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("berth_telemetry_samples_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("berth_telemetry_late_samples_total 0\n"), std::string::npos);

  // promtool accepts the document with the DCGM families in it.
  const std::filesystem::path promtool = "/usr/bin/promtool";
  if (!std::filesystem::exists(promtool)) GTEST_SKIP() << "promtool is not installed";
  {
    std::ofstream out(dir_ / "metrics.txt");
    out << text;
  }
  const std::string cmd = promtool.string() + " check metrics < " +
                          (dir_ / "metrics.txt").string() + " > " +
                          (dir_ / "promtool.out").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());  // NOLINT(cert-env33-c): a test running a fixed tool
  std::ifstream in(dir_ / "promtool.out");
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << said;
  EXPECT_EQ(said, "") << "promtool found problems";
}

}  // namespace
}  // namespace berth::server
