// Inference services as stored objects, against a real berthd over HTTPS
// and the real `berth` CLI: a member applies, lists, scales, rolls back and
// deletes its service; a member of another tenant gets 404 for it and an
// empty list; no token gets 401; a training queue is refused naming
// `queue`; and every change is in `berth audit`. Then replicas on a real
// agent: run as jobs of the service, replaced revision by revision with
// none missing, scaled, crash-looping held back, stopped with the service.
#include <fmt/format.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "gateway/route.h"
#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

constexpr const char* kCoder = R"(name: coder
tenant: red
queue: serve
image: registry.example/coder:v1
command: [serve]
replicas: {min: 1, max: 2}
resources: {gpus: 1}
)";

class ServiceTest : public IntegrationTest {
 protected:
  // berth-model-server copied into `dir`, a directory of tenant red's run
  // identity: the build tree may sit under a directory the tenant's uid
  // cannot enter (a clone under a 0700 mktemp), as in JobTokenTest.
  std::filesystem::path TenantModelServer(const std::filesystem::path& dir) {
    OwnedByTenant(dir, "red");
    const auto server = dir / "berth-model-server";
    std::filesystem::copy_file(BinDir() / "berth-model-server", server);
    std::filesystem::permissions(
        server, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                    std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                    std::filesystem::perms::others_exec);
    return server;
  }

