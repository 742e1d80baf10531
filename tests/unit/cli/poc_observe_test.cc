// `berth poc observe`'s table from canned operations-report documents: the
// UTC days and --days' range, each figure taken from the report (mean wait
// from the exact sums, p95 as the server gave it, the period's p95 from the
// period's own report rather than an average of the days'), "—" with a
// reason in the notes where a report lacks a figure (no telemetry, no job
// started, alerts for a member or a tenant), cost per tenant, and HTML that
// is self-contained and keeps server values inert.
#include "cli/poc_observe.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace berth::cli::poc {
namespace {

using nlohmann::json;

constexpr TimeMs kDay = 24LL * 3600 * 1000;
// 2026-12-07T10:00:00Z
constexpr TimeMs kNow = 1796637600000;

json ObsFigures(const std::string& tenant, int submitted, int failed, int started,
                std::int64_t total_wait, std::int64_t p95, std::int64_t cost_micros,
                int interventions) {
  json f{{"jobs_submitted", submitted},
         {"jobs_failed", failed},
         {"wait", {{"started", started}, {"total_wait_ms", total_wait}, {"p95_wait_ms", p95}}},
         {"measured",
          {{"runs_sampled", 2},
           {"gpu_utilization_pct", 61.5},
           {"gpu_memory_utilization_pct", 40.25},
           {"memory_capacity_sum", 1000}}},
         {"cost_micros", cost_micros},
         {"cost", "x"},
         {"interventions", interventions}};
  if (!tenant.empty()) f["tenant"] = tenant;
  return f;
}

json ObsOps(json total, std::vector<json> tenants, json fleet) {
  return {{"currency", "EUR"},
          {"measured", true},
          {"fleet", std::move(fleet)},
          {"total", std::move(total)},
          {"tenants", std::move(tenants)}};
}

ObserveMeta ObsMeta(std::string tenant = "") {
  return {"http://127.0.0.1:7460", "root", tenant.empty(), std::move(tenant), kNow};
}

TEST(PocObserve, DaysAreUtcDaysOldestFirstTodayUpToNow) {
  auto days = ObserveDays(kNow, 3);
  ASSERT_EQ(days.size(), 3U);
  EXPECT_EQ(days[0].label, "2026-12-05");
  EXPECT_EQ(days[2].label, "2026-12-07");
  EXPECT_EQ(days[2].from, kNow - 10 * 3600 * 1000);
  EXPECT_EQ(days[2].to, kNow);
  EXPECT_TRUE(days[2].partial);
  EXPECT_EQ(days[1].to - days[1].from, kDay);
  EXPECT_EQ(days[1].to, days[2].from);
  EXPECT_FALSE(days[0].partial);
  // At midnight today is a 1 ms window, never an empty one.
  auto midnight = ObserveDays(kNow - 10 * 3600 * 1000, 1);
  EXPECT_EQ(midnight[0].to - midnight[0].from, 1);
}

TEST(PocObserve, DaysMustBeOneToNinetyAndTheErrorNamesDays) {
  EXPECT_TRUE(CheckObserveDays(1).has_value());
  EXPECT_TRUE(CheckObserveDays(90).has_value());
  for (std::int64_t bad : {0LL, -1LL, 91LL}) {
    auto r = CheckObserveDays(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().field, "days");
    EXPECT_NE(r.error().message.find("--days must be from 1 to 90"), std::string::npos);
  }
}

TEST(PocObserve, RowsTakeTheReportsFiguresAndThePeriodItsOwnPercentile) {
  auto days = ObserveDays(kNow, 2);
  const json fleet{{"alerts_opened", 3}};
  std::vector<ObserveSource> src{
      {days[0],
       ObsOps(ObsFigures("", 4, 1, 3, 10'000, 7'000, 5'000'000, 2),
              {ObsFigures("red", 4, 1, 3, 10'000, 7'000, 5'000'000, 2)}, fleet),
       ""},
      {days[1],
       ObsOps(ObsFigures("", 2, 0, 2, 3'000, 2'000, 1'250'000, 0),
              {ObsFigures("blue", 1, 0, 1, 1'000, 1'000, 250'000, 0),
               ObsFigures("red", 1, 0, 1, 2'000, 2'000, 1'000'000, 0)},
              fleet),
       ""}};
  // The period's p95 is the server's over all five jobs (9 s), neither the
  // mean (4.5 s) nor the largest (7 s) of the days' p95s.
  ObserveSource period{{"whole period", days[0].from, days[1].to, true},
                       ObsOps(ObsFigures("", 6, 1, 5, 13'000, 9'000, 6'250'000, 2), {}, fleet),
                       ""};
  const json o = BuildObserve(src, period, ObsMeta());
  ASSERT_EQ(o["rows"].size(), 2U);
  const json& d0 = o["rows"][0];
  EXPECT_EQ(d0["jobs"], 4);
  EXPECT_EQ(d0["failed_jobs"], 1);
  EXPECT_EQ(d0["mean_wait_ms"], 3333);  // floor(10000 / 3)
  EXPECT_EQ(d0["p95_wait_ms"], 7000);
  EXPECT_DOUBLE_EQ(d0["gpu_utilization_pct"].get<double>(), 61.5);
  EXPECT_DOUBLE_EQ(d0["gpu_memory_utilization_pct"].get<double>(), 40.25);
  EXPECT_EQ(d0["alerts_opened"], 3);
  EXPECT_EQ(d0["interventions"], 2);
  EXPECT_EQ(d0["cost"]["red"]["cost_micros"], 5'000'000);
  EXPECT_EQ(o["rows"][1]["cost_micros"], 1'250'000);
  EXPECT_EQ(o["period"]["p95_wait_ms"], 9000);
  EXPECT_EQ(o["period"]["mean_wait_ms"], 2600);
  EXPECT_EQ(o["tenants"], (json{"blue", "red"}));
  EXPECT_EQ(o["currency"], "EUR");
  EXPECT_EQ(o["days"], 2);

  const std::string md = RenderObserveMarkdown(o);
  EXPECT_NE(md.find("| 2026-12-07 (to now) | 2 | 0 | 1.5s | 2.0s | 61.5% | 40.2% | 3 | 0 | 1.25 |"),
            std::string::npos)
      << md;
  // Cost per tenant: blue had no usage the first day.
  EXPECT_NE(md.find("| 2026-12-06 | 0.00 | 5.00 |"), std::string::npos) << md;
}

TEST(PocObserve, AFigureTheReportLacksIsADashWithItsReasonNeverAZero) {
  auto days = ObserveDays(kNow, 1);
  json total = ObsFigures("", 0, 0, 0, 0, 0, 0, 0);
  total["measured"] = nullptr;            // no telemetry
  json ops = ObsOps(total, {}, nullptr);  // a member: no fleet section
  ops["measured"] = false;
  std::vector<ObserveSource> src{{days[0], ops, ""}};
  ObserveMeta member = ObsMeta();
  member.platform_admin = false;
  const json o = BuildObserve(src, {days[0], ops, ""}, member);
  const json& row = o["rows"][0];
  EXPECT_EQ(row["jobs"], 0);  // counted: none
  EXPECT_TRUE(row["mean_wait_ms"].is_null());
  EXPECT_TRUE(row["p95_wait_ms"].is_null());
  EXPECT_TRUE(row["gpu_utilization_pct"].is_null());
  EXPECT_TRUE(row["gpu_memory_utilization_pct"].is_null());
  EXPECT_TRUE(row["alerts_opened"].is_null());
  const std::string notes = o["notes"].dump();
  EXPECT_NE(notes.find("no GPU telemetry"), std::string::npos) << notes;
  EXPECT_NE(notes.find("where none started"), std::string::npos) << notes;
  EXPECT_NE(notes.find("for platform admins only"), std::string::npos) << notes;
  const std::string md = RenderObserveMarkdown(o);
  EXPECT_NE(md.find("| 0 | 0 | — | — | — | — | — | 0 |"), std::string::npos) << md;

  // An older berthd without jobs_submitted or alerts_opened: — as well.
  json old = ObsOps(ObsFigures("", 0, 0, 1, 5, 5, 0, 0), {}, json::object());
  old["total"].erase("jobs_submitted");
  old["total"].erase("jobs_failed");
  const json o2 = BuildObserve({{days[0], old, ""}}, {days[0], old, ""}, ObsMeta());
  EXPECT_TRUE(o2["rows"][0]["jobs"].is_null());
  EXPECT_TRUE(o2["rows"][0]["alerts_opened"].is_null());
  EXPECT_NE(o2["notes"].dump().find("does not count alerts"), std::string::npos);

  // A window the API refused: its row is empty and says why.
  const json o3 =
      BuildObserve({{days[0], nullptr, "too many rows"}}, {days[0], old, ""}, ObsMeta());
  EXPECT_EQ(o3["rows"][0]["error"], "too many rows");
  EXPECT_TRUE(o3["rows"][0]["jobs"].is_null());
  EXPECT_NE(o3["notes"].dump().find("too many rows"), std::string::npos);
}

TEST(PocObserve, OneTenantsTableShowsItsFiguresAndNoOtherTenant) {
  auto days = ObserveDays(kNow, 1);
  json ops = ObsOps(ObsFigures("", 5, 2, 4, 8'000, 3'000, 9'000'000, 1),
                    {ObsFigures("blue", 1, 0, 1, 1'000, 1'000, 2'000'000, 0),
                     ObsFigures("red", 4, 2, 3, 7'000, 3'000, 7'000'000, 1)},
                    json{{"alerts_opened", 4}});
  const json o = BuildObserve({{days[0], ops, ""}}, {days[0], ops, ""}, ObsMeta("red"));
  const json& row = o["rows"][0];
  EXPECT_EQ(row["jobs"], 4);
  EXPECT_EQ(row["failed_jobs"], 2);
  EXPECT_EQ(row["interventions"], 1);
  EXPECT_TRUE(row["alerts_opened"].is_null());  // the fleet's, not red's
  EXPECT_EQ(o["tenants"], json{"red"});
  EXPECT_FALSE(row["cost"].contains("blue"));
  EXPECT_EQ(o["tenant"], "red");

  // A tenant absent from the report had nothing that day: zero counts,
  // undefined averages.
  const json absent = BuildObserve({{days[0], ops, ""}}, {days[0], ops, ""}, ObsMeta("green"));
  EXPECT_EQ(absent["rows"][0]["jobs"], 0);
  EXPECT_TRUE(absent["rows"][0]["mean_wait_ms"].is_null());
  EXPECT_NE(absent["notes"].dump().find("tenant green is absent"), std::string::npos);
}

TEST(PocObserve, TheHtmlIsSelfContainedAndInert) {
  auto days = ObserveDays(kNow, 1);
  json ops = ObsOps(ObsFigures("", 1, 0, 1, 1, 1, 1, 0),
                    {ObsFigures("<img src=x onerror=alert(1)>", 1, 0, 1, 1, 1, 1, 0)},
                    json{{"alerts_opened", 0}});
  const json o = BuildObserve({{days[0], ops, ""}}, {days[0], ops, ""}, ObsMeta());
  const std::string html = RenderObserveHtml(o);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&lt;img"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://127.0.0.1:7460"));  // only the server named
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace berth::cli::poc
