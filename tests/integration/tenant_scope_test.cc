// Tenancy in one place, against a real berthd: a member of tenant red lists
// quota requests, usage, budgets and the operations report and never sees a
// row of tenant blue, because every list reads the store through the
// request's tenant scope (model/tenant_scope.h) and the store filters before
// its LIMIT: a page of red's requests is full even when blue's newer
// requests come first, and the read cap counts red's rows only.
#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

TEST_F(IntegrationTest, AMemberOfOneTenantListsNoRowOfAnotherAndGetsFullPages) {
  // Red's rows fit the cap; blue's sixteen runs alone do not.
  Berthd& berthd = NewBerthd(AllInOne({"--report-max-rows", "15"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin.Post("/v1/policy", kRedBlue).status, 201);
  const std::string token = MemberToken(admin, "rita", "red", "member");
  ASSERT_FALSE(token.empty());
  Http rita(berthd.api_port());
  rita.set_token(token);

  // One red run, sixteen blue runs.
  std::vector<std::int64_t> jobs;
  jobs.push_back(
      berthd.Submit(JobSpecJson("r", Sh("sleep 1"), 1, {{"tenant", "red"}, {"queue", "main"}})));
  for (int i = 0; i < 16; ++i) {
    jobs.push_back(
        berthd.Submit(JobSpecJson("b", Sh("true"), 1, {{"tenant", "blue"}, {"queue", "main"}})));
  }
  for (auto id : jobs) {
    ASSERT_GT(id, 0);
    ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
  }
  // Two red quota requests, then three newer blue ones (first in the list).
  auto file = [&](const std::string& tenant, int gpus) {
    auto r = admin.Post("/v1/quota-requests",
                        json{{"queue", tenant + "/main"},
                             {"resource", "gpus"},
                             {"guaranteed", gpus},
                             {"reason", "scope"}}
                            .dump(),
                        "application/json");
    ASSERT_EQ(r.status, 201) << r.text;
  };
  file("red", 1);
  file("red", 2);
  for (int i = 0; i < 3; ++i) file("blue", 3 + i);
  for (const char* t : {"red", "blue"}) {
    ASSERT_EQ(admin
                  .Post(std::string("/v1/budgets/") + t, json{{"gpu_hours", "10"}}.dump(),
                        "application/json")
                  .status,
              200);
  }

  // A page of two: red's two requests, not an empty page after blue's.
  auto requests = rita.Get("/v1/quota-requests?limit=2");
  ASSERT_EQ(requests.status, 200) << requests.text;
  ASSERT_EQ(requests.body.at("requests").size(), 2U) << requests.text;
  for (const auto& r : requests.body.at("requests")) EXPECT_EQ(r.at("tenant"), "red");
  EXPECT_EQ(admin.Get("/v1/quota-requests").body.at("requests").size(), 5U);

  auto budgets = rita.Get("/v1/budgets");
  ASSERT_EQ(budgets.status, 200) << budgets.text;
  ASSERT_EQ(budgets.body.at("budgets").size(), 1U) << budgets.text;
  EXPECT_EQ(budgets.body.at("budgets")[0].at("tenant"), "red");

  // Usage: red's one run, read within the cap that the fleet's seventeen runs
  // exceed (an admin's read of the same window is refused naming it). Red's
  // report (its jobs, runs and audit records) fits the cap too.
  auto records = rita.Get("/v1/usage/records?from=0");
  ASSERT_EQ(records.status, 200) << records.text;
  ASSERT_EQ(records.body.at("records").size(), 1U) << records.text;
  EXPECT_EQ(records.body.at("records")[0].at("tenant"), "red");
  auto usage = rita.Get("/v1/usage?from=0&by=tenant");
  ASSERT_EQ(usage.status, 200) << usage.text;
  EXPECT_EQ(usage.text.find("blue"), std::string::npos) << usage.text;
  EXPECT_EQ(usage.body.at("records"), 1);
  EXPECT_EQ(admin.Get("/v1/usage/records?from=0").status, 400);

  auto report = rita.Get("/v1/reports/ops?from=0");
  ASSERT_EQ(report.status, 200) << report.text;
  EXPECT_EQ(report.text.find("blue"), std::string::npos) << report.text;
  EXPECT_NE(report.text.find("red"), std::string::npos) << report.text;

  auto listed = rita.Get("/v1/jobs");
  ASSERT_EQ(listed.status, 200) << listed.text;
  ASSERT_EQ(listed.body.at("jobs").size(), 1U) << listed.text;
  EXPECT_EQ(listed.body.at("jobs")[0].at("id"), jobs[0]);
}

}  // namespace
}  // namespace berth::it