  CommandResult CliAs(const std::string& token, const Berthd& berthd,
                      const std::vector<std::string>& args) {
    const std::string admin = berthd.http().token();
    setenv("BERTH_TOKEN", token.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    CommandResult r = Cli(berthd, args);
    setenv("BERTH_TOKEN", admin.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    return r;
  }
};

TEST_F(ServiceTest, AMemberManagesItsServiceAndOtherTenantsCannotSeeIt) {
  BerthdOptions options = AllInOne();
  options.tls = true;
  Berthd& berthd = NewBerthd(options);
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_EQ(berthd.http().Post("/v1/policy", kRedBlueServe).status, 201);
  const std::string red = MemberToken(berthd.http(), "rita", "red", "member");
  const std::string blue = MemberToken(berthd.http(), "bo", "blue", "member");
  ASSERT_FALSE(red.empty());
  ASSERT_FALSE(blue.empty());

  // Apply: created, revision 1, no replica running and saying so.
  WriteFile(dir_ / "coder.yaml", kCoder);
  auto r = CliAs(red, berthd, {"svc", "apply", "-f", (dir_ / "coder.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("service red/coder created (revision 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ready 0"), std::string::npos) << r.out;

  // A new image: revision 2.
  std::string v2 = kCoder;
  v2.replace(v2.find("coder:v1"), 8, "coder:v2");
  WriteFile(dir_ / "coder2.yaml", v2);
  r = CliAs(red, berthd, {"svc", "apply", "-f", (dir_ / "coder2.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("revised (revision 2)"), std::string::npos) << r.out;

  r = CliAs(red, berthd, {"svc", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("coder"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1..2"), std::string::npos) << r.out;

  r = CliAs(red, berthd, {"svc", "scale", "coder", "--min", "2", "--max", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("scaled to replicas 2..4 (revision 3)"), std::string::npos) << r.out;

  r = CliAs(red, berthd, {"svc", "show", "coder", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  {
    const json s = json::parse(r.out);
    EXPECT_EQ(s.at("revision"), 3);
    EXPECT_EQ(s.at("status").at("desired"), 2);
    EXPECT_EQ(s.at("status").at("ready"), 0);
    EXPECT_EQ(s.at("spec").at("image"), "registry.example/coder:v2");
    EXPECT_EQ(s.at("revisions").size(), 3u);
  }

  // Rollback: revision 4 restores revision 2 (image v2, replicas 1..2).
  r = CliAs(red, berthd, {"svc", "rollback", "red/coder"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("revision 4 restores revision 2"), std::string::npos) << r.out;
  r = CliAs(red, berthd, {"svc", "show", "coder", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out).at("spec").at("replicas"), (json{{"min", 1}, {"max", 2}}));

  // Another tenant's member: 404 on show, scale and delete; an empty list.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"svc", "show", "red/coder"},
        std::vector<std::string>{"svc", "scale", "red/coder", "--max", "9"},
        std::vector<std::string>{"svc", "delete", "red/coder"}}) {
    r = CliAs(blue, berthd, args);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.err.find("service red/coder not found"), std::string::npos) << r.err;
  }
  Http blue_http(berthd.api_port(), 10s, berthd.ca_file());
  blue_http.set_token(blue);
  EXPECT_EQ(blue_http.Get("/v1/services/red/coder").status, 404);
  EXPECT_EQ(blue_http.Delete("/v1/services/red/coder").status, 404);
  auto blue_list = blue_http.Get("/v1/services");
  ASSERT_EQ(blue_list.status, 200) << blue_list.text;
  EXPECT_TRUE(blue_list.body.at("services").empty());
  r = CliAs(blue, berthd, {"svc", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("No services"), std::string::npos) << r.out;

  // No token: 401.
  Http anonymous(berthd.api_port(), 10s, berthd.ca_file());
  EXPECT_EQ(anonymous.Get("/v1/services").status, 401);
  EXPECT_EQ(anonymous.Get("/v1/services/red/coder").status, 401);
  EXPECT_EQ(anonymous.Post("/v1/services", kCoder, "application/yaml").status, 401);

  // A training queue: refused, naming `queue` and the inference queues.
  std::string training = kCoder;
  training.replace(training.find("name: coder"), 11, "name: batch");
  training.replace(training.find("queue: serve"), 12, "queue: main");
  WriteFile(dir_ / "batch.yaml", training);
  r = CliAs(red, berthd, {"svc", "apply", "-f", (dir_ / "batch.yaml").string()});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("queue"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("inference: serve"), std::string::npos) << r.err;

  r = CliAs(red, berthd, {"svc", "delete", "coder"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("service red/coder deleted"), std::string::npos) << r.out;
  r = CliAs(red, berthd, {"svc", "show", "coder"});
  EXPECT_NE(r.exit_code, 0);

  // Every change is in the audit trail, by who made it; the refusals too.
  r = Cli(berthd, {"audit", "--action", "service.", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> changes;
  int denied = 0;
  const json audit = json::parse(r.out);
  for (const auto& rec : audit.at("records")) {
    // Replicas Berth starts and stops for the service: the test below.
    if (rec.value("actor", "") == "berth") continue;
    if (rec.value("outcome", "") == "ok") {
      changes.push_back(fmt::format("{} {} {}", rec.value("action", ""), rec.value("object", ""),
                                    rec.value("actor", "")));
    } else {
      ++denied;
    }
  }
  EXPECT_EQ(changes, (std::vector<std::string>{
                         "service.apply service/red/coder rita",
                         "service.apply service/red/coder rita",
                         "service.scale service/red/coder rita",
                         "service.rollback service/red/coder rita",
                         "service.delete service/red/coder rita",
                     }))
      << r.out;
  // bo's show, scale and delete (twice), and the training-queue apply.
  EXPECT_GE(denied, 5) << r.out;
}

constexpr const char* kSleeper = R"(name: echo
tenant: red
queue: serve
command: [sleep, "600"]
replicas: {min: 2, max: 4}
resources: {gpus: 1}
readiness: {command: ["true"]}
)";

// Replicas whose revision is `revision` and which are ready (running and
// passing their readiness probe), not being stopped.
int ReadyOf(const json& service, std::int64_t revision) {
  int n = 0;
  for (const auto& r : service.at("status").at("replicas")) {
    if (r.at("revision") == revision && r.at("ready") == true && !r.at("stopping")) ++n;
  }
  return n;
}

// Replicas of any revision that serve: ready and not being stopped.
int ServingOf(const json& service) {
  int n = 0;
  for (const auto& r : service.at("status").at("replicas")) {
    if (r.at("ready") == true && !r.at("stopping")) ++n;
  }
  return n;
}

// Without --gateway-listen the list says there is no gateway to call.
TEST_F(ServiceTest, WithoutAGatewayTheServiceListShowsNone) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const auto seen = berthd.http().Get("/v1/services");
  ASSERT_EQ(seen.status, 200) << seen.text;
  EXPECT_TRUE(seen.body.at("gateway").is_null()) << seen.text;
}

TEST_F(ServiceTest, ReplicasRunAsJobsOfTheServiceAndFollowItsChanges) {
  Berthd& berthd = NewBerthd(AllInOne({"--service-interval", "200ms"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_EQ(berthd.http().Post("/v1/policy", kRedBlueServe).status, 201);
  const std::string red = MemberToken(berthd.http(), "rita", "red", "member");
  const std::string blue = MemberToken(berthd.http(), "bo", "blue", "member");
  Http rita(berthd.api_port(), 10s);
  rita.set_token(red);
  Http bo(berthd.api_port(), 10s);
  bo.set_token(blue);

  ASSERT_EQ(rita.Post("/v1/services", kSleeper, "application/yaml").status, 201);
  json service;
  auto show = [&] {
    auto got = rita.Get("/v1/services/red/echo");
    if (got.status != 200) return false;
    service = got.body;
    return true;
  };
  // Both run; the controller's next round finds the service steady.
  ASSERT_TRUE(WaitFor(
      [&] {
        return show() && ReadyOf(service, 1) == 2 && service.at("status").at("phase") == "steady";
      },
      30s))
      << service.dump();
  EXPECT_EQ(service.at("status").at("ready"), 2);
  auto metrics = berthd.http().Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(
      metrics.text.find(R"(berth_service_replicas{tenant="red",service="echo",state="ready"} 2)"),
      std::string::npos)
      << metrics.text.substr(0, 2000);
  EXPECT_NE(
      metrics.text.find(R"(berth_service_replicas{tenant="red",service="echo",state="desired"} 2)"),
      std::string::npos);

  // Each replica is a job of the service's tenant and queue, owned by it,
  // not preemptible, submitted as the member who applied the service.
  std::vector<std::int64_t> v1;
  for (const auto& r : service.at("status").at("replicas")) v1.push_back(r.at("job"));
  ASSERT_EQ(v1.size(), 2U);
  for (std::int64_t id : v1) {
    auto job = rita.Get(fmt::format("/v1/jobs/{}", id));
    ASSERT_EQ(job.status, 200) << job.text;
    EXPECT_EQ(job.body.at("service"), (json{{"name", "echo"}, {"revision", 1}})) << job.text;
    EXPECT_EQ(job.body.at("queue"), "serve");
    EXPECT_EQ(job.body.at("submitted_by"), "rita");
    EXPECT_EQ(job.body.at("spec").at("preemptible"), false) << job.text;
    EXPECT_EQ(job.body.at("spec").at("env").at("BERTH_SERVICE"), "red/echo") << job.text;
  }
  // berth svc logs: each replica's output under a header naming its job.
  auto logs = CliAs(red, berthd, {"svc", "logs", "red/echo"});
  ASSERT_EQ(logs.exit_code, 0) << logs.out << logs.err;
  for (std::int64_t id : v1) {
    EXPECT_NE(logs.out.find(fmt::format("==> replica job {} (revision 1, Running", id)),
              std::string::npos)
        << logs.out;
  }
  // A replica is not cancelled on its own: the service says how many run.
  auto refused = rita.Post(fmt::format("/v1/jobs/{}/cancel", v1[0]), "");
  EXPECT_EQ(refused.status, 409) << refused.text;
  EXPECT_NE(refused.text.find("replica of service red/echo"), std::string::npos) << refused.text;
  // Another tenant's member sees neither the service nor its replicas.
  EXPECT_EQ(bo.Get("/v1/services/red/echo").status, 404);
  EXPECT_EQ(bo.Get(fmt::format("/v1/jobs/{}", v1[0])).status, 404);
  EXPECT_EQ(bo.Post(fmt::format("/v1/jobs/{}/cancel", v1[0]), "").status, 404);

  // A new revision replaces the replicas one at a time (max_surge 1,
  // max_unavailable 0): never fewer than two ready.
  std::string v2 = kSleeper;
  v2.replace(v2.find("\"600\""), 5, "\"601\"");
  ASSERT_EQ(rita.Post("/v1/services", v2, "application/yaml").status, 200);
  int fewest_serving = 99;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!show()) return false;
        fewest_serving = std::min(fewest_serving, ServingOf(service));
        return ReadyOf(service, 2) == 2 && service.at("status").at("replicas").size() == 2;
      },
      30s, 20ms))
      << service.dump();
  EXPECT_GE(fewest_serving, 2);
  for (std::int64_t id : v1) EXPECT_TRUE(berthd.WaitForState(id, "Cancelled", 10s));

  // Scaled to one: one replica stops.
  ASSERT_EQ(rita.Post("/v1/services/red/echo/scale?min=1", "").status, 200);
  ASSERT_TRUE(
      WaitFor([&] { return show() && service.at("status").at("replicas").size() == 1; }, 15s))
      << service.dump();

  // Deleted: its last replica stops.
  const std::int64_t last = service.at("status").at("replicas").at(0).at("job");
  ASSERT_EQ(rita.Delete("/v1/services/red/echo").status, 200);
  EXPECT_TRUE(berthd.WaitForState(last, "Cancelled", 15s));

  // Berth's own actions on the service are in the audit trail.
  auto audit = berthd.http().Get("/v1/audit?action=service.replica.&limit=100");
  ASSERT_EQ(audit.status, 200) << audit.text;
  int starts = 0;
  int stops = 0;
  for (const auto& rec : audit.body.at("records")) {
    EXPECT_EQ(rec.at("actor"), "berth");
    EXPECT_EQ(rec.at("object"), "service/red/echo");
    starts += rec.at("action") == "service.replica.start" ? 1 : 0;
    stops += rec.at("action") == "service.replica.stop" ? 1 : 0;
  }
  EXPECT_EQ(starts, 4) << audit.text;
  EXPECT_EQ(stops, 4) << audit.text;
}

TEST_F(ServiceTest, EachReplicaServesOnAPortOfItsNodeThatItsAgentGave) {
  Berthd& berthd = NewBerthd(AllInOne({"--service-interval", "200ms"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_EQ(berthd.http().Post("/v1/policy", kRedBlueServe).status, 201);
  const auto bin = dir_ / "llm";
  const auto server = TenantModelServer(bin);
  const std::string spec = fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "200"]
port: 8000
model: {{name: test/llm, version: v1}}
replicas: {{min: 2, max: 2}}
resources: {{gpus: 1}}
)",
                                       server.string());
  ASSERT_EQ(berthd.http().Post("/v1/services", spec, "application/yaml").status, 201);
  json service;
  auto ports = [&] {
    std::vector<int> out;
    for (const auto& r : service.at("status").at("replicas")) {
      if (r.at("port").is_number()) out.push_back(r.at("port").get<int>());
    }
    return out;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        auto got = berthd.http().Get("/v1/services/red/llm");
        service = got.body;
        return got.status == 200 && ports().size() == 2;
      },
      30s))
      << service.dump();
  const std::vector<int> given = ports();
  EXPECT_NE(given[0], given[1]);
  // Each replica is a model server listening where its agent said.
  for (int port : given) {
    Http replica(port, 5s);
    EXPECT_TRUE(WaitFor([&] { return replica.Get("/health").status == 200; }, 15s)) << port;
    auto answer =
        replica.Post("/v1/completions", R"({"prompt":"hello","max_tokens":2})", "application/json");
    EXPECT_EQ(answer.status, 200) << answer.text;
  }
  // The job shows the port on its run, and its timeline says so.
  const std::int64_t job = service.at("status").at("replicas").at(0).at("job");
  auto detail = berthd.http().Get(fmt::format("/v1/jobs/{}", job));
  ASSERT_EQ(detail.status, 200);
  EXPECT_EQ(detail.body.at("runs").at(0).at("port"), given[0]) << detail.text;
  EXPECT_NE(detail.text.find(fmt::format("serving on port {}", given[0])), std::string::npos)
      << detail.text;
  EXPECT_EQ(detail.body.at("spec").at("env").at("BERTH_MODEL"), "test/llm") << detail.text;
}

// Probes on a real agent: a model server is not ready while it loads (its
// /health answers 503), then ready; a replica whose liveness command fails
// is stopped by its agent, fails with that reason, and is replaced.
TEST_F(ServiceTest, ReadinessGatesAReplicaAndAFailedLivenessReplacesIt) {
  Berthd& berthd = NewBerthd(AllInOne({"--service-interval", "200ms"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_EQ(berthd.http().Post("/v1/policy", kRedBlueServe).status, 201);
  const auto bin = dir_ / "llm";
  const auto server = TenantModelServer(bin);
  const auto dead = bin / "dead";
  const std::string spec = fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "4000"]
port: 8000
replicas: {{min: 1, max: 1}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms, failure_threshold: 1}}
liveness: {{command: [sh, -c, "test ! -e {}"], period: 1s, failure_threshold: 2}}
)",
                                       server.string(), dead.string());
  ASSERT_EQ(berthd.http().Post("/v1/services", spec, "application/yaml").status, 201);
  json service;
  auto show = [&] {
    auto got = berthd.http().Get("/v1/services/red/llm");
    service = got.body;
    return got.status == 200;
  };
  // Loading: running, not ready, and the status says what it waits for.
  ASSERT_TRUE(WaitFor(
      [&] {
        return show() && service.at("status").at("not_ready") == 1 &&
               service.at("status").at("waiting").is_string();
      },
      30s, 50ms))
      << service.dump();
  EXPECT_EQ(service.at("status").at("ready"), 0);
  const json& loading = service.at("status").at("replicas").at(0);
  EXPECT_EQ(loading.at("ready"), false);
  EXPECT_NE(service.at("status").at("waiting").get<std::string>().find("not ready for"),
            std::string::npos)
      << service.dump();
  const std::int64_t first = loading.at("job");
  // Loaded: ready, with the probe's outcome. The count is read from the
  // runs and the phase from the controller's round, which follows at once:
  // wait for both.
  ASSERT_TRUE(WaitFor(
      [&] {
        return show() && service.at("status").at("ready") == 1 &&
               service.at("status").at("phase") == "steady";
      },
      30s))
      << service.dump();
  EXPECT_EQ(service.at("status").at("replicas").at(0).at("probe"), "GET /health: HTTP 200");
  auto job = berthd.http().Get(fmt::format("/v1/jobs/{}", first));
  ASSERT_EQ(job.status, 200);
  EXPECT_NE(job.text.find("is ready: GET /health: HTTP 200"), std::string::npos) << job.text;

  // Its liveness command fails twice: its agent stops it, and it fails for it.
  { std::ofstream(dead.string()) << "x"; }
  ASSERT_TRUE(berthd.WaitForState(first, "Failed", 30s)) << berthd.log();
  std::filesystem::remove(dead);
  job = berthd.http().Get(fmt::format("/v1/jobs/{}", first));
  ASSERT_EQ(job.status, 200);
  EXPECT_EQ(job.body.at("reason").at("code"), "LivenessFailed") << job.text;
  EXPECT_NE(job.text.find("liveness failed 2 times in a row"), std::string::npos) << job.text;
  // Replaced after the crash back-off, by a replica that becomes ready.
  ASSERT_TRUE(WaitFor(
      [&] {
        return show() && service.at("status").at("ready") == 1 &&
               service.at("status").at("replicas").at(0).at("job") != first;
      },
      60s))
      << service.dump();
}

TEST_F(ServiceTest, AReplicaThatKeepsCrashingIsReplacedAfterABackoff) {
  Berthd& berthd = NewBerthd(AllInOne({"--service-interval", "200ms"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_EQ(berthd.http().Post("/v1/policy", kRedBlueServe).status, 201);
  std::string crasher = kSleeper;
  crasher.replace(crasher.find("[sleep, \"600\"]"), 14, "[\"false\"]");
  crasher.replace(crasher.find("min: 2"), 6, "min: 1");
  ASSERT_EQ(berthd.http().Post("/v1/services", crasher, "application/yaml").status, 201);
  json service;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto got = berthd.http().Get("/v1/services/red/echo");
        service = got.body;
        return got.status == 200 && service.at("status").at("phase") == "backing_off";
      },
      30s))
      << service.dump();
  const json& status = service.at("status");
  EXPECT_GE(status.at("recent_crashes").get<int>(), 1) << status.dump();
  ASSERT_TRUE(status.at("backoff_until_ms").is_number()) << status.dump();
  // One crashed replica, held back: no replica is started meanwhile.
  EXPECT_TRUE(status.at("replicas").empty()) << status.dump();
  auto jobs = berthd.http().Get("/v1/jobs?tenant=red&limit=100");
  ASSERT_EQ(jobs.status, 200) << jobs.text;
  int replicas = 0;
  for (const auto& j : jobs.body.at("jobs")) {
    if (!j.at("service").is_null()) {
      ++replicas;
      EXPECT_EQ(j.at("state"), "Failed") << j.dump();
    }
  }
  EXPECT_EQ(replicas, status.at("recent_crashes").get<int>()) << jobs.text;

  // berth svc why says what is missing and why.
  auto why = Cli(berthd, {"svc", "why", "red/echo"});
  ASSERT_EQ(why.exit_code, 0) << why.out << why.err;
  EXPECT_NE(why.out.find("service red/echo: 0 of 1 replicas ready (backing_off)"),
            std::string::npos)
      << why.out;
  EXPECT_NE(why.out.find("replicas crashed"), std::string::npos) << why.out;
}

// A pool's inference headroom (policy pools[].inference_headroom): a
// low-priority preemptible training job fills the pool, headroom included;
// the service's replica takes the headroom back at once, long before the
// policy's reclaim grace (30m here) would let a lender's job go, and the
// evicted job's reason names the service.
constexpr const char* kRedHeadroom = R"(reclaim_grace: 30m
pools:
  - {name: default, selector: {}, inference_headroom: {gpus: 2}}
queues:
  - name: default
    children:
      - name: default
  - name: red
    children:
      - name: main
      - name: serve
        kind: inference
)";

TEST_F(ServiceTest, AReplicaReclaimsThePoolsInferenceHeadroomFromPreemptibleTraining) {
  // The training job shrugs off SIGTERM, so it stays stopping (its reason
  // HeadroomReclaimed) while the test reads it.
  Berthd& berthd = NewBerthd(AllInOne({"--service-interval", "200ms", "--stop-grace", "60s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  ASSERT_EQ(berthd.http().Post("/v1/policy", kRedHeadroom).status, 201);
  const std::string red = MemberToken(berthd.http(), "rita", "red", "member");
  Http rita(berthd.api_port(), 10s);
  rita.set_token(red);

  // A non-preemptible training job may not use the headroom: 7 of 8 GPUs
  // wait, and say why.
  const std::int64_t held = berthd.Submit(JobSpecJson(
      "held", {"sleep", "600"}, 7, {{"tenant", "red"}, {"queue", "main"}, {"preemptible", false}}));
  ASSERT_GT(held, 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        const json job = berthd.Job(held);
        if (!job.is_object() || !job.contains("reason") || !job["reason"].is_object()) {
          return false;
        }
        return job.value("state", "") == "Pending" &&
               job["reason"].value("detail", "") == "headroom_pool=default";
      },
      20s))
      << berthd.Job(held).dump(2);
  ASSERT_EQ(berthd.http().Post(fmt::format("/v1/jobs/{}/cancel", held), "").status, 200);
  ASSERT_TRUE(berthd.WaitForState(held, "Cancelled", 20s));

  // A low-priority preemptible one fills the pool, headroom included.
  const std::int64_t filler = berthd.Submit(JobSpecJson(
      "filler", Sh("trap '' TERM; while :; do sleep 0.2; done"), 8,
      {{"tenant", "red"}, {"queue", "main"}, {"priority", "low"}, {"preemptible", true}}));
  ASSERT_GT(filler, 0);
  ASSERT_TRUE(berthd.WaitForState(filler, "Running", 20s)) << berthd.Job(filler).dump(2);

  // The service comes up: its replica takes the headroom back at once.
  constexpr const char* kServe = R"(name: coder
tenant: red
queue: serve
command: [sleep, "600"]
replicas: {min: 1, max: 2}
resources: {gpus: 1}
)";
  ASSERT_EQ(rita.Post("/v1/services", kServe, "application/yaml").status, 201);
  ASSERT_TRUE(WaitFor([&] { return CountEvents(berthd.Job(filler), "Reclaiming") == 1; }, 30s))
      << berthd.Job(filler).dump(2);
  const json job = berthd.Job(filler);
  EXPECT_EQ(job["reason"]["code"], "HeadroomReclaimed") << job.dump(2);
  EXPECT_EQ(job["reason"]["detail"], "red/coder default") << job.dump(2);
  EXPECT_NE(job["reason"].value("message", "").find("reclaimed for inference service red/coder"),
            std::string::npos)
      << job.dump(2);
}

}  // namespace
}  // namespace berth::it

namespace berth::it {
namespace {

// Clients calling red/llm through the gateway, one request after another
// each, until stopped: every answer counted by the version that gave it, and
// every failure kept for the message.
class SteadyLoad {
 public:
  SteadyLoad(int gateway_port, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, gateway_port] {
        Http client(gateway_port, 30s);
        while (!stop_.load()) {
          auto r = client.Post("/s/red/llm/v1/completions", R"({"prompt":"load","max_tokens":1})",
                               "application/json");
          std::lock_guard lock(mu_);
          if (r.status == 200) {
            ++served_[r.body.value("version", std::string("?"))];
          } else {
            failures_.push_back(fmt::format("{} {}", r.status, r.text.substr(0, 200)));
          }
        }
      });
    }
  }
  ~SteadyLoad() { Stop(); }
  SteadyLoad(const SteadyLoad&) = delete;
  SteadyLoad& operator=(const SteadyLoad&) = delete;

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Answers by version since the start or the last Reset.
  std::map<std::string, int> served() {
    std::lock_guard lock(mu_);
    return served_;
  }
  void Reset() {
    std::lock_guard lock(mu_);
    served_.clear();
  }
  std::vector<std::string> failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, int> served_;
  std::vector<std::string> failures_;
  std::vector<std::thread> threads_;
};

// The services above run behind berthd's gateway (a real HAProxy): a
// request to the service's endpoint reaches a ready replica.
class ServiceGatewayTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    if (RunCommand("/bin/sh", {"-c", "command -v haproxy"}, dir_.path()).exit_code != 0) {
      GTEST_SKIP() << "haproxy is not installed (scripts/install-deps.sh installs it)";
    }
  }

  // A started berthd with its gateway (rounds every 200 ms) and the red and
  // blue tenants' policy; null, with the failure said, when it did not start.
  // `tls`: its API on HTTPS with the data dir's CA, as berthd runs by default.
  Berthd* StartGatewayBerthd(bool tls = false, const char* policy_text = kRedBlueServe) {
    BerthdOptions options = AllInOne({"--service-interval", "200ms", "--alert-interval", "500ms"});
    options.gateway = true;
    options.tls = tls;
    Berthd& berthd = NewBerthd(options);
    if (!berthd.Start()) {
      ADD_FAILURE() << berthd.log();
      return nullptr;
    }
    const auto policy = berthd.http().Post("/v1/policy", policy_text);
    if (policy.status != 201) {
      ADD_FAILURE() << policy.text;
      return nullptr;
    }
    return &berthd;
  }

  json Service(const Berthd& berthd, const std::string& path = "/v1/services/red/llm") {
    auto got = berthd.http().Get(path);
    return got.status == 200 ? got.body : json();
  }

  // Waits until red/llm has one replica in the gateway's route; `service` is
  // the last one read (for the failure message).
  bool WaitRouted(const Berthd& berthd, json& service, Ms timeout) {
    return WaitFor(
        [&] {
          service = Service(berthd);
          return service.is_object() && service.at("status").value("routed", 0) == 1;
        },
        timeout);
  }

  // Applies red/llm's first spec and waits for the controller's first round
  // of it (its route exists from then on); the service then, or null with
  // the failure added.
  json ApplyUntilReconciled(const Berthd& berthd, const std::string& spec) {
    const auto applied = berthd.http().Post("/v1/services", spec, "application/yaml");
    if (applied.status != 201) {
      ADD_FAILURE() << applied.text;
      return json();
    }
    json service;
    const bool reconciled = WaitFor(
        [&] {
          service = Service(berthd);
          return service.is_object() && service.at("status").at("phase") != "pending";
        },
        20s);
    if (!reconciled) {
      ADD_FAILURE() << service.dump();
      return json();
    }
    return service;
  }
};

// The service list tells a caller with a token where the gateway is and
// whether it serves, the same for every tenant and naming none of them; an
// anonymous caller learns nothing.
TEST_F(ServiceGatewayTest, TheServiceListShowsTheGatewayToTokensOnly) {
  Berthd* started = StartGatewayBerthd();
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  ASSERT_EQ(berthd.http().Post("/v1/services", kCoder, "application/yaml").status, 201);
  Http red = berthd.http();
  red.set_token(MemberToken(berthd.http(), "rita", "red", "member"));
  Http blue = berthd.http();
  blue.set_token(MemberToken(berthd.http(), "bo", "blue", "member"));

  const auto seen = red.Get("/v1/services");
  ASSERT_EQ(seen.status, 200) << seen.text;
  EXPECT_EQ(seen.body.at("gateway"), (json{{"url", berthd.gateway_url()}, {"up", true}}))
      << seen.text;
  EXPECT_EQ(seen.body.at("services").size(), 1u) << seen.text;

  // Another tenant's member: the same gateway, nothing of red's.
  const auto other = blue.Get("/v1/services");
  ASSERT_EQ(other.status, 200) << other.text;
  EXPECT_EQ(other.body.at("gateway"), seen.body.at("gateway"));
  EXPECT_TRUE(other.body.at("services").empty()) << other.text;
  EXPECT_EQ(other.text.find("red"), std::string::npos) << other.text;

  Http anonymous = berthd.http();
  anonymous.set_token("");
  const auto refused = anonymous.Get("/v1/services");
  EXPECT_EQ(refused.status, 401) << refused.text;
  EXPECT_EQ(refused.text.find("gateway"), std::string::npos) << refused.text;
  EXPECT_EQ(refused.text.find(std::to_string(berthd.gateway_port())), std::string::npos)
      << refused.text;
}

// Scale to zero and back: a service with no replica holds the first
// request at the gateway, starts a replica, answers the request once it is
// ready, and records the cold start; with no requests for its idle window
// it drains its replica and goes back to zero.
TEST_F(ServiceGatewayTest, AHeldRequestStartsAReplicaAndTheServiceGoesBackToZero) {
  Berthd* started = StartGatewayBerthd();
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const auto server = TenantModelServer(dir_ / "llm");
  const std::string spec = fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "300"]
port: 8000
replicas: {{min: 0, max: 2}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
autoscaling:
  signal: concurrency
  target: 4
  stable_window: 4s
  panic_window: 2s
  down_stabilization: 2s
  scale_to_zero: {{enabled: true, idle_window: 3s}}
)",
                                       server.string());
  json service = ApplyUntilReconciled(berthd, spec);
  ASSERT_TRUE(service.is_object());
  EXPECT_EQ(service.at("status").at("desired"), 0) << service.dump();
  EXPECT_TRUE(service.at("status").at("replicas").empty()) << service.dump();
  EXPECT_EQ(service.at("status").at("endpoint"),
            fmt::format("{}/s/red/llm/", berthd.gateway_url()));

  // The first request: held at zero, then answered by the replica it started.
  Http gateway(berthd.gateway_port(), 60s);
  gateway.set_token(MemberToken(berthd.http(), "rita", "red", "member"));
  const auto sent = std::chrono::steady_clock::now();
  auto answer = gateway.Post("/s/red/llm/v1/completions", R"({"prompt":"hi","max_tokens":2})",
                             "application/json");
  const auto waited = std::chrono::steady_clock::now() - sent;
  ASSERT_EQ(answer.status, 200) << answer.text << "\n" << berthd.log();
  ASSERT_TRUE(WaitFor(
      [&] {
        service = Service(berthd);
        return service.is_object() && service.at("status").at("last_cold_start").is_object();
      },
      10s))
      << service.dump();
  const json cold = service.at("status").at("last_cold_start");
  EXPECT_GT(cold.at("duration_ms").get<std::int64_t>(), 0) << cold.dump();
  // Measured by berthd within the time the client waited.
  EXPECT_LE(cold.at("duration_ms").get<std::int64_t>(),
            std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() + 500)
      << cold.dump();
  const std::int64_t replica = cold.at("job");
  auto job = berthd.http().Get(fmt::format("/v1/jobs/{}", replica));
  ASSERT_EQ(job.status, 200);
  EXPECT_EQ(CountEvents(job.body, "ColdStart"), 1) << job.text;
  EXPECT_NE(job.text.find("scaled from zero"), std::string::npos) << job.text;

  // Served while it runs: no hold.
  answer = gateway.Post("/s/red/llm/v1/completions", R"({"prompt":"again","max_tokens":2})",
                        "application/json");
  EXPECT_EQ(answer.status, 200) << answer.text;
  // A path under no service: the gateway's own 404.
  EXPECT_EQ(gateway.Get("/s/red/nothing/v1/models").status, 404);
  // Both requests are in the hour's SLO figures, neither an error.
  ASSERT_TRUE(WaitFor(
      [&] {
        service = Service(berthd);
        return service.is_object() && service.at("status").at("slo").is_object() &&
               service.at("status").at("slo").at("requests") == 2;
      },
      10s))
      << service.dump();
  EXPECT_EQ(service.at("status").at("slo").at("errors"), 0);
  EXPECT_EQ(service.at("status").at("slo").at("availability"), 1.0);
  EXPECT_GE(service.at("status").at("slo").at("windows").get<int>(), 1);
  // The gateway's counters follow: both routed, none held or in flight now.
  ASSERT_TRUE(WaitFor(
      [&] {
        service = Service(berthd);
        if (!service.is_object() || !service.at("status").at("traffic").is_object()) return false;
        const json& t = service.at("status").at("traffic");
        return t.at("requests_total").get<int>() >= 2 && t.at("held") == 0 &&
               t.at("in_flight") == 0;
      },
      10s))
      << service.dump();

  // /metrics has the gateway's view of it once the request log has both
  // requests; `berth svc show` too.
  const std::string llm = R"({tenant="red",service="llm")";
  std::string metrics;
  EXPECT_TRUE(WaitFor(
      [&] {
        metrics = berthd.http().Get("/metrics").text;
        return metrics.find("berth_service_responses_total" + llm + R"(,code="2xx"} 2)" + "\n") !=
               std::string::npos;
      },
      10s))
      << metrics;
  EXPECT_NE(metrics.find("berth_service_request_duration_seconds_bucket" + llm +
                         R"(,le="+Inf"} 2)" + "\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("berth_service_request_duration_seconds_count" + llm + "} 2\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("berth_service_cold_start_seconds" + llm + "} "), std::string::npos);
  // Present; its value is the round's counters (see the status's traffic).
  EXPECT_NE(metrics.find("berth_service_requests_held" + llm + "} "), std::string::npos);
  EXPECT_NE(metrics.find("berth_service_requests_queued" + llm + "} "), std::string::npos);
  EXPECT_NE(metrics.find("berth_service_requests_in_flight" + llm + "} "), std::string::npos);
  auto shown = Cli(berthd, {"svc", "show", "red/llm"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find(fmt::format("Endpoint:  {}/s/red/llm/\n", berthd.gateway_url())),
            std::string::npos)
      << shown.out;
  EXPECT_NE(shown.out.find(fmt::format(", replica job {}\n", replica)), std::string::npos)
      << shown.out;
  EXPECT_NE(shown.out.find("Traffic:   "), std::string::npos) << shown.out;

  // No requests for the idle window: the replica drains and stops, zero again.
  ASSERT_TRUE(WaitFor(
      [&] {
        service = Service(berthd);
        return service.is_object() && service.at("status").at("replicas").empty() &&
               service.at("status").at("desired") == 0;
      },
      40s))
      << service.dump();
  EXPECT_EQ(service.at("status").at("autoscale").at("code"), "scale_to_zero") << service.dump();
  EXPECT_TRUE(berthd.WaitForTerminal(replica, 10s));
  EXPECT_NE(berthd.log().find(fmt::format("replica job {} drained and stopped", replica)),
            std::string::npos);
}

// A rolling update behind the gateway under steady load: the new revision's
// replica joins the route once ready, the old one leaves it and drains
// before it is stopped, and not one request fails.
TEST_F(ServiceGatewayTest, ARollingUpdateUnderLoadLosesNoRequest) {
  Berthd* started = StartGatewayBerthd();
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const auto server = TenantModelServer(dir_ / "llm");
  auto spec = [&](const std::string& version) {
    return fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "500", --model-version, "{}", --ttft-ms, "20"]
port: 8000
access: public
replicas: {{min: 1, max: 1}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
)",
                       server.string(), version);
  };
  ASSERT_EQ(berthd.http().Post("/v1/services", spec("v1"), "application/yaml").status, 201);
  Http gateway(berthd.gateway_port(), 30s);
  auto version_served = [&] {
    auto r = gateway.Post("/s/red/llm/v1/completions", R"({"prompt":"v","max_tokens":1})",
                          "application/json");
    return r.status == 200 ? r.body.value("version", r.text) : std::string();
  };
  ASSERT_TRUE(WaitFor([&] { return !version_served().empty(); }, 30s)) << berthd.log();

  // Steady load: two clients, one request after another, every answer counted.
  SteadyLoad load(berthd.gateway_port(), 2);
  std::this_thread::sleep_for(1s);
  ASSERT_EQ(berthd.http().Post("/v1/services", spec("v2"), "application/yaml").status, 200);
  json service;
  const bool rolled = WaitFor(
      [&] {
        service = Service(berthd);
        if (!service.is_object()) return false;
        const json& st = service.at("status");
        return st.at("replicas").size() == 1 && st.at("ready") == 1 &&
               st.at("replicas").at(0).at("current") == true && st.at("draining") == 0;
      },
      60s);
  std::this_thread::sleep_for(1s);  // load on v2 alone
  load.Stop();
  ASSERT_TRUE(rolled) << service.dump() << berthd.log();
  EXPECT_TRUE(load.failures().empty()) << fmt::format("{}", fmt::join(load.failures(), "\n"));
  const auto seen = load.served();
  int answered = 0;
  std::string versions;
  for (const auto& [version, n] : seen) {
    answered += n;
    versions += fmt::format("{}: {}; ", version, n);
  }
  EXPECT_GT(answered, 20) << versions;
  EXPECT_TRUE(seen.contains("v1")) << versions;
  EXPECT_TRUE(seen.contains("v2")) << versions;
  EXPECT_EQ(version_served(), "v2");
  EXPECT_NE(berthd.log().find("drained and stopped (replaced)"), std::string::npos);
  // What a deploy pipeline waits on.
  auto status = Cli(berthd, {"svc", "rollout", "status", "red/llm", "--wait", "30s"});
  EXPECT_EQ(status.exit_code, 0) << status.out << status.err;
  EXPECT_NE(status.out.find("\ncomplete: every replica runs revision 2\n"), std::string::npos)
      << status.out;
}

// A canary rollout under load: v2's first step sends a quarter of the
// requests to one new replica while both of v1's serve the rest, and waits
// to be resumed; its second sends them all to v2 for a second; then the
// rolling update replaces v1. No request fails, and every move is audited.
TEST_F(ServiceGatewayTest, ACanaryRolloutSplitsTheRequestsStepByStepLosingNone) {
  Berthd* started = StartGatewayBerthd();
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const auto server = TenantModelServer(dir_ / "llm");
  auto spec = [&](const std::string& version) {
    return fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "300", --model-version, "{}", --ttft-ms, "5"]
port: 8000
access: public
replicas: {{min: 2, max: 2}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
rollout: {{canary: [{{weight: 25}}, {{weight: 100, pause: 1s}}]}}
)",
                       server.string(), version);
  };
  ASSERT_EQ(berthd.http().Post("/v1/services", spec("v1"), "application/yaml").status, 201);
  json service;
  ASSERT_TRUE(WaitFor(
      [&] {
        service = Service(berthd);
        return service.is_object() && service.at("status").value("routed", 0) == 2;
      },
      60s))
      << service.dump() << berthd.log();
  // A resume with no rollout under way changes nothing.
  EXPECT_EQ(berthd.http().Post("/v1/services/red/llm/rollout/resume", "").status, 409);

