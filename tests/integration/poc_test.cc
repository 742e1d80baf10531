// `berth poc run` end to end against a real all-in-one berthd on a
// simulated node: the built-in suite passes every case it can judge, skips
// the ones whose precondition the API cannot show (podman, a gateway) and
// says why, writes the three reports, and leaves nothing behind (its jobs
// ended, its identities disabled, the policy back at the text it found).
// A suite whose policy does not enforce a quota makes exactly the case that
// checks it fail, with its risk and its re-test in the report. It refuses
// to run on a cluster --allow-on does not name, and then changes nothing.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A whole suite with its setup, jobs and cleanup takes well under a minute
// on the 2-core machine; the limit is for a loaded one.
constexpr auto kPocRunTimeout = 300s;

class PocTest : public IntegrationTest {
 protected:
  Berthd& Start() {
    Berthd& b = NewBerthd(AllInOne());
    EXPECT_TRUE(b.Start());
    return b;
  }

  CommandResult Poc(const Berthd& b, std::vector<std::string> args) const {
    std::vector<std::string> all{"--server", b.url(), "poc"};
    all.insert(all.end(), args.begin(), args.end());
    return RunCommand(BinDir() / "berth", all, dir_.path(), kPocRunTimeout);
  }

  static json ReadJson(const std::filesystem::path& path) {
    return json::parse(ReadFile(path), nullptr, false);
  }

  // Everything the run made is gone or ended: its jobs terminal, its
  // identities disabled, the policy's text what it was before.
  void ExpectCleanedUp(const Berthd& b, const json& report, const std::string& policy_before) {
    std::set<std::uint64_t> jobs;
    for (const auto& c : report["cases"]) {
      for (const auto& id : c["evidence"]["jobs"]) jobs.insert(id.get<std::uint64_t>());
    }
    for (auto id : jobs) {
      auto job = b.http().Get(fmt::format("/v1/jobs/{}", id));
      ASSERT_EQ(job.status, 200) << job.text;
      const std::string state = job.body["state"];
      EXPECT_TRUE(state == "Succeeded" || state == "Failed" || state == "Cancelled")
          << "job " << id << " left " << state;
    }
    auto policy = b.http().Get("/v1/policy");
    ASSERT_EQ(policy.status, 200);
    EXPECT_EQ(policy.body["yaml"], policy_before);
    EXPECT_EQ(policy.body["version"], report["cleanup"]["policy"]["as_version"]);
    const std::string prefix = report["run"]["id"];
    auto ids = GetAllPages(b.http(), "/v1/identities", "identities");
    ASSERT_EQ(ids.status, 200) << ids.text;
    int ours = 0;
    for (const auto& id : ids.body["identities"]) {
      if (!id.value("name", "").starts_with(prefix + "-")) continue;
      ++ours;
      EXPECT_TRUE(id.value("disabled", false)) << id.dump();
    }
    EXPECT_EQ(ours, 3);
    EXPECT_TRUE(report["cleanup"]["problems"].empty()) << report["cleanup"].dump();
  }
};

