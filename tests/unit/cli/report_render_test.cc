// The operations report's Markdown and HTML views: the sections and exact
// figures computed from the JSON's integers, and every server value inert:
// a job name with `<script>` and `|` neither opens a tag nor breaks a
// Markdown table row.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/text_escape.h"

namespace berth::cli {
namespace {

using nlohmann::json;

json Report() {
  const json figures = {{"allocated_mgpu_ms", 7'200'000'000LL},  // 2 GPU-hours
                        {"cost_micros", 5'000'000},
                        {"cost", "5.00"},
                        {"measured", nullptr},
                        {"wait",
                         {{"started", 4},
                          {"total_wait_ms", 120'000},
                          {"p95_wait_ms", 90'000},
                          {"waiting", 1},
                          {"oldest_wait_ms", 7'200'000}}},
                        {"runs_finished", 4},
                        {"runs_failed", 1},
                        {"outcomes", {{"succeeded", 3}, {"failed", 1}}},
                        {"failures_by_class", {{"gpu_out_of_memory", 1}}},
                        {"evictions", {{"preempted", 1}}},
                        {"lost_mgpu_ms", 1'800'000'000},
                        {"interventions", 1}};
  json tenant = figures;
  tenant["tenant"] = "red|team";
  json service = figures;
  service["tenant"] = "red|team";
  service["service"] = "coder";
  service["allocated_mgpu_ms"] = 3'600'000'000LL;  // 1 GPU-hour
  json inference = figures;
  inference["allocated_mgpu_ms"] = 3'600'000'000LL;
  inference["services"] = json::array({service});
  tenant["lost_by_kind"] = {{"reclaimed", {{"lost_mgpu_ms", 1'800'000'000}}}};
  return {{"from_ms", 1'795'996'800'000LL},
          {"to_ms", 1'796'083'200'000LL},
          {"currency", "EUR"},
          {"measured", false},
          {"fleet",
           {{"gpus", 8}, {"capacity_mgpu_ms", 8LL * 1000 * 86'400'000}, {"measured", nullptr}}},
          {"total", figures},
          {"tenants", json::array({tenant})},
          {"inference", inference},
          {"evictions", json::array({{{"time_ms", 1'796'000'000'000LL},
                                      {"kind", "preempted"},
                                      {"tenant", "red|team"},
                                      {"job_id", 12},
                                      {"job_name", "<script>alert(1)</script> | x"},
                                      {"run_id", "12.0.0"},
                                      {"mgpu", 2000},
                                      {"lost_since", "checkpoint"},
                                      {"lost_mgpu_ms", 1'800'000'000}}})},
          {"interventions_by_action", {{"node.cordon", 1}}},
          {"interventions", json::array({{{"time_ms", 1'796'000'000'000LL},
                                          {"actor", "ops<b>"},
                                          {"action", "node.cordon"},
                                          {"object", "node/a"},
                                          {"tenant", ""}}})}};
}

TEST(ReportRenderTest, MarkdownHasEverySectionAndExactFigures) {
  const std::string md = RenderOpsMarkdown(Report());
  for (const char* s : {"## Summary", "## Per tenant", "## Inference services (replicas)",
                        "## Runs by outcome and failures by class", "## Evictions",
                        "## Manual interventions by action", "## Manual interventions"}) {
    EXPECT_NE(md.find(s), std::string::npos) << s << "\n" << md;
  }
  EXPECT_NE(md.find("| GPU-hours | 2.000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Capacity GPU-hours | 192.000 |"), std::string::npos) << md;
  // 2 of 192 GPU-hours; average wait 30 s; p95 1.5 m; one failed of four.
  EXPECT_NE(md.find("| Allocation | 1.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Avg wait | 30.0s |"), std::string::npos) << md;
  EXPECT_NE(md.find("| p95 wait | 1.5m |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Failed | 1 (25.0%) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Cost (EUR) | 5.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| GPU util | not measured |"), std::string::npos) << md;
  EXPECT_NE(md.find("| failure class | gpu\\_out\\_of\\_memory | 1 |"), std::string::npos) << md;
  // What reclaims of its borrowed GPUs cost the tenant: 1.8e9 mGPU-ms.
  EXPECT_NE(md.find("## GPU-hours lost to evictions"), std::string::npos) << md;
  EXPECT_NE(md.find("| all services | 1.000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| red\\|team/coder | 1.000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| red\\|team | reclaimed | 0.500 |"), std::string::npos) << md;
}

TEST(ReportRenderTest, MarkdownCellsAreInert) {
  const std::string md = RenderOpsMarkdown(Report());
  EXPECT_EQ(md.find("<script>"), std::string::npos) << md;
  EXPECT_NE(md.find("&lt;script&gt;alert(1)&lt;/script&gt; \\| x"), std::string::npos) << md;
  EXPECT_NE(md.find("| red\\|team |"), std::string::npos) << md;
  // Every row of the evictions table has exactly as many cell borders as its header.
  const auto header = md.find("| Time | Kind | Tenant | Job |");
  ASSERT_NE(header, std::string::npos);
  const auto row_start = md.find("\n| 20", header);
  ASSERT_NE(row_start, std::string::npos);
  const std::string row = md.substr(row_start + 1, md.find('\n', row_start + 1) - row_start - 1);
  std::size_t bars = 0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (row[i] == '|' && (i == 0 || row[i - 1] != '\\')) ++bars;
  }
  EXPECT_EQ(bars, 9u) << row;
}

TEST(ReportRenderTest, HtmlIsSelfContainedAndEscaped) {
  const std::string html = RenderOpsHtml(Report());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos) << html;
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; | x"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>ops&lt;b&gt;</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>192.000</td>"), std::string::npos) << html;
  EXPECT_EQ(HtmlEscape(R"(a&b"c'd)"), "a&amp;b&quot;c&#39;d");
}

// The figures the API added after the table: jobs submitted and failed
// (every reader's, per tenant too) and the alerts opened (fleet, so a
// platform admin's only).
TEST(ReportRenderTest, JobsSubmittedJobsFailedAndAlertsOpened) {
  json r = Report();
  r["total"]["jobs_submitted"] = 7;
  r["total"]["jobs_failed"] = 2;
  r["tenants"][0]["jobs_submitted"] = 5;
  r["tenants"][0]["jobs_failed"] = 1;
  r["fleet"]["alerts_opened"] = 3;
  const std::string md = RenderOpsMarkdown(r);
  EXPECT_NE(md.find("| Jobs | 7 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Jobs failed | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Alerts opened | 3 |"), std::string::npos) << md;
  // The tenant's row: ... Waiting, Jobs, Jobs failed, Runs ...
  EXPECT_NE(md.find("| 1 (oldest 2.0h) | 5 | 1 | 4 |"), std::string::npos) << md;
  const std::string html = RenderOpsHtml(r);
  EXPECT_NE(html.find("<td>Alerts opened</td><td>3</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>Jobs failed</td><td>2</td>"), std::string::npos) << html;

  // berthd keeps no alerts: said, not shown as zero.
  r["fleet"]["alerts_opened"] = nullptr;
  EXPECT_NE(RenderOpsMarkdown(r).find("| Alerts opened | not kept"), std::string::npos);

  // A member's report has no fleet: no alert row, its jobs still shown.
  r["fleet"] = nullptr;
  const std::string member = RenderOpsMarkdown(r);
  EXPECT_EQ(member.find("Alerts opened"), std::string::npos) << member;
  EXPECT_NE(member.find("| Jobs | 7 |"), std::string::npos) << member;

  // A berthd before these figures: a dash, never a made-up zero.
  r["total"].erase("jobs_submitted");
  EXPECT_NE(RenderOpsMarkdown(r).find("| Jobs | — |"), std::string::npos);
}

}  // namespace
}  // namespace berth::cli