  SteadyLoad load(berthd.gateway_port(), 2);
  ASSERT_EQ(berthd.http().Post("/v1/services", spec("v2"), "application/yaml").status, 200);
  const bool waiting = WaitFor(
      [&] {
        service = Service(berthd);
        const json& st = service.at("status");
        return st.value("phase", "") == "canary" && st.at("canary").is_object() &&
               st.at("canary").value("awaiting_resume", false) && st.value("routed", 0) == 3;
      },
      60s);
  if (!waiting) load.Stop();
  ASSERT_TRUE(waiting) << service.dump() << berthd.log();
  const json& canary = service.at("status").at("canary");
  EXPECT_EQ(canary.value("step", 0), 1);
  EXPECT_EQ(canary.value("steps", 0), 2);
  EXPECT_EQ(canary.value("weight_pct", 0), 25);
  EXPECT_EQ(canary.value("replicas", 0), 1);
  // The step holds: one v2 replica and both v1 ones, about a quarter of the
  // requests on v2 (weighted round robin: 50 to v2's server, 75 to each of
  // v1's).
  load.Reset();
  std::this_thread::sleep_for(3s);
  auto served = load.served();
  const int v1 = served["v1"];
  const int v2 = served["v2"];
  EXPECT_GT(v1 + v2, 40);
  EXPECT_NEAR(100.0 * v2 / std::max(v1 + v2, 1), 25.0, 8.0) << v1 << " v1, " << v2 << " v2";
  RecordProperty("step1_v1_requests", v1);  // in --gtest_output=xml, for the figures
  RecordProperty("step1_v2_requests", v2);
  service = Service(berthd);
  EXPECT_EQ(service.at("status").value("phase", ""), "canary") << service.dump();
  EXPECT_NE(
      service.at("status")
          .value("waiting", "")
          .find("canary step 1 of 2: 25% of the requests to revision 2 on 1 replica; the next "
                "step waits for berth svc rollout resume red/llm"),
      std::string::npos)
      << service.dump();
  auto held = Cli(berthd, {"svc", "rollout", "status", "red/llm", "--wait", "2s"});
  EXPECT_NE(held.exit_code, 0);
  EXPECT_NE(held.out.find("canary step 1 waits: berth svc rollout resume red/llm goes on"),
            std::string::npos)
      << held.out;
  EXPECT_NE(held.err.find("waits at canary step 1"), std::string::npos) << held.err;