TEST_F(PocTest, TheDefaultSuitePassesWhatItCanJudgeSkipsHonestlyAndCleansUp) {
  Berthd& b = Start();
  auto before = b.http().Get("/v1/policy");
  ASSERT_EQ(before.status, 200);
  const std::string policy_before = before.body["yaml"];
  const std::int64_t version_before = before.body["version"];

  // Not named: refused, and nothing changed.
  auto refused = Poc(b, {"run", "--out", (dir_ / "refused").string(), "--allow-on", "prod"});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("--allow-on " + b.url()), std::string::npos) << refused.err;
  EXPECT_EQ(b.http().Get("/v1/policy").body["version"], version_before);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "refused" / "report.json"));

  const auto out = dir_ / "report";
  auto run = Poc(b, {"run", "--out", out.string(), "--allow-on", b.url()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  const json report = ReadJson(out / "report.json");
  ASSERT_FALSE(report.is_discarded()) << "report.json is not JSON";
  std::map<std::string, std::string> verdicts;
  for (const auto& c : report["cases"]) {
    verdicts[c["id"]] = c["verdict"];
    EXPECT_NE(c["verdict"], "fail") << c.dump(2);
  }
  // What the API cannot show is skipped, naming the precondition.
  for (const char* id : {"image-pull-failure-explained", "service-scales-from-zero"}) {
    EXPECT_EQ(verdicts[id], "skipped") << id;
  }
  for (const auto& c : report["cases"]) {
    if (c["verdict"] != "skipped") continue;
    const std::string reason = c["reason"];
    EXPECT_TRUE(reason.find("podman") != std::string::npos ||
                reason.find("gateway") != std::string::npos)
        << reason;
  }
  EXPECT_EQ(report["summary"]["passed"].get<int>() + 2, report["summary"]["cases"].get<int>());
  EXPECT_GE(report["summary"]["passed"].get<int>(), 9);
  // Evidence from the API: jobs, the audit records the audit cases found.
  EXPECT_FALSE(report["cases"][1]["evidence"]["jobs"].empty());
  for (const auto& c : report["cases"]) {
    if (c["id"] == "cancel-stops-a-job" || c["id"] == "admin-action-audited") {
      EXPECT_FALSE(c["evidence"]["audit_records"].empty()) << c.dump(2);
    }
  }
  // A sample carries the per-sample fields.
  bool timed = false;
  for (const auto& c : report["cases"]) {
    for (const auto& s : c["samples"]) {
      if (s["state"] == "Succeeded" && s["queueing_ms"].is_number() && s["run_ms"].is_number()) {
        timed = true;
        EXPECT_NE(s["tenant"], "-");
        EXPECT_NE(s["user"], "-");
      }
    }
  }
  EXPECT_TRUE(timed) << "no succeeded sample with its queueing and run time";
  EXPECT_EQ(report["environment"]["policy_version_before"], version_before);
  EXPECT_EQ(report["environment"]["gpus"], 8);
  // berthd's release, from GET /healthz: the one the CLI was built with.
  EXPECT_EQ(report["environment"]["berthd_version"], report["environment"]["cli_version"]);
  EXPECT_EQ(report["environment"]["suite"]["sha256"].get<std::string>().size(), 64U);
  EXPECT_TRUE(report["conclusions"]["must_fix"].empty());

  const std::string html = ReadFile(out / "report.html");
  EXPECT_NE(html.find("class=\"verdict pass\""), std::string::npos);
  EXPECT_NE(html.find("class=\"verdict skipped\""), std::string::npos);
  EXPECT_NE(ReadFile(out / "report.md").find("gpu-inventory"), std::string::npos);

  ExpectCleanedUp(b, report, policy_before);
}

TEST_F(PocTest, AMembersTokenIsRefusedBeforeAnythingIsMade) {
  Berthd& b = Start();
  const std::string admin = b.http().token();
  const auto version = b.http().Get("/v1/policy").body["version"];
  auto made = b.http().Post("/v1/identities",
                            R"({"name": "mo", "kind": "user", "tenants": {"default": "member"}})",
                            "application/json");
  ASSERT_EQ(made.status, 201) << made.text;
  auto token = b.http().Post("/v1/tokens", R"({"identity": "mo"})", "application/json");
  ASSERT_EQ(token.status, 201) << token.text;
  b.set_token(token.body["token"]);  // the CLI now runs as mo
  auto run = Poc(b, {"run", "--out", (dir_ / "out").string(), "--allow-on", b.url()});
  b.set_token(admin);
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("platform admin"), std::string::npos) << run.err;
  EXPECT_EQ(b.http().Get("/v1/policy").body["version"], version);
  auto jobs = b.http().Get("/v1/jobs");
  EXPECT_TRUE(jobs.body["jobs"].empty()) << jobs.text;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "report.json"));
}

TEST_F(PocTest, AQuotaThePolicyDoesNotEnforceFailsOnlyItsCaseWithRiskAndRetest) {
  Berthd& b = Start();
  const std::string policy_before = b.http().Get("/v1/policy").body["yaml"];
  // The built-in suite with tenant a's train queue borrowing instead of
  // refusing: the quota is not enforced at submit.
  auto printed = Poc(b, {"suite"});
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  std::string suite = printed.out;
  const auto at = suite.find("over_quota: reject");
  ASSERT_NE(at, std::string::npos);
  suite.replace(at, std::string("over_quota: reject").size(), "over_quota: borrow");
  WriteFile(dir_ / "broken-suite.yaml", suite);

  const auto out = dir_ / "report";
  auto run = Poc(b, {"run", "--suite", (dir_ / "broken-suite.yaml").string(), "--out", out.string(),
                     "--allow-on", b.url()});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("1 case(s) failed"), std::string::npos) << run.err;

  const json report = ReadJson(out / "report.json");
  ASSERT_FALSE(report.is_discarded());
  std::vector<std::string> failed;
  for (const auto& c : report["cases"]) {
    if (c["verdict"] == "fail") failed.push_back(c["id"]);
  }
  EXPECT_EQ(failed, std::vector<std::string>{"quota-over-request-refused"});
  const json& must_fix = report["conclusions"]["must_fix"];
  ASSERT_EQ(must_fix.size(), 1U);
  EXPECT_EQ(must_fix[0]["id"], "quota-over-request-refused");
  EXPECT_EQ(must_fix[0]["risk"], "high");
  EXPECT_NE(must_fix[0]["retest"].get<std::string>().find("409"), std::string::npos);
  // The reason names the step and what the API answered instead.
  const std::string reason = must_fix[0]["reason"];
  EXPECT_NE(reason.find("steps[0]"), std::string::npos) << reason;
  EXPECT_NE(reason.find("2xx"), std::string::npos) << reason;
  EXPECT_LT(report["scores"]["capabilities"]["queues-and-quota"]["score"].get<double>(), 100.0);

  const std::string md = ReadFile(out / "report.md");
  const auto list = md.find("### Must fix");
  ASSERT_NE(list, std::string::npos);
  EXPECT_NE(md.find("quota-over-request-refused", list), std::string::npos);
  const std::string html = ReadFile(out / "report.html");
  EXPECT_NE(html.find("class=\"verdict fail\""), std::string::npos);

  ExpectCleanedUp(b, report, policy_before);
}

}  // namespace
}  // namespace berth::it
