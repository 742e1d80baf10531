// `berth svc show` and `berth svc list`: the gateway's view of a service
// (endpoint, the autoscaler's reason, traffic and latency, routing, cold
// starts) from the status berthd sends, and the same views from a berthd
// that runs no gateway (the fields null or absent), which must still render.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

constexpr std::int64_t kColdStartAt = 1'796'400'000'000;

// A service behind the gateway, as GET /v1/services/ml/coder answers.
json ServiceWithGateway() {
  return json::parse(R"({
    "tenant": "ml", "name": "coder", "queue": "serving", "revision": 3,
    "created_ms": 1796300000000, "created_by": "ana",
    "updated_ms": 1796300000000, "updated_by": "ana",
    "spec": {"image": "vllm:0.6", "replicas": {"min": 0, "max": 4}, "access": "tenant",
             "model": {"name": "coder-7b", "version": "2"}},
    "status": {
      "revision": 3, "desired": 2, "ready": 2, "not_ready": 0, "running": 2, "starting": 0,
      "stopping": 0, "phase": "steady", "backoff_until_ms": null, "recent_crashes": 0,
      "refused": null, "waiting": null, "reconciled_ms": 1796400005000,
      "endpoint": "http://127.0.0.1:8480/s/ml/coder/",
      "autoscale": {"code": "stable", "signal": "concurrency", "observed": "1.4",
                    "target": "0.7", "desired": 2,
                    "reason": "stable: the 1m average concurrency 1.4 at a target of 0.7 per replica asks for 2 replicas"},
      "routed": 2, "draining": 1,
      "traffic": {"in_flight": 3, "queued": 1, "held": 0, "requests_total": 1520,
                  "held_total": 1, "held_expired_total": 0, "responses_2xx": 1510,
                  "responses_5xx": 4,
                  "window": {"requests": 120, "responses_5xx": 0, "held": 0,
                             "p50_ms": 12.3, "p95_ms": 40, "p99_ms": 1234.5}},
      "cold_start_since_ms": null,
      "last_cold_start": {"job": 17, "duration_ms": 1234, "at_ms": 1796400000000},
      "replicas": [{"job": 17, "revision": 3, "state": "Running", "ready": true,
                    "stopping": false, "node": "gpu-1"}]}
  })");
}

