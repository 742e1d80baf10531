// Tenancy in one place, against a real berthd: a member of tenant red lists
// quota requests, usage, budgets and the operations report and never sees a
// row of tenant blue, because every list reads the store through the
// request's tenant scope (model/tenant_scope.h) and the store filters before
// its LIMIT: a page of red's requests is full even when blue's newer
// requests come first, and the read cap counts red's rows only.
#include <sstream>

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
  // One job's records: red's own job has its run; blue's job, for a member
  // of red, has none (the same empty answer as a job with no runs).
  auto own = rita.Get("/v1/usage/records?from=0&job=" + std::to_string(jobs[0]));
  ASSERT_EQ(own.status, 200) << own.text;
  ASSERT_EQ(own.body.at("records").size(), 1U) << own.text;
  EXPECT_EQ(own.body.at("records")[0].at("job_id"), jobs[0]);
  EXPECT_GT(own.body.at("total").at("mgpu_ms").get<std::int64_t>(), 0) << own.text;
  auto foreign = rita.Get("/v1/usage/records?from=0&job=" + std::to_string(jobs[1]));
  ASSERT_EQ(foreign.status, 200) << foreign.text;
  EXPECT_EQ(foreign.body.at("records").size(), 0U) << foreign.text;
  EXPECT_EQ(foreign.text.find("blue"), std::string::npos) << foreign.text;
  auto bad = rita.Get("/v1/usage/records?from=0&job=abc");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body.at("error").at("field"), "job") << bad.text;

  auto report = rita.Get("/v1/reports/ops?from=0");
  ASSERT_EQ(report.status, 200) << report.text;
  EXPECT_EQ(report.text.find("blue"), std::string::npos) << report.text;
  EXPECT_NE(report.text.find("red"), std::string::npos) << report.text;

  auto listed = rita.Get("/v1/jobs");
  ASSERT_EQ(listed.status, 200) << listed.text;
  ASSERT_EQ(listed.body.at("jobs").size(), 1U) << listed.text;
  EXPECT_EQ(listed.body.at("jobs")[0].at("id"), jobs[0]);
}

// GET /v1/queues and `berth queues`: a member reads its tenant's queues with
// their GPU guarantee against what its running job holds, and nothing of
// the other tenant's; the admin's CLI shows both in GPUs.
TEST_F(IntegrationTest, QueuesShowTheirGuaranteeAgainstUseToTheirTenantOnly) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin
                .Post("/v1/policy", R"(queues:
  - name: default
    children:
      - name: default
  - name: red
    quota:
      gpus: {guaranteed: 2}
    children:
      - name: main
        quota:
          gpus: {guaranteed: 1, borrow_limit: 2}
  - name: blue
    children:
      - name: main
)")
                .status,
            201);
  const std::string token = MemberToken(admin, "rita", "red", "member");
  ASSERT_FALSE(token.empty());
  Http rita(berthd.api_port());
  rita.set_token(token);
  const std::int64_t red =
      berthd.Submit(JobSpecJson("r", Sh("sleep 30"), 2, {{"tenant", "red"}, {"queue", "main"}}));
  const std::int64_t blue =
      berthd.Submit(JobSpecJson("b", Sh("sleep 30"), 1, {{"tenant", "blue"}, {"queue", "main"}}));
  ASSERT_GT(red, 0);
  ASSERT_GT(blue, 0);
  ASSERT_TRUE(berthd.WaitForState(red, "Running", 20s));
  ASSERT_TRUE(berthd.WaitForState(blue, "Running", 20s));

  auto mine = rita.Get("/v1/queues");
  ASSERT_EQ(mine.status, 200) << mine.text;
  EXPECT_EQ(mine.text.find("blue"), std::string::npos) << mine.text;
  ASSERT_EQ(mine.body.at("queues").size(), 2U) << mine.text;
  const json& main = mine.body.at("queues")[1];
  EXPECT_EQ(main.at("queue"), "red/main");
  EXPECT_EQ(main.at("used_mgpu"), 2000);
  EXPECT_EQ(main.at("guaranteed_mgpu"), 1000);
  EXPECT_EQ(main.at("borrowed_mgpu"), 1000);
  EXPECT_EQ(main.at("running_jobs"), 1);
  const json& top = mine.body.at("queues")[0];
  EXPECT_EQ(top.at("queue"), "red");
  EXPECT_EQ(top.at("used_mgpu"), 2000);
  EXPECT_EQ(top.at("borrowed_mgpu"), 0);
  EXPECT_TRUE(rita.Get("/v1/queues?tenant=blue").body.at("queues").empty());
  EXPECT_EQ(rita.Get("/v1/queues?colour=red").status, 400);

  const CommandResult cli = Cli(berthd, {"queues"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("blue/main"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("red/main"), std::string::npos) << cli.out;
  // red/main: training, guaranteed 1, used 2, borrowed 1, idle 0, lendable 0,
  // limit 2, 1 job.
  std::vector<std::string> row;
  std::istringstream lines(cli.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("red/main ")) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) row.push_back(w);
  }
  EXPECT_EQ(row,
            (std::vector<std::string>{"red/main", "training", "1", "2", "1", "0", "0", "2", "1"}))
      << cli.out;
  const CommandResult one = Cli(berthd, {"queues", "--tenant", "blue", "-o", "json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto parsed = json::parse(one.out, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << one.out;
  ASSERT_EQ(parsed.at("queues").size(), 2U);
  EXPECT_EQ(parsed.at("queues")[1].at("used_mgpu"), 1000);
  EXPECT_TRUE(parsed.at("queues")[1].at("guaranteed_mgpu").is_null());
}

}  // namespace
}  // namespace berth::it
