// The `berth poc` report: weighted scores per capability and perspective
// from the cases judged (skipped ones count in neither), the must-fix /
// limited-launch / later lists from failed cases' risk, and Markdown and
// HTML views that keep every suite or server value inert.
#include "cli/poc_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace berth::cli::poc {
namespace {

using nlohmann::json;

json PocCaseJson(const std::string& id, const std::string& capability,
                 const std::string& perspective, int weight, const std::string& risk,
                 const std::string& verdict) {
  return {{"id", id},
          {"group", "g"},
          {"title", "case " + id},
          {"capability", capability},
          {"perspective", perspective},
          {"weight", weight},
          {"risk", risk},
          {"verdict", verdict},
          {"reason", verdict == "pass" ? "" : "because " + id},
          {"retest", "retest " + id},
          {"steps", json::array()},
          {"samples", json::array()},
          {"evidence", {{"jobs", {7}}, {"requests", json::array()}, {"audit_records", {3}}}}};
}

json PocReport() {
  json report;
  report["environment"] = {{"cluster", "http://127.0.0.1:1"},
                           {"suite", {{"name", "s"}, {"version", "1"}, {"sha256", "abc123"}}},
                           {"gpu_models", {{"H100-80GB", 8}}},
                           {"nodes", 1},
                           {"nodes_ready", 1}};
  report["run"] = {{"id", "poc-x"}, {"admin", "root"}, {"started_ms", 0}, {"finished_ms", 1000}};
  report["cases"] = {
      PocCaseJson("a", "orchestration", "business", 3, "high", "pass"),
      PocCaseJson("b", "orchestration", "operations", 1, "high", "fail"),
      PocCaseJson("c", "queues-and-quota", "business", 2, "medium", "fail"),
      PocCaseJson("d", "queues-and-quota", "finance", 5, "low", "fail"),
      PocCaseJson("e", "inference-elasticity", "business", 4, "medium", "skipped"),
  };
  report["cleanup"] = {{"jobs_cancelled", {7}},
                       {"jobs_already_ended", 2},
                       {"tokens_revoked", json::array()},
                       {"identities_disabled", {"poc-x-alice"}},
                       {"policy", {{"restored", 1}, {"as_version", 3}}},
                       {"problems", json::array()}};
  return report;
}

TEST(PocReport, ScoresAreWeightedPassRatesOfTheJudgedCases) {
  json report = PocReport();
  ScoreReport(report);
  const json& caps = report["scores"]["capabilities"];
  // orchestration: 3 of 4 weight passed.
  EXPECT_EQ(caps["orchestration"]["score"].get<double>(), 75.0);
  EXPECT_EQ(caps["orchestration"]["weight_passed"], 3);
  EXPECT_EQ(caps["queues-and-quota"]["score"].get<double>(), 0.0);
  // Only skipped cases: not judged, not 0 and not 100.
  EXPECT_TRUE(caps["inference-elasticity"]["score"].is_null());
  EXPECT_EQ(caps["inference-elasticity"]["weight_skipped"], 4);
  // A capability with no case at all is listed, not judged.
  EXPECT_TRUE(caps["permissions-and-audit"]["score"].is_null());
  const json& views = report["scores"]["perspectives"];
  EXPECT_EQ(views["business"]["score"].get<double>(), 60.0);  // 3 of 3+2
  EXPECT_EQ(views["business"]["cases_skipped"], 1);
  // Overall: 3 of 11 judged weight.
  EXPECT_EQ(report["scores"]["overall"]["score"].get<double>(), 27.3);
  EXPECT_EQ(report["summary"]["passed"], 1);
  EXPECT_EQ(report["summary"]["failed"], 3);
  EXPECT_EQ(report["summary"]["skipped"], 1);
}

// An interrupted run: the case the signal stopped and the ones after it
// are neither passed, failed nor skipped; they are counted and listed as
// not run, and the summary says which signal stopped the run.
TEST(PocReport, AnInterruptedRunsCasesAreNotRunNotPassedOrFailed) {
  json report = PocReport();
  report["cases"].push_back(
      PocCaseJson("f", "orchestration", "business", 3, "high", "interrupted"));
  report["cases"].push_back(PocCaseJson("g", "orchestration", "platform", 2, "high", "not_run"));
  report["interrupted"] = {{"signal", "SIGINT"}, {"case", "f"}, {"not_run", 1}};
  ScoreReport(report);
  EXPECT_EQ(report["summary"]["passed"], 1);
  EXPECT_EQ(report["summary"]["failed"], 3);
  EXPECT_EQ(report["summary"]["skipped"], 1);
  EXPECT_EQ(report["summary"]["not_run"], 2);
  EXPECT_EQ(report["summary"]["cases"], 7);
  // orchestration: a passed (3) of a and b (4) judged; f and g weigh nothing.
  const json& orch = report["scores"]["capabilities"]["orchestration"];
  EXPECT_EQ(orch["score"], 75.0);
  EXPECT_EQ(orch["cases_not_run"], 2);
  EXPECT_EQ(orch["weight_skipped"], 0);
  ASSERT_EQ(report["conclusions"]["not_run"].size(), 2U);
  EXPECT_EQ(report["conclusions"]["not_run"][0]["id"], "f");
  for (const char* list : {"must_fix", "limited_launch", "later_optimization", "not_evaluated"}) {
    for (const auto& i : report["conclusions"][list]) {
      EXPECT_NE(i["id"], "f") << list;
      EXPECT_NE(i["id"], "g") << list;
    }
  }
  const std::string md = RenderMarkdown(report);
  EXPECT_NE(md.find("2 not run (interrupted by SIGINT)"), std::string::npos) << md;
  EXPECT_NE(md.find("### Not run (interrupted by SIGINT)"), std::string::npos) << md;
  EXPECT_NE(md.find("**g/g** case g: because g"), std::string::npos) << md;
  const std::string html = RenderHtml(report);
  EXPECT_NE(html.find("<h3 id=\"not_run\">Not run (interrupted by SIGINT)</h3>"),
            std::string::npos);
  // A run that was not interrupted says nothing of it.
  json whole = PocReport();
  ScoreReport(whole);
  EXPECT_EQ(RenderMarkdown(whole).find("not run"), std::string::npos);
}

TEST(PocReport, TheListsComeFromTheFailedCasesRisk) {
  json report = PocReport();
  ScoreReport(report);
  const json& c = report["conclusions"];
  ASSERT_EQ(c["must_fix"].size(), 1U);
  EXPECT_EQ(c["must_fix"][0]["id"], "b");
  EXPECT_EQ(c["must_fix"][0]["retest"], "retest b");
  ASSERT_EQ(c["limited_launch"].size(), 1U);
  EXPECT_EQ(c["limited_launch"][0]["id"], "c");
  ASSERT_EQ(c["later_optimization"].size(), 1U);
  EXPECT_EQ(c["later_optimization"][0]["id"], "d");
  ASSERT_EQ(c["not_evaluated"].size(), 1U);
  EXPECT_EQ(c["not_evaluated"][0]["id"], "e");
  // A passed high-risk case is on no list.
  for (const auto& list : {"must_fix", "limited_launch", "later_optimization", "not_evaluated"}) {
    for (const auto& item : c[list]) EXPECT_NE(item["id"], "a");
  }
}

TEST(PocReport, HtmlIsSelfContainedAndEscapesWhatItPrints) {
  json report = PocReport();
  report["cases"][1]["title"] = "<script>alert(1)</script>";
  report["cases"][1]["reason"] = "job \"x\" & <b>";
  report["cases"][0]["samples"] = {{{"name", "j"},
                                    {"job_id", 7},
                                    {"tenant", "t<a>"},
                                    {"user", "u"},
                                    {"queue", "q"},
                                    {"resources", {{"gpus", 2}}},
                                    {"replicas", 1},
                                    {"expected", "Succeeded within 1m"},
                                    {"state", "Succeeded"},
                                    {"queueing_ms", 1500},
                                    {"run_ms", 61000},
                                    {"failure", nullptr}}};
  ScoreReport(report);
  const std::string html = RenderHtml(report);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("job &quot;x&quot; &amp; &lt;b&gt;"), std::string::npos);
  EXPECT_NE(html.find("t&lt;a&gt;"), std::string::npos);
  // Nothing fetched: no external stylesheet, script, image or font.
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  // Verdicts, the per-sample fields and the evidence.
  EXPECT_NE(html.find("class=\"verdict fail\""), std::string::npos);
  EXPECT_NE(html.find("class=\"verdict pass\""), std::string::npos);
  EXPECT_NE(html.find("class=\"verdict skipped\""), std::string::npos);
  EXPECT_NE(html.find("gpus=2"), std::string::npos);
  EXPECT_NE(html.find("Succeeded within 1m"), std::string::npos);
  EXPECT_NE(html.find("abc123"), std::string::npos);  // the suite hash
  // The must-fix list links to its case.
  EXPECT_NE(html.find("href=\"#case-b\""), std::string::npos);
  EXPECT_NE(html.find("id=\"case-b\""), std::string::npos);
}