TEST(RenderService, ShowsTheEndpointAutoscaleReasonTrafficRoutingAndLastColdStart) {
  const std::string out = RenderService(ServiceWithGateway());
  EXPECT_NE(out.find("Endpoint:  http://127.0.0.1:8480/s/ml/coder/\n"
                     "Access:    members of ml, with a Berth token\n"),
            std::string::npos)
      << out;
  json open = ServiceWithGateway();
  open["spec"]["access"] = "public";
  EXPECT_NE(RenderService(open).find("Access:    public: anyone who reaches the gateway\n"),
            std::string::npos);
  EXPECT_NE(out.find("Autoscale: desired 2; stable: the 1m average concurrency 1.4 at a target "
                     "of 0.7 per replica asks for 2 replicas\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Traffic:   3 in flight, 1 queued, 0 held; 1520 requests, 4 5xx; last "
                     "window 120 requests: p50 12ms, p95 40ms, p99 1.2s\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Routing:   2 replicas routed, 1 draining; cold start 1.2s at " +
                     FormatTimeMs(kColdStartAt) + ", replica job 17\n"),
            std::string::npos)
      << out;
  // The existing lines keep their place and form.
  EXPECT_NE(out.find("Status:    desired 2, ready 2, not ready 0, starting 0, stopping 0 "
                     "(steady)\nEndpoint:"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Replicas (jobs of the service):"), std::string::npos) << out;
}

TEST(RenderService, AScaleFromZeroUnderWayAndAnIdleWindowSaySo) {
  json s = ServiceWithGateway();
  s["status"]["cold_start_since_ms"] = kColdStartAt;
  s["status"]["routed"] = 0;
  s["status"]["draining"] = 0;
  s["status"]["traffic"]["held"] = 2;
  s["status"]["traffic"]["window"] = json{{"requests", 0}, {"responses_5xx", 0}, {"held", 0},
                                          {"p50_ms", 0},   {"p95_ms", 0},        {"p99_ms", 0}};
  const std::string out = RenderService(s);
  EXPECT_NE(out.find("Routing:   0 replicas routed, 0 draining; cold start under way since " +
                     FormatTimeMs(kColdStartAt) + "\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2 held; 1520 requests, 4 5xx; no request in the last window\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("replica job 17\n"), std::string::npos) << out;
}

TEST(RenderService, ABerthdWithoutGatewaySaysNoGatewayAndShowsNoTraffic) {
  // Fields null, as a berthd without gateway sends them.
  json s = ServiceWithGateway();
  for (const char* k :
       {"endpoint", "autoscale", "traffic", "cold_start_since_ms", "last_cold_start"}) {
    s["status"][k] = nullptr;
  }
  s["status"]["routed"] = 0;
  s["status"]["draining"] = 0;
  std::string out = RenderService(s);
  EXPECT_NE(out.find("Endpoint:  no gateway\n"), std::string::npos) << out;
  for (const char* absent : {"Autoscale:", "Traffic:", "Routing:", "cold start"}) {
    EXPECT_EQ(out.find(absent), std::string::npos) << absent << "\n" << out;
  }

  // Fields absent, as an older berthd (or a service not reconciled yet) sends it.
  json old = ServiceWithGateway();
  for (const char* k : {"endpoint", "autoscale", "traffic", "routed", "draining",
                        "cold_start_since_ms", "last_cold_start"}) {
    old["status"].erase(k);
  }
  out = RenderService(old);
  EXPECT_NE(out.find("Endpoint:  no gateway\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("Traffic:"), std::string::npos) << out;
  EXPECT_NE(out.find("Status:    desired 2, ready 2"), std::string::npos) << out;

  // A status that is null altogether renders too.
  old["status"] = nullptr;
  EXPECT_NE(RenderService(old).find("Endpoint:  no gateway\n"), std::string::npos);
}

TEST(RenderServices, ListsTheLastWindowsP95OrADash) {
  json idle = ServiceWithGateway();
  idle["name"] = "idle";
  idle["status"]["traffic"]["window"]["requests"] = 0;
  json bare = ServiceWithGateway();
  bare["name"] = "bare";
  bare["status"].erase("traffic");
  const std::string out =
      RenderServices(json{{"services", json::array({ServiceWithGateway(), idle, bare})}});
  const auto header = out.find(" READY   P95 ");
  ASSERT_NE(header, std::string::npos) << out;
  const auto row = [&](const std::string& name) {
    const auto at = out.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name << "\n" << out;
    return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(row("coder").find(" 40ms "), std::string::npos) << out;
  EXPECT_EQ(row("idle").find("ms "), std::string::npos) << out;
  EXPECT_EQ(row("bare").find("ms "), std::string::npos) << out;
}

// `berth svc rollout status`, through a rollout: under way with the old
// revision still serving, paused with the reason and the way out, complete.
json RolloutService(const std::string& phase) {
  return json{
      {"tenant", "ml"},
      {"name", "coder"},
      {"revision", 4},
      {"revisions", json::array({{{"revision", 4},
                                  {"change", "apply"},
                                  {"created_by", "ana"},
                                  {"created_ms", kColdStartAt},
                                  {"restores", nullptr}}})},
      {"spec", {{"rollout", {{"max_surge", 1}, {"max_unavailable", 0}}}}},
      {"status",
       {{"phase", phase}, {"desired", 2}, {"waiting", nullptr}, {"replicas", json::array()}}}};
}

json RolloutReplica(int job, int revision, bool current, bool ready, bool stopping) {
  return json{{"job", job},     {"revision", revision}, {"current", current},
              {"ready", ready}, {"stopping", stopping}, {"state", "Running"}};
}

TEST(RenderRolloutStatus, SaysWhatEachRevisionServesAndWhetherItIsDonePausedOrUnderWay) {
  json going = RolloutService("rolling_out");
  going["status"]["replicas"] = json::array(
      {RolloutReplica(20, 4, true, true, false), RolloutReplica(21, 4, true, false, false),
       RolloutReplica(12, 3, false, true, false), RolloutReplica(11, 3, false, true, true)});
  std::string out = RenderRolloutStatus(going);
  EXPECT_NE(out.find("service ml/coder: revision 4 (apply by ana at " + FormatTimeMs(kColdStartAt) +
                     ")\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("- revision 4: 1 of 2 replicas ready, 1 starting\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("- revision 3: 1 replica still serving\n"), std::string::npos) << out;
  EXPECT_NE(out.find("- 1 replica of older revisions stopping (drained first)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("at most 1 above and 0 below the desired count\n"), std::string::npos);
  EXPECT_NE(out.find("\nrolling out\n"), std::string::npos) << out;

  json paused = RolloutService("rollout_paused");
  paused["status"]["waiting"] = "replica job 21 of revision 4 not ready for 10m: GET /health: 503";
  paused["status"]["replicas"] = json::array({RolloutReplica(21, 4, true, false, false),
                                              RolloutReplica(12, 3, false, true, false),
                                              RolloutReplica(13, 3, false, true, false)});
  out = RenderRolloutStatus(paused);
  EXPECT_NE(out.find("- revision 3: 2 replicas still serving\n"), std::string::npos) << out;
  EXPECT_NE(out.find("- waiting: replica job 21 of revision 4 not ready for 10m"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("paused: revision 4 never became ready; the older revision keeps serving. "
                     "Apply a fixed spec, or roll back: berth svc rollback ml/coder\n"),
            std::string::npos)
      << out;

  json done = RolloutService("steady");
  done["status"]["replicas"] = json::array(
      {RolloutReplica(20, 4, true, true, false), RolloutReplica(21, 4, true, true, false)});
  out = RenderRolloutStatus(done);
  EXPECT_NE(out.find("- revision 4: 2 of 2 replicas ready\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\ncomplete: every replica runs revision 4\n"), std::string::npos) << out;
  // A replica of an older spec left (not ready, not stopping): not complete.
  done["status"]["replicas"].push_back(RolloutReplica(12, 3, false, true, false));
  EXPECT_NE(RenderRolloutStatus(done).find("\nnot complete (steady)\n"), std::string::npos);
}

TEST(RenderRolloutStatus, SaysTheCanaryStepsAndWhichOneWaitsToBeResumed) {
  json canary = RolloutService("canary");
  canary["spec"]["rollout"]["canary"] =
      json::array({{{"weight", 25}, {"pause", 0}}, {{"weight", 100}, {"pause", 60'000}}});
  canary["status"]["canary"] = {{"step", 1}, {"steps", 2}, {"awaiting_resume", false}};
  canary["status"]["replicas"] = json::array({RolloutReplica(20, 4, true, false, false),
                                              RolloutReplica(12, 3, false, true, false),
                                              RolloutReplica(13, 3, false, true, false)});
  std::string out = RenderRolloutStatus(canary);
  EXPECT_NE(out.find("- canary steps: 25% until resumed, 100% for 1m; then one step at a time: "
                     "at most 1 above and 0 below the desired count\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\ncanary step 1 under way\n"), std::string::npos) << out;
  canary["status"]["canary"]["awaiting_resume"] = true;
  out = RenderRolloutStatus(canary);
  EXPECT_NE(out.find("\ncanary step 1 waits: berth svc rollout resume ml/coder goes on\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace berth::cli