  auto resumed = Cli(berthd, {"svc", "rollout", "resume", "red/llm"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(resumed.out, "service red/llm: canary step 1 of 2 ended; step 2 begins\n");
  const bool rolled = WaitFor(
      [&] {
        service = Service(berthd);
        const json& st = service.at("status");
        return st.at("replicas").size() == 2 && st.value("ready", 0) == 2 &&
               st.at("replicas").at(0).value("current", false) &&
               st.at("replicas").at(1).value("current", false) && st.value("draining", 1) == 0;
      },
      60s);
  load.Stop();
  ASSERT_TRUE(rolled) << service.dump() << berthd.log();
  EXPECT_TRUE(load.failures().empty()) << fmt::format("{}", fmt::join(load.failures(), "\n"));
  EXPECT_EQ(berthd.http().Post("/v1/services/red/llm/rollout/resume", "").status, 409);

  // Who moved it: the resume by its caller, step 2's end by Berth.
  auto audit = berthd.http().Get("/v1/audit?tenant=red");
  std::vector<std::string> moves;
  for (const auto& r : audit.body.value("records", json::array())) {
    const std::string action = r.value("action", "");
    if (action.starts_with("service.rollout.") && r.value("outcome", "") == "ok") {
      moves.push_back(fmt::format("{} {} step {}", action, r.value("actor", ""),
                                  r.at("after").value("step_ended", 0)));
    }
  }
  EXPECT_EQ(moves, (std::vector<std::string>{"service.rollout.resume admin step 1",
                                             "service.rollout.step berth step 2"}))
      << audit.text;

  // A bad v3 caught at its first step: the rollback to what v2's replicas
  // still run skips the steps, and v3's canary goes at once.
  ASSERT_EQ(berthd.http().Post("/v1/services", spec("v3"), "application/yaml").status, 200);
  ASSERT_TRUE(WaitFor(
      [&] {
        service = Service(berthd);
        const json& st = service.at("status");
        return st.value("phase", "") == "canary" && st.value("routed", 0) == 3;
      },
      60s))
      << service.dump() << berthd.log();
  ASSERT_EQ(berthd.http().Post("/v1/services/red/llm/rollback", "").status, 200);
  ASSERT_TRUE(WaitFor(
      [&] {
        service = Service(berthd);
        const json& st = service.at("status");
        return service.value("revision", 0) == 4 && st.value("phase", "") == "steady" &&
               st.value("routed", 0) == 2 && st.value("draining", 1) == 0 &&
               st.at("replicas").size() == 2 && st.at("canary").is_null();
      },
      30s))
      << service.dump() << berthd.log();
  Http gateway(berthd.gateway_port(), 30s);
  auto answer = gateway.Post("/s/red/llm/v1/completions", R"({"prompt":"v","max_tokens":1})",
                             "application/json");
  EXPECT_EQ(answer.body.value("version", answer.text), "v2");
}

// The control plane dies and the services go on: with berthd killed the
// gateway keeps serving the routes it has, and a berthd restarted on the
// same data directory adopts that HAProxy instead of starting another.
TEST_F(ServiceGatewayTest, ServicesAnswerWhileBerthdIsDownAndARestartAdoptsTheGateway) {
  Berthd* started = StartGatewayBerthd();
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const auto server = TenantModelServer(dir_ / "llm");
  const std::string spec = fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "0"]
port: 8000
replicas: {{min: 1, max: 1}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
)",
                                       server.string());
  ASSERT_EQ(berthd.http().Post("/v1/services", spec, "application/yaml").status, 201);
  Http gateway(berthd.gateway_port(), 30s);
  // A member the gateway checked while berthd was up stays served while it
  // is down (route.h, kAuthStaleSeconds).
  gateway.set_token(MemberToken(berthd.http(), "rita", "red", "member"));
  auto ask = [&] {
    return gateway
        .Post("/s/red/llm/v1/completions", R"({"prompt":"hi","max_tokens":1})", "application/json")
        .status;
  };
  ASSERT_TRUE(WaitFor([&] { return ask() == 200; }, 30s)) << berthd.log();
  const std::string pid_file = (berthd.data_dir() / "gateway" / "haproxy.pid").string();
  const std::string haproxy = ReadFile(pid_file);
  ASSERT_FALSE(haproxy.empty());