TEST(PocReport, MarkdownKeepsTableRowsWhole) {
  json report = PocReport();
  report["cases"][2]["reason"] = "a|b\nc";
  ScoreReport(report);
  const std::string md = RenderMarkdown(report);
  EXPECT_NE(md.find("a\\|b c"), std::string::npos);
  EXPECT_NE(md.find("### Must fix"), std::string::npos);
  EXPECT_NE(md.find("**g/b**"), std::string::npos);
  EXPECT_NE(md.find("Re-test: retest c"), std::string::npos);
  EXPECT_NE(md.find("version 1 restored as version 3"), std::string::npos);
  EXPECT_NE(md.find("1 passed, 3 failed, 1 skipped"), std::string::npos);
  // Scores in the suite format's order, not alphabetical.
  EXPECT_LT(md.find("| resource-management |"), md.find("| queues-and-quota |"));
  EXPECT_LT(md.find("| queues-and-quota |"), md.find("| orchestration |"));
  EXPECT_LT(md.find("| business |"), md.find("| platform |"));
}

TEST(PocReport, ASampleShowsItsMetricSnapshotErrorStatesAndAlerts) {
  json report = PocReport();
  report["cases"][0]["samples"] = {
      {{"name", "oom"},
       {"job_id", 9},
       {"tenant", "t"},
       {"user", "u"},
       {"queue", "q"},
       {"resources", {{"gpus", 1}}},
       {"state", "Failed"},
       {"failure", {{"class", "gpu_out_of_memory"}, {"message", "CUDA out of memory"}}},
       {"telemetry",
        {{"samples", 6},
         {"mean_util_pct", 41.2},
         {"min_util_pct", 12.0},
         {"max_util_pct", 97.0},
         {"peak_memory_bytes", std::int64_t{2} << 30},
         {"memory_total_bytes", std::int64_t{80} << 30}}},
       {"error_states", {"run 9.0.1 on n1: exit 1"}},
       {"alerts", {{{"id", 4}, {"kind", "budget"}, {"severity", "warning"}, {"message", "m"}}}}},
      {{"name", "quiet"}, {"job_id", 10}, {"telemetry", nullptr}}};
  ScoreReport(report);
  for (const std::string& text : {RenderMarkdown(report), RenderHtml(report)}) {
    EXPECT_NE(text.find("GPU utilization and memory"), std::string::npos);
    EXPECT_NE(text.find("mean 41% (min 12%, max 97%)"), std::string::npos) << text;
    EXPECT_NE(text.find("6 samples"), std::string::npos);
    EXPECT_NE(text.find("run 9.0.1 on n1: exit 1; alert 4 budget (warning): m"), std::string::npos);
    EXPECT_NE(text.find("no samples"), std::string::npos);
  }
}

