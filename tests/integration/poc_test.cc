// `berth poc run` end to end against a real all-in-one berthd on a
// simulated node with its service gateway (HAProxy): the built-in suite
// passes every case it can judge (the inference case through the gateway
// included), skips the ones whose precondition the API cannot show
// (podman, a standby) and says why, writes the three reports, and leaves nothing behind (its jobs
// ended, its identities disabled, the policy back at the text it found).
// Every case can fail: breaking one capability the way an operator could
// get it wrong (a quota the policy does not enforce, a role granted in the
// wrong tenant, a job's retries turned off, an alert sink on a dead port,
// GPU telemetry off, a reclaim grace left long, a priority class made
// non-preemptible, an inference queue that refuses its replicas, a viewer
// granted member, a queue capped below a gang's size, a guarantee below the
// promise, a tenant admin granted only viewer) makes exactly the case(s) that
// check it fail, each with its risk and re-test in the report; these runs use --case to run only
// the cases concerned. It refuses to run on a cluster --allow-on does not name, and then changes
// nothing.
#include <gtest/gtest.h>
#include <httplib.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
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
  // `gateway`: berthd runs its service gateway (HAProxy, installed by
  // scripts/install-deps.sh), so the inference case can run.
  Berthd& Start(bool gateway = false) {
    BerthdOptions options = AllInOne();
    options.gateway = gateway;
    Berthd& b = NewBerthd(options);
    EXPECT_TRUE(b.Start()) << b.log();
    return b;
  }

  // The model server the service case's replica runs, as the run's tenant
  // identities: the build's, copied into the test's directory (open to
  // every uid, harness.cc), since the build tree may sit under one their
  // uids cannot enter (a clone under a 0700 mktemp, as CI's is).
  std::string PocModelServer() const {
    const auto server = dir_ / "berth-model-server";
    if (!std::filesystem::exists(server)) {
      std::filesystem::copy_file(BinDir() / "berth-model-server", server);
      std::filesystem::permissions(
          server, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                      std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                      std::filesystem::perms::others_exec);
    }
    return server.string();
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
    // No service of the run's tenants is left.
    auto services = b.http().Get("/v1/services");
    ASSERT_EQ(services.status, 200) << services.text;
    for (const auto& s : services.body["services"]) {
      EXPECT_FALSE(s.value("tenant", "").starts_with(prefix + "-")) << s.dump();
    }
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
    std::vector<std::string> args{"run",   "--out",          out.string(),    "--allow-on",
                                  b.url(), "--model-server", PocModelServer()};
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
  const bool haproxy =
      RunCommand("/bin/sh", {"-c", "command -v haproxy"}, dir_.path()).exit_code == 0;
  Berthd& b = Start(haproxy);
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
  auto run = Poc(
      b, {"run", "--out", out.string(), "--allow-on", b.url(), "--model-server", PocModelServer()});
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
  EXPECT_EQ(verdicts["control-plane-failover"], "skipped");
  // Judged through the gateway where HAProxy is installed; skipped, naming
  // the gateway, where berthd could not run one.
  EXPECT_EQ(verdicts["service-scales-from-zero"], haproxy ? "pass" : "skipped");
  EXPECT_EQ(verdicts["service-scales-up-and-back-to-zero"], haproxy ? "pass" : "skipped");
  for (const auto& c : report["cases"]) {
    if (c["verdict"] != "skipped") continue;
    const std::string reason = c["reason"];
    EXPECT_TRUE(reason.find("podman") != std::string::npos ||
                reason.find("gateway") != std::string::npos ||
                reason.find("standby") != std::string::npos)
        << reason;
  }
  EXPECT_EQ(report["summary"]["passed"].get<int>() + (podman ? 1 : 2) + (haproxy ? 0 : 2),
            report["summary"]["cases"].get<int>());
  EXPECT_GE(report["summary"]["passed"].get<int>(), 20);
  EXPECT_GE(receiver.posts(), 1);
  // The service case's evidence: the call through the gateway as its
  // tenant and as another's, and its replica as a sample, scaled from zero.
  for (const auto& c : report["cases"]) {
    if (c["id"] != "service-scales-from-zero" || !haproxy) continue;
    EXPECT_EQ(c["evidence"]["services"].size(), 1U) << c.dump(2);
    int calls = 0;
    for (const auto& r : c["evidence"]["requests"]) {
      if (r["request"].get<std::string>().find(b.gateway_url() + "/s/") != std::string::npos) {
        ++calls;
      }
    }
    EXPECT_EQ(calls, 2) << c.dump(2);
    ASSERT_EQ(c["samples"].size(), 1U) << c.dump(2);
    EXPECT_EQ(c["samples"][0]["state"], "Running") << c.dump(2);
    // The cold start berthd measured, on the replica that took the call.
    EXPECT_TRUE(c["samples"][0]["cold_start_ms"].is_number()) << c.dump(2);
    std::cout << "[ cold start ] service-scales-from-zero: " << c["samples"][0]["cold_start_ms"]
              << " ms (target 10s)\n";
    EXPECT_EQ(c["samples"][0]["service"].get<std::string>().find("/echo"),
              c["samples"][0]["service"].get<std::string>().size() - 5)
        << c.dump(2);
    EXPECT_EQ(c["cleanup"]["services_deleted"].size(), 1U) << c.dump(2);
  }
  // The elasticity case's load: every call answered, its figures in the
  // evidence; the case took the load, the scale up and the return to zero.
  for (const auto& c : report["cases"]) {
    if (c["id"] != "service-scales-up-and-back-to-zero" || !haproxy) continue;
    ASSERT_EQ(c["evidence"]["loads"].size(), 1U) << c.dump(2);
    const json& load = c["evidence"]["loads"][0];
    EXPECT_GE(load["calls"].get<int>(), 4) << load.dump();
    EXPECT_EQ(load["as_expected"], load["calls"]) << load.dump();
    EXPECT_EQ(c["cleanup"]["services_deleted"].size(), 1U) << c.dump(2);
    std::cout << "[ elasticity ] service-scales-up-and-back-to-zero: " << c["duration_ms"]
              << " ms; load " << load.dump() << "\n";
  }
  EXPECT_EQ(report["environment"]["gateway"], haproxy ? json(b.gateway_url()) : json())
      << report["environment"].dump();
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
      if (s.value("kind", "") == "burst") continue;  // aggregates, checked above
      if (s["state"] == "Succeeded" && s["queueing_ms"].is_number() && s["run_ms"].is_number()) {
        timed = true;
        EXPECT_NE(s["tenant"], "-");
        EXPECT_NE(s["user"], "-");
      }
    }
  }
  EXPECT_TRUE(timed) << "no succeeded sample with its queueing and run time";
  // The concurrent load: one sample row of aggregates for its 24 jobs from
  // three tenants, the ids kept in report.json's evidence only.
  for (const auto& c : report["cases"]) {
    if (c["id"] != "concurrent-multi-tenant-load") continue;
    EXPECT_EQ(c["verdict"], "pass") << c.dump(2);
    ASSERT_EQ(c["samples"].size(), 1U) << c.dump(2);
    const json& s = c["samples"][0];
    EXPECT_EQ(s["kind"], "burst");
    EXPECT_EQ(s["figures"]["count"], 24);
    EXPECT_EQ(s["figures"]["states"]["Succeeded"], 24) << s.dump(2);
    EXPECT_EQ(s["figures"]["tenants"].size(), 3U);
    EXPECT_TRUE(s["figures"]["unexplained"].empty()) << s.dump(2);
    EXPECT_EQ(c["evidence"]["bursts"]["load"].size(), 24U);
    EXPECT_TRUE(c["evidence"]["jobs"].empty());
    std::cout << "[ load ] concurrent-multi-tenant-load at scale 1: " << c["duration_ms"]
              << " ms; figures " << s["figures"].dump() << "\n";
  }
  EXPECT_EQ(verdicts["concurrent-multi-tenant-load"], "pass");
  // The per-job metric snapshot, error states and alerts.
  for (const auto& c : report["cases"]) {
    for (const auto& s : c["samples"]) {
      if (s.value("kind", "") == "burst") continue;
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
  const std::string md = ReadFile(out / "report.md");
  EXPECT_NE(md.find("gpu-inventory"), std::string::npos);
  EXPECT_NE(md.find("load (burst, scale 1)"), std::string::npos);
  EXPECT_NE(md.find("24 jobs (ids in report.json evidence.bursts)"), std::string::npos);

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

// Retries off, as an operator turns them off: the policy caps the attempts
// of tenant a's batch queue at one (retry: {max_attempts: 1} on the queue),
// while the job still asks for two. The retry case fails on its failure
// count; the classification case beside it, in the same queue, passes.
TEST_F(PocTest, RetriesTurnedOffFailOnlyTheRetryCase) {
  Berthd& b = Start();
  // The first {name: batch} is tenant a's, where both cases submit.
  const std::string suite =
      EditedSuite(b, "- {name: batch}", "- {name: batch, retry: {max_attempts: 1}}");
  const json report =
      RunCases(b, suite, {"failure-classified-and-retried", "gpu-oom-explained"}, "retries-off");
  ExpectOnlyThese(report, {"failure-classified-and-retried"}, 2);
  const json& c = report["cases"][0];
  EXPECT_NE(c["reason"].get<std::string>().find("failures 1"), std::string::npos) << c.dump(2);
  // The job's failure names the queue's cap, not its own block, as what
  // stopped the retry.
  ASSERT_EQ(c["evidence"]["jobs"].size(), 1U) << c.dump(2);
  const json job =
      b.http()
          .Get("/v1/jobs/" + std::to_string(c["evidence"]["jobs"][0].get<std::uint64_t>()))
          .body;
  EXPECT_EQ(job["state"], "Failed") << job.dump(2);
  EXPECT_EQ(job["reason"]["counts"]["retry_cap"], 1) << job.dump(2);
  EXPECT_NE(job["reason"]["message"].get<std::string>().find(
                "its queue's retry policy allows 1 attempt (the job asked for 2)"),
            std::string::npos)
      << job.dump(2);
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

// An inference queue that refuses what it is not guaranteed (quota 0,
// over_quota: reject, a setting an operator may copy from a training
// queue): the replica a held request asks for is refused as a job, so the
// request is still held (its 20 s hold would end in 503) when the case's
// 10 s cold-start target passes. Only the service case fails, naming the
// gateway call and the target, with its risk and re-test; the quota case
// of the same tenant beside it passes.
TEST_F(PocTest, AnInferenceQueueThatRefusesReplicasFailsOnlyTheServiceCase) {
  if (RunCommand("/bin/sh", {"-c", "command -v haproxy"}, dir_.path()).exit_code != 0) {
    GTEST_SKIP() << "haproxy is not installed (scripts/install-deps.sh installs it)";
  }
  Berthd& b = Start(/*gateway=*/true);
  const std::string policy_before = b.http().Get("/v1/policy").body["yaml"];
  const std::string suite =
      EditedSuite(b, "{name: serve, kind: inference}",
                  "{name: serve, kind: inference, quota: {gpus: 0}, over_quota: reject}");
  const json report = RunCases(b, suite, {"guaranteed-quota-honoured", "service-scales-from-zero"},
                               "inference-refused");
  ExpectOnlyThese(report, {"service-scales-from-zero"}, 2);
  const json& c = report["cases"][1];
  const std::string reason = c["reason"];
  EXPECT_NE(reason.find("steps[2]"), std::string::npos) << reason;
  EXPECT_NE(reason.find("cold-start target"), std::string::npos) << reason;
  EXPECT_NE(reason.find("no answer"), std::string::npos) << reason;
  EXPECT_EQ(c["risk"], "medium");
  // The service went with the case, though the case stopped early.
  EXPECT_EQ(c["cleanup"]["services_deleted"].size(), 1U) << c.dump(2);
  ExpectCleanedUp(b, report, policy_before);
}

// A service held to one replica (its maximum 1): the load is served, but
// the service never has 2 ready replicas; only the elasticity case fails,
// naming the step that waited for them, and the from-zero case beside it
// passes.
TEST_F(PocTest, AServiceHeldToOneReplicaFailsOnlyTheScaleUpCase) {
  if (RunCommand("/bin/sh", {"-c", "command -v haproxy"}, dir_.path()).exit_code != 0) {
    GTEST_SKIP() << "haproxy is not installed (scripts/install-deps.sh installs it)";
  }
  Berthd& b = Start(/*gateway=*/true);
  const std::string policy_before = b.http().Get("/v1/policy").body["yaml"];
  const std::string suite =
      EditedSuite(b, "replicas: {min: 0, max: 2}", "replicas: {min: 0, max: 1}");
  const json report = RunCases(
      b, suite, {"service-scales-from-zero", "service-scales-up-and-back-to-zero"}, "held-to-one");
  ExpectOnlyThese(report, {"service-scales-up-and-back-to-zero"}, 2);
  const json& c = report["cases"][1];
  const std::string reason = c["reason"];
  EXPECT_NE(reason.find("steps[3]"), std::string::npos) << reason;
  EXPECT_NE(reason.find("\"ready\":2"), std::string::npos) << reason;
  EXPECT_EQ(c["risk"], "medium");
  EXPECT_EQ(c["cleanup"]["services_deleted"].size(), 1U) << c.dump(2);
  ExpectCleanedUp(b, report, policy_before);
}

// A service whose idle window is an hour never goes back to zero in the
// case's time: only the elasticity case fails, at its scale-to-zero step.
TEST_F(PocTest, AServiceThatNeverIdlesOutFailsOnlyTheScaleUpCase) {
  if (RunCommand("/bin/sh", {"-c", "command -v haproxy"}, dir_.path()).exit_code != 0) {
    GTEST_SKIP() << "haproxy is not installed (scripts/install-deps.sh installs it)";
  }
  Berthd& b = Start(/*gateway=*/true);
  const std::string policy_before = b.http().Get("/v1/policy").body["yaml"];
  // The service's own line (the re-test text names the setting too).
  const std::string suite = EditedSuite(b, "scale_to_zero: {enabled: true, idle_window: 5s}\n",
                                        "scale_to_zero: {enabled: true, idle_window: 1h}\n");
  const json report = RunCases(b, suite, {"service-scales-up-and-back-to-zero"}, "never-idle");
  ExpectOnlyThese(report, {"service-scales-up-and-back-to-zero"}, 1);
  const std::string reason = report["cases"][0]["reason"];
  EXPECT_NE(reason.find("steps[4]"), std::string::npos) << reason;
  EXPECT_NE(reason.find("scale_to_zero"), std::string::npos) << reason;
  ExpectCleanedUp(b, report, policy_before);
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

// A role granted too broadly: the viewer made a member of tenant a. Its
// submit is accepted, so only the viewer case fails; the isolation case
// beside it, about another tenant's member, passes.
TEST_F(PocTest, AViewerGrantedMemberFailsOnlyTheViewerCase) {
  Berthd& b = Start();
  const std::string suite =
      EditedSuite(b, "{name: vera, tenants: {a: viewer}}", "{name: vera, tenants: {a: member}}");
  const json report =
      RunCases(b, suite, {"tenant-isolation", "viewer-cannot-submit"}, "viewer-member");
  ExpectOnlyThese(report, {"viewer-cannot-submit"}, 2);
  const std::string reason = report["cases"][1]["reason"];
  EXPECT_NE(reason.find("steps[0]"), std::string::npos) << reason;
  EXPECT_NE(reason.find("403"), std::string::npos) << reason;
}

// A queue capped below the gang's size: tenant a's batch queue limited to 1
// GPU and refusing more, so the 2-replica gang is refused at submit. Only
// the gang case fails; the cancel case in the same queue (a job without
// GPUs) passes.
TEST_F(PocTest, AQueueCappedBelowTheGangFailsOnlyTheGangCase) {
  Berthd& b = Start();
  const std::string suite = EditedSuite(b, "- {name: batch}\n",
                                        "- {name: batch, quota: {gpus: 1}, over_quota: reject}\n");
  const json report =
      RunCases(b, suite, {"gang-runs-to-success", "cancel-stops-a-job"}, "gang-capped");
  ExpectOnlyThese(report, {"gang-runs-to-success"}, 2);
  const std::string reason = report["cases"][0]["reason"];
  EXPECT_NE(reason.find("steps[0]"), std::string::npos) << reason;
}

// A guarantee set below what was promised: tenant a's train queue given 1
// GPU instead of 2, still refusing more. The 2-GPU job within the promised
// guarantee is refused, so only the guarantee case fails; the over-request
// case beside it (3 GPUs, refused naming the guarantee) passes.
TEST_F(PocTest, AGuaranteeBelowThePromiseFailsOnlyTheGuaranteeCase) {
  Berthd& b = Start();
  const std::string suite = EditedSuite(b, "{name: train, quota: {gpus: 2}, over_quota: reject}",
                                        "{name: train, quota: {gpus: 1}, over_quota: reject}");
  const json report = RunCases(
      b, suite, {"quota-over-request-refused", "guaranteed-quota-honoured"}, "guarantee-low");
  ExpectOnlyThese(report, {"guaranteed-quota-honoured"}, 2);
}

// A tenant admin granted only viewer: her quota request is refused, so the
// quota request case fails at that step; the viewer case beside it passes.
TEST_F(PocTest, ATenantAdminGrantedViewerFailsOnlyTheQuotaRequestCase) {
  Berthd& b = Start();
  const std::string suite = EditedSuite(b, "{name: tara, tenants: {a: tenant-admin}}",
                                        "{name: tara, tenants: {a: viewer}}");
  const json report = RunCases(
      b, suite, {"quota-request-approved-and-audited", "viewer-cannot-submit"}, "admin-viewer");
  ExpectOnlyThese(report, {"quota-request-approved-and-audited"}, 2);
  const std::string reason = report["cases"][0]["reason"];
  EXPECT_NE(reason.find("steps[1]"), std::string::npos) << reason;
}

// The load case at full scale, when BERTH_POC_SCALE names one (e.g. 10:
// 240 jobs); skipped otherwise, so CI runs only the clean run's scale 1.
// Prints the case's time and figures for docs/poc.md.
TEST_F(PocTest, TheLoadCaseAtTheScaleBerthPocScaleNames) {
  const char* scale = std::getenv("BERTH_POC_SCALE");
  if (scale == nullptr || std::string(scale).empty()) {
    GTEST_SKIP() << "set BERTH_POC_SCALE=N to run concurrent-multi-tenant-load with --scale N";
  }
  Berthd& b = Start();
  const auto out = dir_ / "scaled";
  auto run = Poc(b, {"run", "--out", out.string(), "--allow-on", b.url(), "--case",
                     "concurrent-multi-tenant-load", "--scale", scale});
  const json report = ReadJson(out / "report.json");
  ASSERT_FALSE(report.is_discarded()) << run.out << run.err;
  ASSERT_EQ(report["cases"].size(), 1U);
  const json& c = report["cases"][0];
  EXPECT_EQ(c["verdict"], "pass") << c["reason"];
  EXPECT_EQ(report["run"]["scale"], std::stoi(scale));
  ASSERT_EQ(c["samples"].size(), 1U);
  EXPECT_EQ(c["samples"][0]["figures"]["count"], 24 * std::stoi(scale));
  std::cout << "[ load ] concurrent-multi-tenant-load at scale " << scale << ": "
            << c["duration_ms"] << " ms; figures " << c["samples"][0]["figures"].dump() << "\n";
  EXPECT_TRUE(report["cleanup"]["problems"].empty()) << report["cleanup"].dump();
}

// A tenant starved by its quota: tenant b's queue guaranteed nothing and
// told to wait past it, so its part of the concurrent burst never runs.
// Only the load case fails (not settled, b's longest wait over its bound),
// with its risk and re-test; the guaranteed-quota case beside it passes.
TEST_F(PocTest, ATenantStarvedByItsQuotaFailsOnlyTheLoadCase) {
  Berthd& b = Start();
  const std::string suite =
      EditedSuite(b, "    - name: b\n      children:\n        - {name: batch}",
                  "    - name: b\n      children:\n        - {name: batch, quota: {gpus: 0}, "
                  "over_quota: wait}");
  const json report =
      RunCases(b, suite, {"guaranteed-quota-honoured", "concurrent-multi-tenant-load"}, "starved");
  ExpectOnlyThese(report, {"concurrent-multi-tenant-load"}, 2);
  for (const auto& c : report["cases"]) {
    if (c["id"] != "concurrent-multi-tenant-load") continue;
    const std::string reason = c["reason"];
    EXPECT_NE(reason.find("not all settled"), std::string::npos) << reason;
    EXPECT_NE(reason.find("'s longest wait"), std::string::npos) << reason;
    // b's jobs waited with a reason (its quota), so the waits are explained.
    ASSERT_EQ(c["samples"].size(), 1U);
    EXPECT_EQ(c["samples"][0]["figures"]["states"]["Pending"], 8) << c["samples"][0].dump(2);
    EXPECT_EQ(c["samples"][0]["figures"]["reasons"].value("OverQuota", 0), 8)
        << c["samples"][0].dump(2);
  }
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

// Skips are honest: with no Ready node whose agent finds podman (GET
// /v1/nodes says so) the container case is skipped naming the nodes, never
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
  EXPECT_NE(
      reason.find("podman: none of the 1 Ready node(s) reports a container runtime: bare-node"),
      std::string::npos)
      << reason;
  EXPECT_TRUE(c["evidence"]["jobs"].empty()) << c.dump(2);
}

// A mixed fleet runs the container case: the scheduler places a job with an
// image only on a node whose agent found podman, so one such node is enough.
// The other agent's PATH has no podman; this one's has a stand-in whose
// pulls fail as an unreachable registry's do, whatever this machine has.
TEST_F(PocTest, AMixedFleetRunsTheContainerCaseOnThePodmanNode) {
  Berthd& b = NewBerthd(ControlPlaneOnly());
  ASSERT_TRUE(b.Start()) << b.log();
  auto cluster = [&](const std::string& node) {
    const auto file = dir_ / ("cluster-" + node + ".yaml");
    std::filesystem::copy_file(WriteCluster(node, 8), file,
                               std::filesystem::copy_options::overwrite_existing);
    return file;
  };
  const auto fake = dir_ / "fake-podman-bin";
  std::filesystem::create_directories(fake);
  WriteFile(fake / "podman",
            "#!/bin/sh\n"
            "case \"$1\" in\n"
            "  pull) echo \"Error: no registry in this test\" >&2; exit 125 ;;\n"
            "  *) exit 1 ;;\n"
            "esac\n");
  std::filesystem::permissions(fake / "podman", std::filesystem::perms::owner_all);
  // "a-bare" sorts first: without the rule, packing would try it first.
  NewAgent(b, dir_ / "agent-bare", cluster("a-bare"), "agent-bare.log",
           {{"PATH", (dir_ / "no-podman-here").string()}});
  NewAgent(b, dir_ / "agent-podman", cluster("b-podman"), "agent-podman.log",
           {{"PATH", fake.string()}});
  ASSERT_TRUE(b.WaitForNode("Ready", 20s, "a-bare"));
  ASSERT_TRUE(b.WaitForNode("Ready", 20s, "b-podman"));
  const auto out = dir_ / "report";
  auto run = Poc(b, {"run", "--out", out.string(), "--allow-on", b.url(), "--case",
                     "image-pull-failure-explained"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const json report = ReadJson(out / "report.json");
  ASSERT_EQ(report["cases"].size(), 1U) << report.dump(2);
  const auto& c = report["cases"][0];
  EXPECT_EQ(c["verdict"], "pass") << c.dump(2);
  ASSERT_EQ(c["evidence"]["jobs"].size(), 1U) << c.dump(2);
  const auto id = c["evidence"]["jobs"][0].get<std::uint64_t>();
  auto job = b.http().Get(fmt::format("/v1/jobs/{}", id));
  ASSERT_EQ(job.status, 200) << job.text;
  ASSERT_EQ(job.body["placement"].size(), 1U) << job.text;
  EXPECT_EQ(job.body["placement"][0]["node"], "b-podman") << job.text;
}

// ---- berth poc rerun, observe and cleanup ----

// A query value percent-encoded (the policy's comment has spaces, a colon
// and parentheses).
std::string PocxQuery(std::string_view text) {
  std::string out;
  for (unsigned char ch : text) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        ch == '-' || ch == '_' || ch == '.') {
      out += static_cast<char>(ch);
    } else {
      out += fmt::format("%{:02X}", ch);
    }
  }
  return out;
}

// An identity in `tenant` with `role` and a token for it, as the admin `b`.
std::string PocxMember(const Berthd& b, const std::string& name, const std::string& tenant) {
  auto made = b.http().Post(
      "/v1/identities",
      json{{"name", name}, {"kind", "user"}, {"tenants", {{tenant, "member"}}}}.dump(),
      "application/json");
  EXPECT_EQ(made.status, 201) << made.text;
  auto token = b.http().Post("/v1/tokens", json{{"identity", name}}.dump(), "application/json");
  EXPECT_EQ(token.status, 201) << token.text;
  return token.body.is_object() ? token.body.value("token", "") : "";
}

// The built-in suite with tenant a's train queue borrowing instead of
// refusing, so exactly quota-over-request-refused fails.
std::string PocxBrokenSuite(const std::string& suite) {
  std::string out = suite;
  const auto at = out.find("over_quota: reject");
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) {
    out.replace(at, std::string("over_quota: reject").size(), "over_quota: borrow");
  }
  return out;
}

TEST_F(PocTest, RerunReTestsOnlyTheFailedCaseAndRefusesAnotherSuite) {
  Berthd& b = Start();
  const std::string policy_before = b.http().Get("/v1/policy").body["yaml"];
  auto printed = Poc(b, {"suite"});
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  WriteFile(dir_ / "broken-suite.yaml", PocxBrokenSuite(printed.out));
  const std::string broken = (dir_ / "broken-suite.yaml").string();

  const auto first = dir_ / "first";
  auto run = Poc(b, {"run", "--suite", broken, "--out", first.string(), "--allow-on", b.url()});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const json report1 = ReadJson(first / "report.json");
  ASSERT_FALSE(report1.is_discarded());

  // Another suite text (the built-in one): refused before anything is sent.
  const auto version = b.http().Get("/v1/policy").body["version"];
  const auto jobs_before = GetAllPages(b.http(), "/v1/jobs", "jobs").body["jobs"].size();
  auto other = Poc(b, {"rerun", first.string(), "--failed", "--out", (dir_ / "other").string(),
                       "--allow-on", b.url()});
  EXPECT_EQ(other.exit_code, 1) << other.out << other.err;
  EXPECT_NE(other.err.find("--suite"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find(report1["environment"]["suite"]["sha256"].get<std::string>()),
            std::string::npos)
      << other.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "other" / "report.json"));
  EXPECT_EQ(b.http().Get("/v1/policy").body["version"], version);
  EXPECT_EQ(GetAllPages(b.http(), "/v1/jobs", "jobs").body["jobs"].size(), jobs_before);
  // --failed or --case is required; a report that is not there is named.
  auto no_failed = Poc(b, {"rerun", first.string(), "--suite", broken, "--out",
                           (dir_ / "x").string(), "--allow-on", b.url()});
  EXPECT_EQ(no_failed.exit_code, 2) << no_failed.err;
  EXPECT_NE(no_failed.err.find("--failed"), std::string::npos) << no_failed.err;
  auto missing = Poc(b, {"rerun", (dir_ / "nowhere").string(), "--failed", "--suite", broken,
                         "--out", (dir_ / "x").string(), "--allow-on", b.url()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find((dir_ / "nowhere").string()), std::string::npos) << missing.err;

  // The same suite: only the failed case runs again (and fails again).
  const auto second = dir_ / "second";
  auto rerun = Poc(b, {"rerun", first.string(), "--failed", "--suite", broken, "--out",
                       second.string(), "--allow-on", b.url()});
  EXPECT_EQ(rerun.exit_code, 1) << rerun.out << rerun.err;
  EXPECT_NE(rerun.err.find("1 case(s) failed"), std::string::npos) << rerun.err;
  const json report2 = ReadJson(second / "report.json");
  ASSERT_FALSE(report2.is_discarded());
  ASSERT_EQ(report2["cases"].size(), 1U) << report2["cases"].dump(2);
  EXPECT_EQ(report2["cases"][0]["id"], "quota-over-request-refused");
  EXPECT_EQ(report2["cases"][0]["previous_verdict"], "fail");
  EXPECT_EQ(report2["cases"][0]["verdict"], "fail");
  EXPECT_EQ(report2["rerun_of"]["run"], report1["run"]["id"]);
  EXPECT_EQ(report2["rerun_of"]["path"], (first / "report.json").string());
  EXPECT_NE(report2["run"]["id"], report1["run"]["id"]);
  EXPECT_NE(ReadFile(second / "report.md").find("## Re-run"), std::string::npos);
  EXPECT_NE(ReadFile(second / "report.html").find("id=\"rerun\""), std::string::npos);
  ExpectCleanedUp(b, report2, policy_before);

  // A report where nothing failed: said, exit 0, nothing sent.
  json passed = report1;
  for (auto& c : passed["cases"]) {
    if (c["verdict"] == "fail") c["verdict"] = "pass";
  }
  WriteFile(dir_ / "passed.json", passed.dump());
  const auto version_after = b.http().Get("/v1/policy").body["version"];
  auto nothing = Poc(b, {"rerun", (dir_ / "passed.json").string(), "--failed", "--suite", broken,
                         "--out", (dir_ / "none").string(), "--allow-on", "not-this-cluster"});
  EXPECT_EQ(nothing.exit_code, 0) << nothing.err;
  EXPECT_NE(nothing.out.find("nothing to re-run"), std::string::npos) << nothing.out;
  EXPECT_EQ(b.http().Get("/v1/policy").body["version"], version_after);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "none" / "report.json"));
}

TEST_F(PocTest, ObserveCountsTodaysJobsAndAMemberSeesOnlyItsTenant) {
  Berthd& b = Start();
  ASSERT_TRUE(b.WaitForNode("Ready", 20s));
  const std::string admin = b.http().token();
  ASSERT_EQ(b.http()
                .Post("/v1/policy",
                      "queues:\n  - name: default\n    children:\n      - name: default\n"
                      "  - name: red\n    children:\n      - name: main\n"
                      "  - name: blue\n    children:\n      - name: main\n")
                .status,
            201);
  auto in = [](const std::string& tenant) { return json{{"tenant", tenant}, {"queue", "main"}}; };
  const auto ok = b.Submit(JobSpecJson("ok", Sh("true"), 1, in("red")));
  const auto failed = b.Submit(JobSpecJson("fails", Sh("exit 3"), 1, in("red")));
  const auto blue = b.Submit(JobSpecJson("blue", Sh("true"), 1, in("blue")));
  for (auto id : {ok, failed, blue}) {
    ASSERT_GT(id, 0);
    ASSERT_TRUE(b.WaitForTerminal(id, 60s)) << id;
  }
  ASSERT_EQ(b.JobState(failed), "Failed");
  const std::size_t all_jobs = GetAllPages(b.http(), "/v1/jobs", "jobs").body["jobs"].size();
  ASSERT_EQ(all_jobs, 3U);

  auto bad = Poc(b, {"observe", "--days", "91", "--out", (dir_ / "bad").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--days must be from 1 to 90"), std::string::npos) << bad.err;

  // The platform admin: every tenant and the fleet. Two days, so a run
  // that straddles midnight UTC still counts every job once.
  auto seen = Poc(b, {"observe", "--days", "2", "--out", (dir_ / "admin").string()});
  ASSERT_EQ(seen.exit_code, 0) << seen.out << seen.err;
  const json o = ReadJson(dir_ / "admin" / "observe.json");
  ASSERT_FALSE(o.is_discarded());
  ASSERT_EQ(o["rows"].size(), 2U);
  EXPECT_TRUE(o["rows"][1]["partial"].get<bool>());
  std::int64_t jobs = 0;
  std::int64_t failures = 0;
  for (const auto& row : o["rows"]) {
    jobs += row["jobs"].get<std::int64_t>();
    failures += row["failed_jobs"].get<std::int64_t>();
    EXPECT_TRUE(row["alerts_opened"].is_number()) << row.dump();
  }
  EXPECT_EQ(jobs, static_cast<std::int64_t>(all_jobs));
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(o["period"]["jobs"], 3);
  EXPECT_EQ(o["tenants"], (json{"blue", "red"}));
  const std::string html = ReadFile(dir_ / "admin" / "observe.html");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(ReadFile(dir_ / "admin" / "observe.md").find("## Cost per tenant"), std::string::npos);

  // A member of red: red's rows only, no fleet figure.
  b.set_token(PocxMember(b, "rita", "red"));
  auto member = Poc(b, {"observe", "--days", "2", "--out", (dir_ / "rita").string()});
  auto other_tenant =
      Poc(b, {"observe", "--days", "1", "--tenant", "blue", "--out", (dir_ / "x").string()});
  b.set_token(admin);
  ASSERT_EQ(member.exit_code, 0) << member.out << member.err;
  const json m = ReadJson(dir_ / "rita" / "observe.json");
  ASSERT_FALSE(m.is_discarded());
  EXPECT_EQ(m["tenants"], json{"red"});
  std::int64_t red_jobs = 0;
  for (const auto& row : m["rows"]) {
    red_jobs += row["jobs"].get<std::int64_t>();
    EXPECT_FALSE(row["cost"].contains("blue")) << row.dump();
    EXPECT_TRUE(row["alerts_opened"].is_null());
  }
  EXPECT_EQ(red_jobs, 2);
  EXPECT_EQ(ReadFile(dir_ / "rita" / "observe.md").find("blue"), std::string::npos);
  EXPECT_EQ(other_tenant.exit_code, 1);
  EXPECT_NE(other_tenant.err.find("--tenant blue"), std::string::npos) << other_tenant.err;
}

// Metering priced wrong: a price table in force that names none of the
// fleet's GPU models and whose default is 0 prices the job's GPU time at
// nothing. With the rate right, both cases pass; with it wrong, only the
// metering case fails, naming the price, with its risk and re-test; the
// GPU holder case beside it passes.
TEST_F(PocTest, AZeroPriceForTheFleetsGpuFailsOnlyTheMeteringCase) {
  Berthd& b = Start();
  auto priced = b.http().Post("/v1/prices", "currency: USD\ndefault: 2.50\n", "application/yaml");
  ASSERT_EQ(priced.status, 201) << priced.text;
  const json right = RunCases(b, "", {"gpu-holder-named", "gpu-time-metered"}, "priced");
  ExpectOnlyThese(right, {}, 2);

  auto zero = b.http().Post(
      "/v1/prices",
      "currency: USD\ndefault: 0\nprices:\n  - {model: A100-80GB, per_gpu_hour: 1.80}\n",
      "application/yaml");
  ASSERT_EQ(zero.status, 201) << zero.text;
  const json report = RunCases(b, "", {"gpu-holder-named", "gpu-time-metered"}, "zero-price");
  ExpectOnlyThese(report, {"gpu-time-metered"}, 2);
  for (const auto& c : report["cases"]) {
    if (c["id"] != "gpu-time-metered") continue;
    const std::string reason = c["reason"];
    EXPECT_NE(reason.find("prices GPU model H100-80GB"), std::string::npos) << reason;
    EXPECT_NE(reason.find("at 0.00 per GPU-hour"), std::string::npos) << reason;
    EXPECT_EQ(c["risk"], "high");
    EXPECT_NE(c["retest"].get<std::string>().find("berth price show"), std::string::npos);
  }
}

// Ctrl-C in the middle of a run: the run stops after the step in flight
// (the metering case's wait on a job that sleeps 600 s), cleans up what it
// made with cleanup's own code, writes its report with the interrupted case
// and the case after it marked (neither passed nor failed) and exits 130.
// Through the API nothing of the run is left: its job cancelled, its
// identities disabled, the policy as it was; `berth poc cleanup` finds
// nothing to do.
TEST_F(PocTest, SigintStopsTheRunCleansUpAndMarksTheCasesNotRun) {
  Berthd& b = Start();
  ASSERT_TRUE(b.WaitForNode("Ready", 20s));
  const std::string policy_before = b.http().Get("/v1/policy").body["yaml"];
  const std::string suite = EditedSuite(b, R"(command: ["sleep", "1"], resources: {gpus: 1}})",
                                        R"(command: ["sleep", "600"], resources: {gpus: 1}})");
  WriteFile(dir_ / "sigint.yaml", suite);
  const auto out = dir_ / "sigint";
  std::map<std::string, std::string> env;
  if (std::getenv("BERTH_CONFIG") == nullptr) {  // NOLINT(concurrency-mt-unsafe)
    env["BERTH_CONFIG"] = (dir_ / "berth-config.json").string();
  }
  Process run(BinDir() / "berth",
              {"--server", b.url(), "poc", "run", "--out", out.string(), "--allow-on", b.url(),
               "--suite", (dir_ / "sigint.yaml").string(), "--case", "gpu-time-metered", "--case",
               "alert-reaches-its-sink"},
              dir_ / "sigint.out", env, dir_ / "sigint.err");
  // The run's job is running: the case is in its wait.
  std::uint64_t job = 0;
  const auto deadline = std::chrono::steady_clock::now() + kPocRunTimeout;
  while (job == 0 && std::chrono::steady_clock::now() < deadline && run.running()) {
    auto jobs = GetAllPages(b.http(), "/v1/jobs", "jobs");
    for (const auto& j : jobs.body.value("jobs", json::array())) {
      if (j.value("name", "") == "metered" && j.value("state", "") == "Running" &&
          j.value("tenant", "").starts_with("poc-")) {
        job = j["id"].get<std::uint64_t>();
      }
    }
    if (job == 0) std::this_thread::sleep_for(100ms);
  }
  ASSERT_NE(job, 0U) << ReadFile(dir_ / "sigint.out") << ReadFile(dir_ / "sigint.err");
  run.Kill(SIGINT);
  const auto code = run.Wait(kPocRunTimeout);
  const std::string said = ReadFile(dir_ / "sigint.out") + ReadFile(dir_ / "sigint.err");
  ASSERT_TRUE(code.has_value()) << said;
  EXPECT_EQ(*code, 130) << said;
  EXPECT_NE(said.find("interrupted by SIGINT"), std::string::npos) << said;

  // The report was written (a process killed by the signal writes none).
  const json report = ReadJson(out / "report.json");
  ASSERT_FALSE(report.is_discarded()) << said;
  EXPECT_EQ(report["interrupted"]["signal"], "SIGINT");
  EXPECT_EQ(report["interrupted"]["case"], "gpu-time-metered");
  ASSERT_EQ(report["cases"].size(), 2U);
  EXPECT_EQ(report["cases"][0]["id"], "gpu-time-metered");
  EXPECT_EQ(report["cases"][0]["verdict"], "interrupted");
  EXPECT_NE(report["cases"][0]["reason"].get<std::string>().find("interrupted by SIGINT"),
            std::string::npos);
  EXPECT_EQ(report["cases"][1]["verdict"], "not_run");
  EXPECT_EQ(report["summary"]["passed"], 0);
  EXPECT_EQ(report["summary"]["failed"], 0);
  EXPECT_EQ(report["summary"]["not_run"], 2);
  EXPECT_TRUE(report["conclusions"]["must_fix"].empty());
  EXPECT_NE(ReadFile(out / "report.md").find("Not run (interrupted by SIGINT)"), std::string::npos);

  // Cleaned up, as the API shows it.
  EXPECT_EQ(b.JobState(static_cast<std::int64_t>(job)), "Cancelled");
  const std::string prefix = report["run"]["id"];
  auto jobs = GetAllPages(b.http(), "/v1/jobs", "jobs");
  for (const auto& j : jobs.body["jobs"]) {
    if (!j.value("tenant", "").starts_with(prefix + "-")) continue;
    const std::string state = j.value("state", "");
    EXPECT_TRUE(state == "Succeeded" || state == "Failed" || state == "Cancelled") << j.dump();
  }
  auto ids = GetAllPages(b.http(), "/v1/identities", "identities");
  int ours = 0;
  for (const auto& id : ids.body["identities"]) {
    if (!id.value("name", "").starts_with(prefix + "-")) continue;
    ++ours;
    EXPECT_TRUE(id.value("disabled", false)) << id.dump();
  }
  EXPECT_GT(ours, 0);
  EXPECT_EQ(b.http().Get("/v1/policy").body["yaml"], policy_before);
  EXPECT_TRUE(report["cleanup"]["problems"].empty()) << report["cleanup"].dump();
  auto again = Poc(b, {"cleanup", prefix, "--allow-on", b.url()});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("nothing to do"), std::string::npos) << again.out;
}

TEST_F(PocTest, CleanupUndoesAKilledRunAndASecondCleanupHasNothingToDo) {
  Berthd& b = Start();
  ASSERT_TRUE(b.WaitForNode("Ready", 20s));
  auto before = b.http().Get("/v1/policy");
  const std::string policy_before = before.body["yaml"];
  const std::int64_t version_before = before.body["version"];
  // What a run killed after its setup leaves, made the way RunSuite makes
  // it: the policy version with its tenant, an identity with a token, and a
  // job still running in the run's tenant.
  const std::string run = "poc-k1lled";
  const std::string policy =
      "queues:\n  - name: default\n    children:\n      - name: default\n"
      "  - name: poc-k1lled-a\n    children:\n      - name: train\n"
      "      - name: serve\n        kind: inference\n";
  auto applied = b.http().Post(
      fmt::format("/v1/policy?base_version={}&comment={}", version_before,
                  PocxQuery("berth poc run poc-k1lled: its tenants (rolled back when it ends)")),
      policy);
  ASSERT_EQ(applied.status, 201) << applied.text;
  ASSERT_FALSE(PocxMember(b, run + "-alice", run + "-a").empty());
  ASSERT_FALSE(PocxMember(b, "bystander", "default").empty());
  const auto job = b.Submit(
      JobSpecJson("left", Sh("sleep 600"), 1, json{{"tenant", run + "-a"}, {"queue", "train"}}));
  ASSERT_GT(job, 0);
  const auto other = b.Submit(JobSpecJson("other", Sh("sleep 600"), 1));
  ASSERT_GT(other, 0);
  // A service the run applied, with its replica running.
  auto service = b.http().Post("/v1/services",
                               "name: left\ntenant: poc-k1lled-a\nqueue: serve\n"
                               "command: [sleep, \"600\"]\nreplicas: {min: 1}\n",
                               "application/yaml");
  ASSERT_EQ(service.status, 201) << service.text;
  json shown;
  ASSERT_TRUE(WaitFor(
      [&] {
        shown = b.http().Get("/v1/services/poc-k1lled-a/left").body;
        return shown.is_object() && shown["status"]["running"] == 1;
      },
      30s))
      << shown.dump();
  const std::int64_t replica = shown["status"]["replicas"][0]["job"];

  auto refused = Poc(b, {"cleanup", run, "--allow-on", "prod"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--allow-on " + b.url()), std::string::npos) << refused.err;
  auto not_a_run = Poc(b, {"cleanup", "default", "--allow-on", b.url()});
  EXPECT_EQ(not_a_run.exit_code, 2) << not_a_run.err;

  auto cleaned = Poc(b, {"cleanup", run, "--allow-on", b.url()});
  ASSERT_EQ(cleaned.exit_code, 0) << cleaned.out << cleaned.err;
  EXPECT_NE(cleaned.out.find(fmt::format("cancelled job {}", job)), std::string::npos)
      << cleaned.out;
  EXPECT_NE(cleaned.out.find("disabled identity poc-k1lled-alice"), std::string::npos);
  EXPECT_NE(cleaned.out.find("deleted service poc-k1lled-a/left"), std::string::npos)
      << cleaned.out;
  EXPECT_NE(cleaned.out.find("revoked token"), std::string::npos);
  EXPECT_NE(cleaned.out.find("rolled the policy back"), std::string::npos);

  // Nothing of the run is left, and nothing else was touched.
  EXPECT_EQ(b.JobState(job), "Cancelled");
  EXPECT_NE(b.JobState(other), "Cancelled");
  EXPECT_EQ(b.http().Get("/v1/services/poc-k1lled-a/left").status, 404);
  const std::string replica_state = b.JobState(replica);
  EXPECT_TRUE(replica_state == "Cancelled" || replica_state == "Succeeded" ||
              replica_state == "Failed")
      << replica_state;
  auto now = b.http().Get("/v1/policy");
  EXPECT_EQ(now.body["yaml"], policy_before);
  auto ids = GetAllPages(b.http(), "/v1/identities", "identities");
  for (const auto& id : ids.body["identities"]) {
    EXPECT_EQ(id.value("disabled", false), id.value("name", "") == run + "-alice") << id.dump();
  }
  auto tokens = b.http().Get("/v1/tokens?identity=" + run + "-alice");
  ASSERT_EQ(tokens.status, 200) << tokens.text;
  for (const auto& t : tokens.body["tokens"]) EXPECT_FALSE(t["revoked_ms"].is_null()) << t.dump();

  auto again = Poc(b, {"cleanup", run, "--allow-on", b.url()});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("nothing to do"), std::string::npos) << again.out;
  EXPECT_EQ(b.http().Get("/v1/policy").body["version"], now.body["version"]);
}

// Two berthd on one PostgreSQL (docs/operations.md "High availability"),
// one agent given both agent addresses. Given both API addresses and a
// --failover-command that stops the leader, the failover case runs: the
// standby takes over at a higher term, the running job runs on with the
// same run id, a new job succeeds through the new leader; the report
// holds the takeover. Given one address, the case is skipped naming
// --server; given both but no command, skipped naming --failover-command.
class PocFailoverTest : public PostgresIntegrationTest {
 protected:
  BerthdOptions PocfMember(const std::string& name) {
    BerthdOptions o = ControlPlaneOnly({"--store", server_->conninfo(), "--leader-ttl", "4s"});
    o.name = name;
    return o;
  }

  CommandResult PocfRun(const std::string& servers, const std::string& out,
                        std::vector<std::string> extra) const {
    std::vector<std::string> args{
        "--server", servers,      "poc",   "run",    "--out",
        out,        "--allow-on", servers, "--case", "control-plane-failover"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCommand(BinDir() / "berth", args, dir_.path(), kPocRunTimeout);
  }

  static json PocfReadJson(const std::filesystem::path& path) {
    return json::parse(ReadFile(path), nullptr, false);
  }

  static json PocfCase(const json& report) {
    if (report.is_discarded() || report["cases"].size() != 1) return json();
    return report["cases"][0];
  }
};

TEST_F(PocFailoverTest, TheStandbyTakesOverWithTheJobRunningOnAndOneAddressSkipsNamingServer) {
  Berthd& a = NewBerthd(PocfMember("berthd-a"));
  ASSERT_TRUE(a.Start()) << a.log();
  Berthd& b = NewBerthd(PocfMember("berthd-b"));
  ASSERT_TRUE(b.StartStandby()) << b.log();
  a.set_token(a.http().token());
  b.set_token(a.http().token());
  auto cluster = WriteCluster("pocf-node");
  NewAgent(a, dir_ / "agent", cluster, "agent.log", {},
           {"--server", a.agent_address() + "," + b.agent_address()});
  ASSERT_TRUE(a.WaitForNode("Ready", 20s, "pocf-node")) << a.Nodes().dump(2);
  const std::string both = a.url() + "," + b.url();

  // One address: the standby cannot be seen; skipped, naming --server.
  auto one = PocfRun(a.url(), (dir_ / "one").string(), {});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  json skipped = PocfCase(PocfReadJson(dir_ / "one" / "report.json"));
  ASSERT_TRUE(skipped.is_object()) << one.out << one.err;
  EXPECT_EQ(skipped["verdict"], "skipped") << skipped.dump(2);
  EXPECT_NE(skipped["reason"].get<std::string>().find("1 address given (--server"),
            std::string::npos)
      << skipped["reason"];

  // Both, but nothing to stop the leader with: skipped, saying so.
  auto no_command = PocfRun(both, (dir_ / "no-command").string(), {});
  EXPECT_EQ(no_command.exit_code, 0) << no_command.out << no_command.err;
  skipped = PocfCase(PocfReadJson(dir_ / "no-command" / "report.json"));
  ASSERT_TRUE(skipped.is_object()) << no_command.out << no_command.err;
  EXPECT_EQ(skipped["verdict"], "skipped") << skipped.dump(2);
  EXPECT_NE(skipped["reason"].get<std::string>().find("no --failover-command"), std::string::npos)
      << skipped["reason"];

  // An empty command is refused before anything is made.
  auto empty = PocfRun(both, (dir_ / "empty").string(), {"--failover-command", " "});
  EXPECT_EQ(empty.exit_code, 1) << empty.out << empty.err;
  EXPECT_NE(empty.err.find("--failover-command is empty"), std::string::npos) << empty.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "empty" / "report.json"));

  // --allow-on must be the whole list as given: one address of it is not
  // enough.
  auto partial = RunCommand(BinDir() / "berth",
                            {"--server", both, "poc", "run", "--out", (dir_ / "partial").string(),
                             "--allow-on", a.url(), "--case", "control-plane-failover"},
                            dir_.path(), kPocRunTimeout);
  EXPECT_EQ(partial.exit_code, 1) << partial.out << partial.err;
  EXPECT_NE(partial.err.find("--allow-on " + both), std::string::npos) << partial.err;

  // The command sees the leader's address; its output is kept.
  const std::string command =
      fmt::format("echo stopping \"$BERTH_POC_LEADER\"; kill -TERM {}", a.pid());
  auto run = PocfRun(both, (dir_ / "failover").string(), {"--failover-command", command});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const json c = PocfCase(PocfReadJson(dir_ / "failover" / "report.json"));
  ASSERT_TRUE(c.is_object()) << run.out << run.err;
  EXPECT_EQ(c["verdict"], "pass") << c.dump(2);
  const json& ev = c["evidence"]["failover"];
  EXPECT_EQ(ev["old_leader_url"], a.url()) << ev.dump(2);
  EXPECT_EQ(ev["new_leader_url"], b.url()) << ev.dump(2);
  EXPECT_EQ(ev["old_term"], 1) << ev.dump(2);
  EXPECT_GT(ev["new_term"].get<int>(), 1) << ev.dump(2);
  EXPECT_EQ(ev["exit_status"], 0) << ev.dump(2);
  EXPECT_NE(ev["output_tail"].get<std::string>().find("stopping " + a.url()), std::string::npos)
      << ev.dump(2);
  ASSERT_TRUE(ev["takeover_ms"].is_number()) << ev.dump(2);
  bool step_says = false;
  for (const auto& s : c["steps"]) {
    if (s["kind"] == "failover") {
      step_says =
          s["actual"].get<std::string>().find(b.url() + " leads at term") != std::string::npos;
    }
    if (s["kind"] == "expect") {
      EXPECT_NE(s["actual"].get<std::string>().find("runs "), std::string::npos) << s.dump();
    }
  }
  EXPECT_TRUE(step_says) << c["steps"].dump(2);
  std::cout << "[ figures ] berth poc failover: SIGTERM of the leader to the standby leading "
            << ev["takeover_ms"] << " ms (--leader-ttl 4s)\n";
  EXPECT_TRUE(WaitFor([&] { return !a.running(); }, 20s)) << a.log();
  EXPECT_EQ(b.http().Get("/healthz").body.value("role", ""), "leader");
  // The report's jobs ended: the long one cancelled, the short one done.
  for (const auto& id : c["evidence"]["jobs"]) {
    const std::string state = b.JobState(id.get<std::int64_t>());
    EXPECT_TRUE(state == "Succeeded" || state == "Cancelled") << id << " " << state;
  }
}

}  // namespace
}  // namespace berth::it