  berthd.Kill();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ask(), 200) << "request " << i << " with berthd down";
  // A caller it never checked cannot be checked now: 503, not let through.
  Http stranger(berthd.gateway_port(), 30s);
  stranger.set_token("berth_unchecked.0000");
  EXPECT_EQ(stranger
                .Post("/s/red/llm/v1/completions", R"({"prompt":"hi","max_tokens":1})",
                      "application/json")
                .status,
            503);

  ASSERT_TRUE(berthd.Start()) << berthd.log();
  EXPECT_NE(berthd.log().find("gateway: HAProxy adopted"), std::string::npos) << berthd.log();
  EXPECT_EQ(ReadFile(pid_file), haproxy);
  // The restarted berthd drives it: the replica is still routed.
  json service;
  ASSERT_TRUE(WaitRouted(berthd, service, 20s)) << service.dump();
  EXPECT_EQ(ask(), 200);
}

// Who may call a service through the gateway: a member of its tenant with a
// Berth token, checked at berthd over its HTTPS API. The replica learns the
// caller's name and never sees the token; a name a caller forges is
// dropped. No token: 401; a viewer's: 403; another tenant's: 404; a revoked
// token is refused once the gateway's memory of it lapses. A refused
// request never wakes a service held at zero.
TEST_F(ServiceGatewayTest, OnlyTheServicesTenantCallsItAndTheReplicaNeverSeesTheToken) {
  Berthd* started = StartGatewayBerthd(/*tls=*/true);
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const std::string rita = MemberToken(berthd.http(), "rita", "red", "member");
  const std::string vera = MemberToken(berthd.http(), "vera", "red", "viewer");
  const std::string bo = MemberToken(berthd.http(), "bo", "blue", "member");
  const auto server = TenantModelServer(dir_ / "llm");
  const std::string spec = fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "0"]
