// Bounded reads against a real berthd: the CLI follows the job list and the
// audit trail page after page (more rows than one page), stops early at
// --limit, lists summaries unless asked for the full spec, and a report
// window holding more rows than --report-max-rows is refused naming it.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

TEST_F(IntegrationTest, TheCliFollowsPagesAndReportsStayWithinTheirCap) {
  Berthd& berthd =
      NewBerthd(AllInOne({"--rate-limit", "0", "--report-max-rows", "50", "--stop-grace", "1s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  // 520 submissions: more jobs and more audit records than one page (500).
  // Each asks for every GPU of the node, so one runs and the rest wait.
  constexpr int kJobs = 520;
  std::set<std::int64_t> submitted;
  for (int i = 0; i < kJobs; ++i) {
    std::string error;
    const auto id = berthd.Submit(JobSpecJson(fmt::format("p{}", i), {"sleep", "300"}, 8), &error);
    ASSERT_GT(id, 0) << error;
    submitted.insert(id);
  }

  // berth jobs: every job, newest first, each once, as summaries.
  auto r = Cli(berthd, {"jobs", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json jobs = json::parse(r.out).at("jobs");
  ASSERT_EQ(jobs.size(), static_cast<std::size_t>(kJobs));
  std::set<std::int64_t> listed;
  std::int64_t previous = std::numeric_limits<std::int64_t>::max();
  for (const auto& j : jobs) {
    const std::int64_t id = j.at("id");
    EXPECT_LT(id, previous) << "newest first, no repeats";
    previous = id;
    listed.insert(id);
    EXPECT_FALSE(j.contains("spec")) << "a summary carries no spec";
    EXPECT_EQ(j.at("resources").at("gpus"), 8);
  }
  EXPECT_EQ(listed, submitted);
  // The table shows them all too, with the GPUs from the summary.
  r = Cli(berthd, {"jobs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), kJobs + 1);
  EXPECT_NE(r.out.find("1x8"), std::string::npos) << r.out.substr(0, 400);
  // --limit stops early, across a page boundary; --full brings the spec.
  r = Cli(berthd, {"jobs", "--limit", "505", "--full", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json some = json::parse(r.out).at("jobs");
  ASSERT_EQ(some.size(), 505U);
  EXPECT_EQ(some.front().at("id"), *submitted.rbegin());
  EXPECT_EQ(some.back().at("spec").at("replicas"), 1);

  // The API: a page names the next; a page larger than the maximum is
  // refused naming limit and the maximum.
  auto page = berthd.http().Get("/v1/jobs?limit=3");
  ASSERT_EQ(page.status, 200) << page.text;
  EXPECT_EQ(page.body.at("jobs").size(), 3U);
  ASSERT_TRUE(page.body.at("next").is_string());
  auto big = berthd.http().Get("/v1/jobs?limit=5001");
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(big.body["error"].value("field", ""), "limit");
  EXPECT_NE(big.text.find("5000"), std::string::npos) << big.text;

  // berth audit: the newest 1000 by default over two pages, oldest first;
  // --limit 0 every record (the submissions plus berthd's own).
  r = Cli(berthd, {"audit", "--action", "job.submit", "--limit", "0", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json records = json::parse(r.out).at("records");
  ASSERT_EQ(records.size(), static_cast<std::size_t>(kJobs));
  for (std::size_t i = 1; i < records.size(); ++i) {
    EXPECT_LT(records[i - 1].at("seq").get<std::int64_t>(),
              records[i].at("seq").get<std::int64_t>());
  }
  r = Cli(berthd, {"audit", "--action", "job.submit", "--limit", "510", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json newest = json::parse(r.out).at("records");
  ASSERT_EQ(newest.size(), 510U);
  EXPECT_EQ(newest.back().at("seq"), records.back().at("seq"));

  // A report over all time holds 520 jobs: more than the cap of 50 rows.
  auto report = berthd.http().Get("/v1/reports/ops?from=0");
  EXPECT_EQ(report.status, 400) << report.text;
  EXPECT_EQ(report.body["error"].value("field", ""), "from") << report.text;
  EXPECT_NE(report.text.find("more than 50"), std::string::npos) << report.text;
  EXPECT_NE(report.text.find("--report-max-rows"), std::string::npos) << report.text;
  // Usage over the same window reads one run: within the cap.
  EXPECT_EQ(berthd.http().Get("/v1/usage?from=0").status, 200);
  EXPECT_EQ(berthd.http().Get("/v1/usage/records?from=0").status, 200);
}

}  // namespace
}  // namespace berth::it