// A case that applied a service shows, beside its evidence, that the
// service went with it (cleanup.services_deleted) and any problem deleting
// one; its replica sample says the cold start berthd measured.
TEST(PocReport, ACasesOwnCleanupAndAReplicasColdStartAreShown) {
  json report = PocReport();
  report["cases"][0]["cleanup"] = {{"services_deleted", {"poc-x-a/echo", "poc-x-a/burst"}}};
  report["cases"][1]["cleanup"] = {{"services_deleted", json::array()},
                                   {"service_problems", {"poc-x-a/gone: 500 <b>"}}};
  report["cases"][0]["samples"] = {
      {{"name", "echo replica"}, {"job_id", 11}, {"state", "Running"}, {"cold_start_ms", 1432}}};
  ScoreReport(report);
  const std::string md = RenderMarkdown(report);
  EXPECT_NE(md.find("Case cleanup: services deleted: poc-x-a/echo, poc-x-a/burst."),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Case cleanup: services deleted: none; problem: poc-x-a/gone: 500"),
            std::string::npos)
      << md;
  const std::string html = RenderHtml(report);
  EXPECT_NE(html.find("<p>Case cleanup: services deleted: poc-x-a/echo, poc-x-a/burst.</p>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("problem: poc-x-a/gone: 500 &lt;b&gt;"), std::string::npos) << html;
  for (const std::string& text : {md, html}) {
    EXPECT_NE(text.find("Running (scaled from zero: cold start 1432 ms)"), std::string::npos);
    // Cases that made no service say nothing of services: two lines in all.
    std::size_t lines = 0;
    for (auto at = text.find("Case cleanup:"); at != std::string::npos;
         at = text.find("Case cleanup:", at + 1)) {
      ++lines;
    }
    EXPECT_EQ(lines, 2U);
  }
}

}  // namespace
}  // namespace berth::cli::poc
