// `berth poc run` end to end against a real all-in-one berthd on a
// simulated node: the built-in suite passes every case it can judge, skips
// the ones whose precondition the API cannot show (podman, a gateway) and
// says why, writes the three reports, and leaves nothing behind (its jobs
// ended, its identities disabled, the policy back at the text it found).
// Every case can fail: breaking one capability the way an operator could
// get it wrong (a quota the policy does not enforce, a role granted in the
// wrong tenant, a job's retries turned off, an alert sink on a dead port,
// GPU telemetry off, a reclaim grace left long, a priority class made
// non-preemptible) makes exactly the case(s) that check it fail, each with
// its risk and re-test in the report; these runs use --case to run only the
// cases concerned. It refuses to run on a cluster --allow-on does not name,
// and then changes nothing.
#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A whole suite with its setup, jobs and cleanup takes well under a minute
// on the 2-core machine; the limit is for a loaded one.
constexpr auto kPocRunTimeout = 300s;

// An alert sink: answers 200 to every POST to /hook and counts them.
class PocHookReceiver {
 public:
  explicit PocHookReceiver(int port) {
    server_.Post("/hook", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu_);
      ++posts_;
      res.status = 200;
    });
    server_.bind_to_port("127.0.0.1", port);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~PocHookReceiver() {
    server_.stop();
    thread_.join();
  }
  int posts() {
    std::lock_guard lock(mu_);
    return posts_;
  }

 private:
  httplib::Server server_;
  std::mutex mu_;
  int posts_ = 0;
  std::thread thread_;
};

// Alert rules routing budget alerts to a webhook on `port` of loopback.
std::string PocBudgetRules(int port) {
  return fmt::format(
      "sinks:\n  - {{name: poc-hook, url: \"http://127.0.0.1:{}/hook\", timeout: 1s}}\n"
      "rules:\n  - {{name: budget, kind: budget, severity: warning, sinks: [poc-hook]}}\n",
      port);
}

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
    EXPECT_EQ(ours, 6);
    EXPECT_TRUE(report["cleanup"]["problems"].empty()) << report["cleanup"].dump();
  }

  // The built-in suite with `from` replaced by `to` (once; it must be there).
  std::string EditedSuite(const Berthd& b, const std::string& from, const std::string& to) {
    auto printed = Poc(b, {"suite"});
    EXPECT_EQ(printed.exit_code, 0) << printed.err;
    std::string suite = printed.out;
    const auto at = suite.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) suite.replace(at, from.size(), to);
    return suite;
  }

  // Runs `cases` of `suite` (the built-in one when empty) into dir_/name.
  json RunCases(const Berthd& b, const std::string& suite, const std::vector<std::string>& cases,
                const std::string& name) {
    const auto out = dir_ / name;
    std::vector<std::string> args{"run", "--out", out.string(), "--allow-on", b.url()};
    if (!suite.empty()) {
      WriteFile(dir_ / (name + ".yaml"), suite);
      args.insert(args.end(), {"--suite", (dir_ / (name + ".yaml")).string()});
    }
    for (const auto& c : cases) args.insert(args.end(), {"--case", c});
    auto run = Poc(b, args);
    last_run_ = run.out + run.err;
    return ReadJson(out / "report.json");
  }

  // Exactly `failing` failed; every other case ran passed (none skipped);
  // each failed one is in the conclusion list of its risk with its re-test
  // and a reason naming the step.
  void ExpectOnlyThese(const json& report, const std::set<std::string>& failing,
                       std::size_t cases) {
    ASSERT_FALSE(report.is_discarded()) << last_run_;
    ASSERT_EQ(report["cases"].size(), cases) << last_run_;
    std::set<std::string> failed;
    for (const auto& c : report["cases"]) {
      if (c["verdict"] == "fail") {
        failed.insert(c["id"].get<std::string>());
      } else {
        EXPECT_EQ(c["verdict"], "pass") << c.dump(2);
      }
    }
    EXPECT_EQ(failed, failing) << last_run_;
    for (const auto& id : failing) {
      bool listed = false;
      for (const char* list : {"must_fix", "limited_launch", "later_optimization"}) {
        for (const auto& i : report["conclusions"][list]) {
          if (i["id"] != id) continue;
          listed = true;
          EXPECT_FALSE(i["retest"].get<std::string>().empty()) << i.dump();
          EXPECT_NE(i["reason"].get<std::string>().find("steps["), std::string::npos) << i.dump();
          EXPECT_EQ(std::string(list), i["risk"] == "high" ? "must_fix" : "limited_launch");
        }
      }
      EXPECT_TRUE(listed) << id << " is in no conclusion list: " << report["conclusions"].dump(2);
    }
    EXPECT_TRUE(report["cleanup"]["problems"].empty()) << report["cleanup"].dump();
  }

  std::string last_run_;
};

