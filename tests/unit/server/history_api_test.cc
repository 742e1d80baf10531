// GET /v1/history and POST /v1/policy/preview end to end inside one process:
// a real SqliteStore and Controller behind the real Api on loopback HTTP.
// The history is recorded through the store as berthd records it (submit,
// place, start, exit), then exported and replayed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/policy_preview.h"
#include "sched/core_scheduler.h"
#include "sim/engine.h"
#include "sim/history.h"
#include "sim/report.h"
#include "unit/server/history_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

class HistoryApiTest : public HistoryHarness {};

TEST_F(HistoryApiTest, ExportsTheWindowsJobsWithEveryRunTheNodesAndThePolicy) {
  ASSERT_EQ(Post("/v1/policy", kBFirst).status, 201);
  auto old = Submit("b", t0_ - 3'600 * kSec);  // outside a 10m window
  auto done = Submit("a", t0_ + kSec);
  auto pending = Submit("b", t0_ + 2 * kSec);
  auto running = Submit("b", t0_ + 3 * kSec, 2);
  Ran(old, t0_ - 3'000 * kSec, t0_ - 2'000 * kSec);
  Ran(done, t0_ + 5 * kSec, t0_ + 65 * kSec);
  Ran(running, t0_ + 70 * kSec, 0, 2);
  clock_.Set(t0_ + 300 * kSec);

  Answer h = Get("/v1/history?since=10m");
  ASSERT_EQ(h.status, 200) << h.body.dump();
  EXPECT_EQ(h.body["format"], "berth-history/1");
  EXPECT_EQ(h.body["since_ms"], t0_ + 300 * kSec - 600 * kSec);
  EXPECT_EQ(h.body["until_ms"], t0_ + 300 * kSec);
  EXPECT_EQ(h.body["policy"]["version"], 2);
  EXPECT_EQ(h.body["policy"]["yaml"], kBFirst);
  ASSERT_EQ(h.body["nodes"].size(), 1U);
  EXPECT_EQ(h.body["nodes"][0]["name"], "n1");
  EXPECT_EQ(h.body["nodes"][0]["gpus"].size(), 8U);
  const json& jobs = h.body["jobs"];
  ASSERT_EQ(jobs.size(), 3U) << jobs.dump();
  EXPECT_EQ(jobs[0]["id"], done);
  EXPECT_EQ(jobs[0]["tenant"], "a");
  EXPECT_EQ(jobs[0]["queue"], "training");
  EXPECT_EQ(jobs[0]["priority"], "normal");
  EXPECT_EQ(jobs[0]["preemptible"], false);
  EXPECT_EQ(jobs[0]["resources"]["gpus"], 8);
  EXPECT_EQ(jobs[0]["state"], "Succeeded");
  EXPECT_EQ(jobs[0]["submitted_ms"], t0_ + kSec);
  EXPECT_FALSE(jobs[0].contains("command"));  // a replay needs none, and it may hold secrets
  ASSERT_EQ(jobs[0]["runs"].size(), 1U);
  const json& run = jobs[0]["runs"][0];
  EXPECT_EQ(run["node"], "n1");
  EXPECT_EQ(run["gpus"], json({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(run["attempt"], 1);
  EXPECT_EQ(run["started_ms"], t0_ + 5 * kSec);
  EXPECT_EQ(run["finished_ms"], t0_ + 65 * kSec);
  EXPECT_EQ(run["exit_code"], 0);
  EXPECT_EQ(run["stopped_for"], "");
  EXPECT_EQ(jobs[1]["id"], pending);
  EXPECT_EQ(jobs[1]["runs"], json::array());
  EXPECT_EQ(jobs[2]["id"], running);
  EXPECT_EQ(jobs[2]["runs"][0]["finished_ms"], nullptr);

  // berth-sim reads it back: the pending job has no run time; the running
  // one counts up to the export.
  auto history = sim::ReadHistory(h.body);
  ASSERT_TRUE(history.has_value()) << history.error().message;
  ASSERT_EQ(history->jobs.size(), 2U);
  EXPECT_EQ(history->jobs[0].duration_ms, 60 * kSec);
  EXPECT_EQ(history->jobs[1].duration_ms, 230 * kSec);
  EXPECT_EQ(history->never_ran, 1);
  EXPECT_EQ(history->still_running, 1);

  // Epoch milliseconds work too; until is exclusive.
  Answer exact = Get("/v1/history?since=" + std::to_string(t0_ + kSec) +
                     "&until=" + std::to_string(t0_ + 3 * kSec));
  ASSERT_EQ(exact.status, 200);
  ASSERT_EQ(exact.body["jobs"].size(), 2U);
  EXPECT_EQ(exact.body["jobs"][1]["id"], pending);

  Answer bad = Get("/v1/history?since=yesterday");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "since");
  Answer backwards = Get("/v1/history?since=1h&until=2h");
  EXPECT_EQ(backwards.status, 400);
  EXPECT_EQ(backwards.body["error"]["field"], "until");
  EXPECT_TRUE(Get("/v1/openapi.json").body["paths"].contains("/v1/history"));
}

TEST_F(HistoryApiTest, PreviewShowsTheWaitMovingFromBToAWhenAGetsTheGuarantee) {
  RecordAWaitingBehindB();
  Answer jobs_before = Get("/v1/jobs");
  Answer versions_before = Get("/v1/policy/versions");

  Answer p = Post("/v1/policy/preview?window=1h", kAFirst);
  ASSERT_EQ(p.status, 200) << p.body.dump();
  EXPECT_EQ(p.body["from"], 2);
  EXPECT_EQ(p.body["to"], 3);
  EXPECT_EQ(p.body["applied"], false);
  EXPECT_EQ(p.body["jobs"], 5);
  EXPECT_EQ(p.body["cluster_gpus"], 8);
  EXPECT_EQ(p.body["priced"], false);
  ASSERT_EQ(p.body["tenants"].size(), 2U) << p.body.dump();
  const json& a = p.body["tenants"][0];
  const json& b = p.body["tenants"][1];
  ASSERT_EQ(a["tenant"], "a");
  ASSERT_EQ(b["tenant"], "b");
  double a_now = a["current"]["mean_wait_s"];
  double a_then = a["proposed"]["mean_wait_s"];
  double b_now = b["current"]["mean_wait_s"];
  double b_then = b["proposed"]["mean_wait_s"];
  // Under b's guarantee a waits for all three of b's jobs (~300 s, ~400 s);
  // under a's it waits only for the one b job already running.
  EXPECT_GT(a_now, 300);
  EXPECT_LT(a_then, 200);
  EXPECT_GT(b_then, b_now + 100);
  EXPECT_DOUBLE_EQ(a["change"]["mean_wait_s"].get<double>(), a_then - a_now);
  // Same jobs, same run times, no evictions: the GPU-hours do not move, and
  // nobody priced them.
  EXPECT_DOUBLE_EQ(p.body["overall"]["current"]["gpu_hours"].get<double>(), 5 * 8 * 100 / 3600.0);
  EXPECT_DOUBLE_EQ(p.body["overall"]["proposed"]["gpu_hours"].get<double>(), 5 * 8 * 100 / 3600.0);
  EXPECT_EQ(p.body["overall"]["current"]["cost"], nullptr);

  // The current column is exactly a replay of the exported history under
  // the active policy.
  Answer h = Get("/v1/history?since=1h");
  auto history = sim::ReadHistory(h.body);
  ASSERT_TRUE(history.has_value()) << history.error().message;
  auto policy = model::ParsePolicy(kBFirst);
  ASSERT_TRUE(policy.has_value());
  sim::SimOptions options;
  options.cycle_ms = kPreviewCycleMs;
  options.restart_overhead_ms = 0;
  sched::CoreScheduler core;
  auto replay = sim::Simulate(history->nodes, history->jobs, *policy, core, options);
  ASSERT_TRUE(replay.has_value());
  sim::Summary s = sim::Summarize("replay", *replay);
  EXPECT_DOUBLE_EQ(a_now, s.by_tenant.at("a").wait.mean_s);
  EXPECT_DOUBLE_EQ(b_now, s.by_tenant.at("b").wait.mean_s);
  EXPECT_DOUBLE_EQ(p.body["overall"]["current"]["p95_wait_s"].get<double>(), s.all.wait.p95_s);

  // Nothing was applied or written.
  EXPECT_EQ(Get("/v1/policy").body["version"], 2);
  EXPECT_EQ(Get("/v1/policy/versions").body, versions_before.body);
  EXPECT_EQ(Get("/v1/jobs").body, jobs_before.body);
}

TEST_F(HistoryApiTest, PreviewCountsTheEvictionsAProposedGuaranteeCauses) {
  ASSERT_EQ(Post("/v1/policy", kBFirst).status, 201);
  // b runs a long preemptible job; a's job arrives while it runs.
  auto b = Submit("b", t0_, 8, /*preemptible=*/true);
  auto a = Submit("a", t0_ + 10 * kSec);
  Ran(b, t0_, t0_ + 200 * kSec);
  Ran(a, t0_ + 200 * kSec, t0_ + 300 * kSec);
  clock_.Set(t0_ + 400 * kSec);

  // No reclaim grace in the proposal: a does not wait for b to end.
  Answer p = Post("/v1/policy/preview?window=1h", std::string("reclaim_grace: 0s\n") + kAFirst);
  ASSERT_EQ(p.status, 200) << p.body.dump();
  const json& all = p.body["overall"];
  EXPECT_EQ(all["current"]["evictions"], 0);
  // Under a's guarantee, a reclaims its GPUs from b at once; b starts over.
  EXPECT_EQ(all["proposed"]["evictions"], 1);
  EXPECT_GT(all["proposed"]["lost_gpu_hours"].get<double>(), 0);
  EXPECT_NEAR(all["change"]["gpu_hours"].get<double>(),
              all["proposed"]["lost_gpu_hours"].get<double>(), 1e-9);
  EXPECT_LT(p.body["tenants"][0]["proposed"]["mean_wait_s"].get<double>(), 30);
}

TEST_F(HistoryApiTest, APreviewOverMoreRowsThanTheReadCapIsRefusedNamingItsWindow) {
  RecordAWaitingBehindB();  // five jobs, each with its run: ten rows
  Answer versions_before = Get("/v1/policy/versions");
  api_->set_report_max_rows(9);
  Answer over = Post("/v1/policy/preview?window=1h", kAFirst);
  ASSERT_EQ(over.status, 400) << over.body.dump();
  EXPECT_EQ(over.body["error"]["field"], "window");
  const std::string message = over.body["error"]["message"];
  EXPECT_NE(message.find("--report-max-rows 9"), std::string::npos) << message;
  EXPECT_NE(message.find("ask for a shorter window"), std::string::npos) << message;
  EXPECT_EQ(Get("/v1/policy/versions").body, versions_before.body);
  api_->set_report_max_rows(10);
  EXPECT_EQ(Post("/v1/policy/preview?window=1h", kAFirst).status, 200);
}

TEST_F(HistoryApiTest, JobsOfAQueueTheProposalDropsNeverStartInItsColumn) {
  RecordAWaitingBehindB();  // every job has finished, so dropping a is allowed
  Answer p = Post("/v1/policy/preview?window=1h",
                  "queues:\n  - name: b\n    children: [{name: training}]\n");
  ASSERT_EQ(p.status, 200) << p.body.dump();
  EXPECT_EQ(p.body["never_started"]["current"], 0);
  EXPECT_EQ(p.body["never_started"]["proposed"], 2);
  EXPECT_EQ(p.body["changes"]["queues_removed"], json({"a", "a/training"}));
  const json& a = p.body["tenants"][0];
  ASSERT_EQ(a["tenant"], "a");
  EXPECT_EQ(a["proposed"]["finished"], 0);
  EXPECT_EQ(a["proposed"]["gpu_hours"], 0.0);
}

TEST_F(HistoryApiTest, PreviewPricesGpuHoursWhenGivenPrices) {
  RecordAWaitingBehindB();
  Answer p = Post("/v1/policy/preview?window=1h&prices=H100-80GB:2.5,default:1", kAFirst);
  ASSERT_EQ(p.status, 200) << p.body.dump();
  EXPECT_EQ(p.body["priced"], true);
  const json& a = p.body["tenants"][0]["current"];
  EXPECT_DOUBLE_EQ(a["cost"].get<double>(), a["gpu_hours"].get<double>() * 2.5);
  EXPECT_DOUBLE_EQ(p.body["overall"]["change"]["cost"].get<double>(), 0.0);

  // A model with no price and no default: cost stays unpriced, and says why.
  Answer partial = Post("/v1/policy/preview?window=1h&prices=A100-80GB:2", kAFirst);
  ASSERT_EQ(partial.status, 200);
  EXPECT_EQ(partial.body["priced"], false);
  EXPECT_EQ(partial.body["unpriced_models"], json({"H100-80GB"}));
  EXPECT_EQ(partial.body["overall"]["current"]["cost"], nullptr);

  EXPECT_EQ(Post("/v1/policy/preview?prices=H100:nan", kAFirst).status, 400);
  Answer bad = Post("/v1/policy/preview?prices=H100:cheap", kAFirst);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "prices");
}

TEST_F(HistoryApiTest, InvalidPolicyGetsTheSameErrorAsApplyAndChangesNothing) {
  RecordAWaitingBehindB();
  const std::string bad = "queues:\n  - name: a\n    kind: batch\n";
  Answer preview = Post("/v1/policy/preview", bad);
  Answer apply = Post("/v1/policy", bad);
  EXPECT_EQ(preview.status, 400);
  EXPECT_EQ(preview.status, apply.status);
  EXPECT_EQ(preview.body["error"], apply.body["error"]);
  EXPECT_EQ(preview.body["error"]["field"], "queues[0].kind");
  EXPECT_EQ(Get("/v1/policy").body["version"], 2);

  Answer window = Post("/v1/policy/preview?window=soon", kAFirst);
  EXPECT_EQ(window.status, 400);
  EXPECT_EQ(window.body["error"]["field"], "window");
  EXPECT_EQ(Post("/v1/policy/preview", "  \n").body["error"]["field"], "body");
}

TEST_F(HistoryApiTest, AnEmptyWindowSaysSoInsteadOfATableOfZeros) {
  RecordAWaitingBehindB();
  Submit("a", clock_.NowMs() - kSec);  // pending: never ran
  Answer p = Post("/v1/policy/preview?window=1m", kAFirst);
  ASSERT_EQ(p.status, 200) << p.body.dump();
  EXPECT_EQ(p.body["jobs"], 0);
  EXPECT_EQ(p.body["never_ran"], 1);
  EXPECT_FALSE(p.body.contains("tenants"));
  EXPECT_FALSE(p.body.contains("overall"));
  std::string message = p.body["message"];
  EXPECT_NE(message.find("no job ran in the last 1m"), std::string::npos) << message;
  EXPECT_TRUE(Get("/v1/openapi.json").body["paths"].contains("/v1/policy/preview"));
}

}  // namespace
}  // namespace berth::server