port: 8000
replicas: {{min: 0, max: 1}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
autoscaling: {{scale_to_zero: {{enabled: true, idle_window: 5m}}}}
)",
                                       server.string());
  json service = ApplyUntilReconciled(berthd, spec);
  ASSERT_TRUE(service.is_object());
  auto call = [&](const std::string& token) {
    Http gateway(berthd.gateway_port(), 30s);
    gateway.set_token(token);
    gateway.set_header("X-Berth-User", "mallory");
    return gateway.Post("/s/red/llm/v1/completions", R"({"prompt":"hi","max_tokens":1})",
                        "application/json");
  };
  // Refused, each with berthd's answer, and none of them held.
  auto anonymous = call("");
  EXPECT_EQ(anonymous.status, 401) << anonymous.text;
  EXPECT_EQ(anonymous.headers["www-authenticate"], R"(Bearer realm="berth")");
  EXPECT_EQ(call("berth_madeup.secret").status, 401);
  EXPECT_EQ(call(vera).status, 403);
  EXPECT_EQ(call(bo).status, 404);
  std::this_thread::sleep_for(1s);  // five rounds
  service = Service(berthd);
  ASSERT_TRUE(service.is_object());
  EXPECT_TRUE(service.at("status").at("replicas").empty()) << service.dump();
  EXPECT_EQ(service.at("status").at("desired"), 0) << service.dump();
  // Refused before any backend: in none of the service's figures.
  EXPECT_EQ(service.at("status").at("traffic").at("requests_total"), 0) << service.dump();
  EXPECT_EQ(service.at("status").at("traffic").at("held_total"), 0) << service.dump();

  // A member: held, served, named to the replica, its token kept back.
  auto served = call(rita);
  ASSERT_EQ(served.status, 200) << served.text << berthd.log();
  EXPECT_EQ(served.body.at("caller").at("user"), "rita") << served.text;
  EXPECT_EQ(served.body.at("caller").at("authorization"), false) << served.text;
  // The platform admin too.
  EXPECT_EQ(call(berthd.http().token()).status, 200);

  // Revoked: refused once the gateway's verdict lapses.
  auto tokens = berthd.http().Get("/v1/tokens?identity=rita");
  std::string rita_id;
  for (const auto& t : tokens.body.value("tokens", json::array())) {
    if (t.value("identity", "") == "rita") rita_id = t.value("id", "");
  }
  ASSERT_FALSE(rita_id.empty()) << tokens.text;
  ASSERT_EQ(berthd.http()
                .Post(fmt::format("/v1/tokens/{}/revoke", rita_id), "", "application/json")
                .status,
            200);
  const auto revoked = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] { return call(rita).status == 401; }, 20s));
  EXPECT_LE(std::chrono::steady_clock::now() - revoked,
            std::chrono::seconds(gateway::kAuthAllowSeconds + 3));
}