TEST_F(PocTest, TheDefaultSuitePassesWhatItCanJudgeSkipsHonestlyAndCleansUp) {
  // A live alert sink, so the case that checks alerts reach one runs.
  const int hook_port = FreePort();
  PocHookReceiver receiver(hook_port);
  Berthd& b = Start();
  auto rules = b.http().Post("/v1/alert-rules", PocBudgetRules(hook_port), "application/yaml");
  ASSERT_EQ(rules.status / 100, 2) << rules.text;
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
  // What the API cannot show is skipped, naming the precondition. The
  // container case runs where the node reports podman, and is skipped,
  // saying so, where it does not (ANodeWithoutPodmanSkipsTheContainerCase).
  auto nodes = b.http().Get("/v1/nodes");
  ASSERT_EQ(nodes.status, 200);
  const bool podman = nodes.body["nodes"][0].value("container_runtime", "") == "podman";
  EXPECT_EQ(verdicts["image-pull-failure-explained"], podman ? "pass" : "skipped");
  for (const char* id : {"service-scales-from-zero", "control-plane-failover"}) {
    EXPECT_EQ(verdicts[id], "skipped") << id;
  }
  for (const auto& c : report["cases"]) {
    if (c["verdict"] != "skipped") continue;
    const std::string reason = c["reason"];
    EXPECT_TRUE(reason.find("podman") != std::string::npos ||
                reason.find("gateway") != std::string::npos ||
                reason.find("standby") != std::string::npos)
        << reason;
  }
  EXPECT_EQ(report["summary"]["passed"].get<int>() + (podman ? 2 : 3),
            report["summary"]["cases"].get<int>());
  EXPECT_GE(report["summary"]["passed"].get<int>(), 20);
  EXPECT_GE(receiver.posts(), 1);
  // The four acceptance checks ran and passed.
  for (const char* id :
       {"priority-preempts-and-explains", "job-telemetry-recorded", "gpu-holder-named",
        "quota-request-approved-and-audited", "reclaim-on-guarantee", "tenant-isolation",
        "cross-tenant-paths-refused", "gpu-oom-explained", "gpu-xid-explained",
        "nccl-failure-explained", "alert-reaches-its-sink"}) {
    EXPECT_EQ(verdicts[id], "pass") << id;
  }
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
  // The per-job metric snapshot, error states and alerts.
  for (const auto& c : report["cases"]) {
    for (const auto& s : c["samples"]) {
      EXPECT_TRUE(s.contains("telemetry") && s.contains("error_states") && s.contains("alerts"))
          << s.dump(2);
      if (c["id"] == "job-telemetry-recorded") {
        ASSERT_TRUE(s["telemetry"].is_object()) << s.dump(2);
        EXPECT_GE(s["telemetry"]["samples"].get<int>(), 1) << s.dump(2);
        EXPECT_TRUE(s["telemetry"]["max_util_pct"].is_number()) << s.dump(2);
        EXPECT_TRUE(s["telemetry"]["peak_memory_bytes"].is_number()) << s.dump(2);
      }
      if (c["id"] == "alert-reaches-its-sink") {
        ASSERT_FALSE(s["alerts"].empty()) << s.dump(2);
        EXPECT_EQ(s["alerts"][0]["kind"], "budget") << s.dump(2);
      }
      if (c["id"] == "gpu-oom-explained") {
        EXPECT_EQ(s["failure"]["class"], "gpu_out_of_memory") << s.dump(2);
        ASSERT_FALSE(s["error_states"].empty()) << s.dump(2);
        EXPECT_NE(s["error_states"][0].get<std::string>().find("exit 1"), std::string::npos);
      }
    }
  }
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

// Isolation off: tenant b's member also granted a role in tenant a. The
// cases that read tenant a's job, logs and outputs as b fail; the viewer
// case beside them still passes.
TEST_F(PocTest, ARoleGrantedInTheWrongTenantFailsOnlyTheIsolationCases) {
  Berthd& b = Start();
  const std::string suite = EditedSuite(b, "{name: bob, tenants: {b: member}}",
                                        "{name: bob, tenants: {b: member, a: viewer}}");
  const json report =
      RunCases(b, suite, {"tenant-isolation", "cross-tenant-paths-refused", "viewer-cannot-submit"},
               "isolation-off");
  ExpectOnlyThese(report, {"tenant-isolation", "cross-tenant-paths-refused"}, 3);
}

// Retries off: the job's retry block says one attempt (berthd and the
// policy have no retry switch; a job's own block is where retries are
// turned off). The retry case fails on its failure count; the
// classification case beside it passes.
TEST_F(PocTest, RetriesTurnedOffFailOnlyTheRetryCase) {
  Berthd& b = Start();
  const std::string suite = EditedSuite(b, "retry: {max_attempts: 2, backoff: 1s, on: [user_code]}",
                                        "retry: {max_attempts: 1, backoff: 1s, on: [user_code]}");
  const json report =
      RunCases(b, suite, {"failure-classified-and-retried", "gpu-oom-explained"}, "retries-off");
  ExpectOnlyThese(report, {"failure-classified-and-retried"}, 2);
  const json& c = report["cases"][0];
  EXPECT_NE(c["reason"].get<std::string>().find("failures 1"), std::string::npos) << c.dump(2);
}

// An alert sink down: the budget rule routes to a port nothing listens on.
// The alert is raised but never delivered; metering beside it passes.
TEST_F(PocTest, AnAlertSinkOnADeadPortFailsOnlyTheAlertCase) {
  Berthd& b = Start();
  const int dead = FreePort();  // nothing listens
  auto rules = b.http().Post("/v1/alert-rules", PocBudgetRules(dead), "application/yaml");
  ASSERT_EQ(rules.status / 100, 2) << rules.text;
  const json report = RunCases(b, "", {"gpu-time-metered", "alert-reaches-its-sink"}, "sink-down");
  ExpectOnlyThese(report, {"alert-reaches-its-sink"}, 2);
  const std::string reason = report["cases"][1]["reason"];
  EXPECT_NE(reason.find("alert-deliveries"), std::string::npos) << reason;
}

// Without a sink at all the alert case is skipped, naming what is missing.
TEST_F(PocTest, NoAlertSinkSkipsTheAlertCaseSayingWhy) {
  Berthd& b = Start();
  const json report = RunCases(b, "", {"alert-reaches-its-sink"}, "no-sink");
  ASSERT_FALSE(report.is_discarded()) << last_run_;
  ASSERT_EQ(report["cases"].size(), 1U);
  EXPECT_EQ(report["cases"][0]["verdict"], "skipped");
  EXPECT_NE(report["cases"][0]["reason"].get<std::string>().find("alert_sink"), std::string::npos);
}

// GPU telemetry off (berthd --telemetry-interval 0): the job's telemetry
// case fails; the GPU holder case, which reads the allocation, passes.
TEST_F(PocTest, GpuTelemetryOffFailsOnlyTheTelemetryCase) {
  Berthd& b = NewBerthd(AllInOne({"--telemetry-interval", "0"}));
  ASSERT_TRUE(b.Start()) << b.log();
  const json report =
      RunCases(b, "", {"gpu-holder-named", "job-telemetry-recorded"}, "telemetry-off");
  ExpectOnlyThese(report, {"job-telemetry-recorded"}, 2);
}

// Reclaim left at a long grace: the guaranteed job waits instead of
// reclaiming, and only the reclaim case fails.
TEST_F(PocTest, ALongReclaimGraceFailsOnlyTheReclaimCase) {
  Berthd& b = Start();
  const std::string suite = EditedSuite(b, "reclaim_grace: 0s", "reclaim_grace: 6h");
  const json report =
      RunCases(b, suite, {"guaranteed-quota-honoured", "reclaim-on-guarantee"}, "reclaim-grace");
  ExpectOnlyThese(report, {"reclaim-on-guarantee"}, 2);
}

// Priorities that cannot preempt: the policy makes class low
// non-preemptible, so the high-priority job waits; only the priority case
// fails, and the unfit-job case beside it passes.
TEST_F(PocTest, ANonPreemptibleLowClassFailsOnlyThePriorityCase) {
  Berthd& b = Start();
  const std::string suite =
      EditedSuite(b, "reclaim_grace: 0s",
                  "reclaim_grace: 0s\n    priority_classes:\n      - {name: low, value: 0, "
                  "preemptible: false}\n"
                  "      - {name: normal, value: 100}\n      - {name: high, value: 200}\n"
                  "      - {name: critical, value: 300}");
  const json report = RunCases(
      b, suite, {"unfit-job-waits-with-reason", "priority-preempts-and-explains"}, "no-preempt");
  ExpectOnlyThese(report, {"priority-preempts-and-explains"}, 2);
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

// Skips are honest: a node whose agent finds no podman says so in GET
// /v1/nodes, and the container case is skipped naming the node, never
// passed, whatever this machine has installed.
TEST_F(PocTest, ANodeWithoutPodmanSkipsTheContainerCaseSayingWhy) {
  Berthd& b = NewBerthd(ControlPlaneOnly());
  ASSERT_TRUE(b.Start()) << b.log();
  NewAgent(b, dir_ / "agent", WriteCluster("bare-node", 8), "agent.log",
           {{"PATH", (dir_ / "no-podman-here").string()}});
  ASSERT_TRUE(b.WaitForNode("Ready", 20s));
  const auto out = dir_ / "report";
  auto run = Poc(b, {"run", "--out", out.string(), "--allow-on", b.url(), "--case",
                     "image-pull-failure-explained"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const json report = ReadJson(out / "report.json");
  ASSERT_EQ(report["cases"].size(), 1U) << report.dump(2);
  const auto& c = report["cases"][0];
  EXPECT_EQ(c["verdict"], "skipped");
  const std::string reason = c["reason"];
  EXPECT_NE(reason.find("podman: 1 of 1 Ready node(s) report no container runtime: bare-node"),
            std::string::npos)
      << reason;
  EXPECT_TRUE(c["evidence"]["jobs"].empty()) << c.dump(2);
}

}  // namespace
}  // namespace berth::it
