// A run's own credential end to end, over TLS with the real CLI inside the
// job: the job reads BERTH_JOB_TOKEN, BERTH_API_URL and BERTH_CA_PEM from its
// environment and `berth checkpoint` works with no login; the token reads its
// own job and nothing else; it is nowhere in the job's record, the audit
// trail or berthd's log; it still works after berthd restarts while the run
// keeps running, and is refused once the run has ended. A metrics-reader
// made with the CLI reads /metrics and is refused elsewhere.
#include <fmt/format.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

class JobTokenTest : public IntegrationTest {};

TEST_F(JobTokenTest, AJobsOwnTokenReportsItsCheckpointReadsItsJobAndNothingElse) {
  BerthdOptions options = AllInOne();
  options.tls = true;
  Berthd& berthd = NewBerthd(options);
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();

  // The job keeps what it was given, checkpoints with the CLI at once, and
  // again each time the test asks (a file "go<N>"), until "done".
  const auto dir = dir_ / "job";
  OwnedByTenant(dir);
  // The CLI runs from the job's own directory: the build tree may sit under
  // a directory the tenant's uid cannot enter (a clone under a 0700 mktemp).
  const auto cli = dir / "berth";
  std::filesystem::copy_file(BinDir() / "berth", cli);
  std::filesystem::permissions(
      cli, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  const std::string berth = cli.string();
  const std::string d = dir.string();
  const std::string script = fmt::format(
      "printf %s \"$BERTH_JOB_TOKEN\" > {d}/token; printf %s \"$BERTH_API_URL\" > {d}/url; "
      "{b} checkpoint > {d}/cli1.out 2>&1; echo $? > {d}/rc1; "
      "while [ ! -e {d}/go2 ]; do sleep 0.1; done; "
      "{b} checkpoint > {d}/cli2.out 2>&1; echo $? > {d}/rc2; "
      "while [ ! -e {d}/done ]; do sleep 0.1; done",
      fmt::arg("d", d), fmt::arg("b", berth));
  std::string error;
  const std::int64_t job = berthd.Submit(JobSpecJson("own", Sh(script), 1), &error);
  ASSERT_NE(job, 0) << error;
  const std::int64_t other = berthd.Submit(JobSpecJson("other", {"sleep", "300"}, 1), &error);
  ASSERT_NE(other, 0) << error;
  ASSERT_TRUE(WaitFor([&] { return !ReadFile(dir / "rc1").empty(); }, 30s))
      << berthd.Job(job).dump(2);

  // Inside the job, `berth checkpoint` alone worked: no login, no --ca.
  EXPECT_EQ(ReadFile(dir / "rc1"), "0\n") << ReadFile(dir / "cli1.out");
  EXPECT_NE(ReadFile(dir / "cli1.out").find("checkpoint at"), std::string::npos)
      << ReadFile(dir / "cli1.out");
  EXPECT_EQ(ReadFile(dir / "url"), berthd.url());
  const std::string token = ReadFile(dir / "token");
  ASSERT_TRUE(token.starts_with(fmt::format("berth_j{}r0a1_", job))) << token;
  json placement = berthd.Job(job).at("placement");
  ASSERT_FALSE(placement.empty());
  EXPECT_TRUE(placement[0]["last_checkpoint_ms"].is_number()) << placement.dump(2);

  Http as_job(berthd.api_port(), 10s, berthd.ca_file());
  as_job.set_token(token);
  const std::string own = fmt::format("/v1/jobs/{}", job);
  const std::string theirs = fmt::format("/v1/jobs/{}", other);
  EXPECT_EQ(as_job.Get(own).status, 200);
  EXPECT_EQ(as_job.Get(own + "/why").status, 200);
  auto r = as_job.Post(own + "/checkpoint", "", "application/json");
  EXPECT_EQ(r.status, 200) << r.text;
  // Another job of its own tenant is as absent as another tenant's.
  r = as_job.Get(theirs);
  EXPECT_EQ(r.status, 404) << r.text;
  EXPECT_EQ(r.text.find("sleep"), std::string::npos) << r.text;
  EXPECT_EQ(as_job.Post(theirs + "/checkpoint", "", "application/json").status, 404);
  EXPECT_EQ(as_job.Get(theirs + "/why").status, 404);
  // Every other route: 403, whatever the object.
  struct Call {
    std::string method;
    std::string path;
  };
  for (const Call& c : std::vector<Call>{{"GET", "/v1/jobs"},
                                         {"POST", "/v1/jobs"},
                                         {"POST", own + "/cancel"},
                                         {"POST", theirs + "/cancel"},
                                         {"GET", own + "/logs"},
                                         {"GET", "/metrics"},
                                         {"POST", "/v1/policy"},
                                         {"GET", "/v1/whoami"},
                                         {"POST", "/v1/tokens"},
                                         {"GET", "/v1/nodes"}}) {
    r = c.method == "GET" ? as_job.Get(c.path)
                          : as_job.Post(c.path, JobSpecJson("x", {"true"}), "application/json");
    EXPECT_EQ(r.status, 403) << c.method << " " << c.path << ": " << r.text;
  }
  EXPECT_EQ(berthd.JobState(job), "Running");
  EXPECT_EQ(berthd.JobState(other), "Running");

  // Its calls are the job's in the audit trail, with its tenant; the
  // token itself is nowhere: not in the record, the trail or the log.
  auto audit = admin.Get("/v1/audit?limit=5000");  // one page: this test writes far fewer
  ASSERT_EQ(audit.status, 200);
  int mine = 0;
  for (const auto& rec : audit.body.at("records")) {
    if (rec.value("actor", "") != fmt::format("job/{} run {}.0.1", job, job)) continue;
    ++mine;
    EXPECT_EQ(rec.value("tenant", ""), "default") << rec.dump();
  }
  EXPECT_GE(mine, 3) << audit.text;  // two checkpoints, a cancel refused...
  const std::string secret = token.substr(token.rfind('_') + 1);
  EXPECT_EQ(audit.text.find(secret), std::string::npos);
  EXPECT_EQ(admin.Get(own).text.find(secret), std::string::npos);
  EXPECT_EQ(berthd.log().find(secret), std::string::npos);

  // berthd restarts; the run keeps running and its token keeps working.
  berthd.Stop();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  WriteFile(dir / "go2", "");
  ASSERT_TRUE(WaitFor([&] { return !ReadFile(dir / "rc2").empty(); }, 30s));
  EXPECT_EQ(ReadFile(dir / "rc2"), "0\n") << ReadFile(dir / "cli2.out");
  EXPECT_EQ(as_job.Get(own).status, 200);

  // The run ends: the same token is refused, for its own job too.
  WriteFile(dir / "done", "");
  ASSERT_TRUE(berthd.WaitForTerminal(job, 30s));
  EXPECT_EQ(berthd.JobState(job), "Succeeded") << berthd.Job(job).dump(2);
  r = as_job.Get(own);
  EXPECT_EQ(r.status, 401) << r.text;
  EXPECT_NE(r.text.find("has ended"), std::string::npos) << r.text;
  EXPECT_EQ(as_job.Post(own + "/checkpoint", "", "application/json").status, 401);
  EXPECT_EQ(berthd.log().find(secret), std::string::npos);
}

TEST_F(JobTokenTest, AMetricsReaderReadsMetricsAndNothingElse) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const Http& admin = berthd.http();
  auto made = Cli(berthd, {"identity", "create", "prometheus", "--service", "--metrics-reader"});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_NE(made.out.find("metrics-reader"), std::string::npos) << made.out;
  // Not with a role in a tenant.
  auto mixed = Cli(berthd, {"identity", "create", "prom2", "--service", "--metrics-reader",
                            "--tenant", "default=viewer"});
  EXPECT_EQ(mixed.exit_code, 1) << mixed.out << mixed.err;
  EXPECT_NE(mixed.err.find("metrics_reader"), std::string::npos) << mixed.err;
  auto t = admin.Post("/v1/tokens", json{{"identity", "prometheus"}}.dump(), "application/json");
  ASSERT_EQ(t.status, 201) << t.text;
  Http prom(berthd.api_port());
  prom.set_token(t.body.at("token").get<std::string>());
  auto r = prom.Get("/metrics");
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_NE(r.text.find("berth_"), std::string::npos);
  for (const std::string path : {"/v1/jobs", "/v1/nodes", "/v1/policy", "/v1/whoami", "/v1/prices",
                                 "/v1/audit", "/v1/identities"}) {
    r = prom.Get(path);
    EXPECT_EQ(r.status, 403) << path << ": " << r.text;
  }
  EXPECT_EQ(prom.Post("/v1/jobs", JobSpecJson("x", {"true"}), "application/json").status, 403);
  // It takes no role later either.
  r = admin.Post("/v1/tenants/default/members",
                 json{{"identity", "prometheus"}, {"role", "member"}}.dump(), "application/json");
  EXPECT_EQ(r.status, 400) << r.text;
}

}  // namespace
}  // namespace berth::it