// A notebook session (kind session, an interactive queue): started and
// opened with the CLI, reached through the gateway by its tenant's members
// only (another tenant's 404, a viewer's 403, no token 401, as the API
// answers), listed with its owner, and culled once no request came for its
// idle window: its replica's end and the audit trail say why.
constexpr const char* kRedNotebooks = R"(queues:
  - name: default
    children:
      - name: default
  - name: red
    children:
      - name: main
      - name: notebooks
        kind: interactive
  - name: blue
    children:
      - name: main
)";

TEST_F(ServiceGatewayTest, ASessionIsReachedByItsTenantOnlyAndCulledWhenIdle) {
  Berthd* started = StartGatewayBerthd(/*tls=*/false, kRedNotebooks);
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const std::string rita = MemberToken(berthd.http(), "rita", "red", "member");
  const std::string vera = MemberToken(berthd.http(), "vera", "red", "viewer");
  const std::string bo = MemberToken(berthd.http(), "bo", "blue", "member");
  const auto server = TenantModelServer(dir_ / "nb");

  auto start = CliAs(rita, berthd,
                     {"session", "start", "nb", "--queue", "notebooks", "--port", "8000", "--idle",
                      "30s", "--max-lifetime", "1h", "--", server.string(), "--load-ms", "0"});
  ASSERT_EQ(start.exit_code, 0) << start.out << start.err;
  EXPECT_NE(start.out.find("session red/nb started"), std::string::npos) << start.out;
  // Not another tenant's to start, nor a viewer's.
  auto theirs =
      CliAs(bo, berthd, {"session", "start", "red/nb2", "--queue", "notebooks", "--", "lab"});
  EXPECT_NE(theirs.exit_code, 0) << theirs.out;
  auto viewer = CliAs(vera, berthd, {"session", "start", "nb3", "--queue", "notebooks", "--", "x"});
  EXPECT_NE(viewer.exit_code, 0) << viewer.out;

  auto open = CliAs(rita, berthd, {"session", "open", "nb", "--wait", "60s"});
  ASSERT_EQ(open.exit_code, 0) << open.out << open.err << berthd.log();
  EXPECT_NE(open.out.find(fmt::format("URL:      {}/s/red/nb/\n", berthd.gateway_url())),
            std::string::npos)
      << open.out;
  EXPECT_NE(open.out.find("State:    ready"), std::string::npos) << open.out;

  auto call = [&](const std::string& token) {
    Http gateway(berthd.gateway_port(), 30s);
    gateway.set_token(token);
    return gateway.Post("/s/red/nb/v1/completions", R"({"prompt":"hi","max_tokens":1})",
                        "application/json");
  };
  auto served = call(rita);
  ASSERT_EQ(served.status, 200) << served.text << berthd.log();
  EXPECT_EQ(served.body.at("caller").at("user"), "rita") << served.text;
  EXPECT_EQ(call(bo).status, 404);
  EXPECT_EQ(call(vera).status, 403);
  EXPECT_EQ(call("").status, 401);

  auto mine = CliAs(rita, berthd, {"session", "list"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_NE(mine.out.find("nb"), std::string::npos) << mine.out;
  EXPECT_NE(mine.out.find("rita"), std::string::npos) << mine.out;
  auto others = CliAs(bo, berthd, {"session", "list"});
  ASSERT_EQ(others.exit_code, 0) << others.err;
  EXPECT_EQ(others.out, "No sessions.\n");
  // The service commands see it as what it is.
  auto show = CliAs(rita, berthd, {"svc", "show", "nb"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("Session:   ends "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("(idle)"), std::string::npos) << show.out;  // 30s comes before 1h
  EXPECT_NE(show.out.find("Hold:      up to 1m for a ready replica"), std::string::npos)
      << show.out;
  auto scale = CliAs(rita, berthd, {"svc", "scale", "nb", "--max", "2"});
  EXPECT_NE(scale.exit_code, 0);
  EXPECT_NE(scale.err.find("is a session"), std::string::npos) << scale.err;

  // Used a little longer: each request starts the idle window again (the
  // window is 30 s so that slow builds, sanitizers on, keep up).
  const json before = berthd.http().Get("/v1/services/red/nb").body;
  const std::int64_t replica = before.at("status").at("replicas").at(0).at("job");
  ASSERT_EQ(call(rita).status, 200);
  const auto first = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(20s);
  ASSERT_EQ(call(rita).status, 200) << "20 s after the request before: still there";
  const auto last = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(15s);
  // 35 s after the first request, 15 s after the last: the last one counted.
  EXPECT_EQ(berthd.http().Get("/v1/services/red/nb").status, 200)
      << "culled though a request came "
      << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - first)
             .count()
      << " s ago";

  // Then idle: culled within its window and a few rounds.
  ASSERT_TRUE(WaitFor([&] { return berthd.http().Get("/v1/services/red/nb").status == 404; }, 60s))
      << berthd.log();
  EXPECT_GE(std::chrono::steady_clock::now() - last, 29s);
  ASSERT_TRUE(berthd.WaitForState(replica, "Cancelled", 30s)) << berthd.Job(replica).dump(2);
  const std::string ended = berthd.Job(replica).dump();
  EXPECT_NE(ended.find("session idle for"), std::string::npos) << ended;
  auto audit = berthd.http().Get("/v1/audit?tenant=red");
  json end;
  for (const auto& r : audit.body.value("records", json::array())) {
    if (r.value("action", "") == "session.end") end = r;
  }
  ASSERT_TRUE(end.is_object()) << audit.text;
  EXPECT_EQ(end.at("after").at("cause"), "idle") << end.dump();
  EXPECT_EQ(end.at("after").at("started_by"), "rita") << end.dump();
  EXPECT_EQ(CliAs(rita, berthd, {"session", "list"}).out, "No sessions.\n");
  EXPECT_EQ(call(rita).status, 404);
}

// SLO burn alerts: a service whose replica answers every request 5xx
// (joined by its TCP readiness, its model never loads) spends its error
// budget far faster than its 99% availability allows; the service_slo rule
// raises one alert naming the service, the burn and the figures behind it.
TEST_F(ServiceGatewayTest, AServiceBurningItsErrorBudgetRaisesAnSloAlert) {
  Berthd* started = StartGatewayBerthd();
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const auto rules = berthd.http().Post(
      "/v1/alert-rules",
      "rules: [{name: slo-page, kind: service_slo, severity: critical, threshold: 2, window: 1m}]",
      "application/yaml");
  ASSERT_EQ(rules.status, 201) << rules.text;
  const auto server = TenantModelServer(dir_ / "llm");
  const std::string spec = fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --never-ready]
port: 8000
replicas: {{min: 1, max: 1}}
slo: {{availability: 99%}}
)",
                                       server.string());
  ASSERT_EQ(berthd.http().Post("/v1/services", spec, "application/yaml").status, 201);
  json service;
  ASSERT_TRUE(WaitRouted(berthd, service, 30s)) << service.dump() << berthd.log();
  const std::string rita = MemberToken(berthd.http(), "rita", "red", "member");
  Http gateway(berthd.gateway_port(), 30s);
  gateway.set_token(rita);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(gateway
                  .Post("/s/red/llm/v1/completions", R"({"prompt":"hi","max_tokens":1})",
                        "application/json")
                  .status,
              503)
        << "request " << i;
  }
  json alert;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = berthd.http().Get("/v1/alerts?kind=service_slo");
        for (const auto& a : r.body.value("alerts", json::array())) {
          if (a.value("subject", "") == "red/llm") alert = a;
        }
        return alert.is_object();
      },
      20s))
      << berthd.http().Get("/v1/alerts?all=true").text << berthd.log();
  EXPECT_EQ(alert.value("rule", ""), "slo-page") << alert.dump();
  EXPECT_EQ(alert.value("severity", ""), "critical") << alert.dump();
  // The rule may fire while the requests are still arriving: it needs
  // kSloAlertMinRequests (10) of them, and every one counted was a 5xx.
  const std::string message = alert.value("message", "");
  std::smatch counted;
  ASSERT_TRUE(std::regex_search(
      message, counted,
      std::regex(R"(^service red/llm burns its error budget 100\.0x \(threshold 2\.0x\) over the )"
                 R"(last 1m: (\d+) of (\d+) requests answered 5xx against availability 99%$)")))
      << message;
  EXPECT_EQ(counted[1].str(), counted[2].str()) << message;
  EXPECT_GE(std::stoi(counted[1].str()), 10) << message;
  EXPECT_LE(std::stoi(counted[1].str()), 20) << message;

  // The requests outlive berthd: a stop writes the hour's counts, and after
  // a restart the operations report's inference section shows them.
  berthd.Stop();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  auto report = berthd.http().Get("/v1/reports/ops");
  ASSERT_EQ(report.status, 200) << report.text;
  json requests;
  for (const auto& s : report.body.at("inference").value("services", json::array())) {
    if (s.value("tenant", "") == "red" && s.value("service", "") == "llm") {
      requests = s.at("requests");
    }
  }
  ASSERT_TRUE(requests.is_object()) << report.text;
  EXPECT_GE(requests.value("requests", 0), 10) << requests.dump();
  EXPECT_LE(requests.value("requests", 0), 20) << requests.dump();
  EXPECT_EQ(requests.value("responses_5xx", 0), requests.value("requests", -1)) << requests.dump();
  EXPECT_GT(requests.value("slo_windows", 0), 0) << requests.dump();
  // The gateway's own 503s take a millisecond or less: the order holds.
  EXPECT_LE(requests.value("p50_ms", -1.0), requests.value("p99_ms", -2.0)) << requests.dump();
  EXPECT_LE(requests.value("p99_ms", -1.0), requests.value("max_ms", -2)) << requests.dump();
  auto shown = Cli(berthd, {"report", "ops"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("Inference requests (through the gateway, to the hour)"),
            std::string::npos)
      << shown.out;
  // Another tenant's member sees none of it.
  const std::string bo = MemberToken(berthd.http(), "bo", "blue", "member");
  Http as_blue(berthd.api_port(), 30s);
  as_blue.set_token(bo);
  auto theirs = as_blue.Get("/v1/reports/ops");
  ASSERT_EQ(theirs.status, 200) << theirs.text;
  EXPECT_EQ(theirs.text.find("\"llm\""), std::string::npos) << theirs.text;
}

// The metric signal: berthd reads vllm:num_requests_running from each
// ready replica's /metrics (berth-model-server exposes it as vLLM does),
// and three slow requests in flight at a target of 1 per replica ask for
// three replicas; the autoscaler's reason names the metric's figure.
TEST_F(ServiceGatewayTest, TheMetricSignalScalesOnWhatTheReplicasReport) {
  Berthd* started = StartGatewayBerthd();
  ASSERT_NE(started, nullptr);
  Berthd& berthd = *started;
  const auto server = TenantModelServer(dir_ / "llm");
  const std::string spec = fmt::format(R"(name: llm
tenant: red
queue: serve
command: ["{}", --load-ms, "0", --ttft-ms, "6000"]
port: 8000
replicas: {{min: 1, max: 3}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
autoscaling:
  signal: metric
  metric: "vllm:num_requests_running"
  target: 1
  target_utilization: 100
  stable_window: 2s
  panic_window: 1s
  panic_threshold: 0
)",
                                       server.string());
  json service = ApplyUntilReconciled(berthd, spec);
  ASSERT_TRUE(service.is_object());
  ASSERT_TRUE(WaitRouted(berthd, service, 30s)) << service.dump();
  const std::string rita = MemberToken(berthd.http(), "rita", "red", "member");
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&] {
      Http gateway(berthd.gateway_port(), 60s);
      gateway.set_token(rita);
      if (gateway
              .Post("/s/red/llm/v1/completions", R"({"prompt":"slow","max_tokens":1})",
                    "application/json")
              .status == 200) {
        ++ok;
      }
    });
  }
  json decision;
  const bool scaled = WaitFor(
      [&] {
        service = Service(berthd);
        if (!service.is_object() || !service.at("status").at("autoscale").is_object()) {
          return false;
        }
        decision = service.at("status").at("autoscale");
        return decision.value("desired", 0) == 3;
      },
      20s);
  for (auto& c : clients) c.join();
  ASSERT_TRUE(scaled) << decision.dump() << service.dump();
  EXPECT_EQ(decision.value("signal", ""), "metric") << decision.dump();
  // The window's average of what the replicas reported: above one request
  // per replica, at most the three in flight.
  const double observed = std::stod(decision.value("observed", "0"));
  EXPECT_GT(observed, 1.0) << decision.dump();
  EXPECT_LE(observed, 3.0) << decision.dump();
  EXPECT_EQ(ok.load(), 3);
  // No scrape failed.
  EXPECT_TRUE(service.at("status").at("waiting").is_null() ||
              service.at("status").at("waiting").get<std::string>().find("metric") ==
                  std::string::npos)
      << service.dump();
}

}  // namespace
}  // namespace berth::it
