// The service spec: every error names its field, defaults are applied and
// documented values hold, quantities are bounded where they are read, and
// the canonical YAML and JSON forms read back to the same spec.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/json.h"
#include "model/policy.h"
#include "model/service.h"

namespace berth::model {
namespace {

constexpr const char* kServiceExample = R"(
name: coder
tenant: ml
queue: serving/online
image: docker.io/vllm/vllm-openai:v0.6.3
command: [vllm, serve, Qwen/Qwen2.5-Coder-7B]
port: 8000
model: {name: Qwen/Qwen2.5-Coder-7B, version: v3}
replicas: {min: 1, max: 8}
resources: {gpus: 0.5, gpu_memory: 20Gi, cpu: 4, memory: 32Gi}
readiness: {http: /health, period: 5s, timeout: 1s, success_threshold: 1, failure_threshold: 3}
liveness: {tcp: 8000, period: 10s, failure_threshold: 5}
slo: {latency_p95_ms: 800, availability: 99.95%}
autoscaling:
  signal: metric
  metric: "vllm:num_requests_waiting"
  target: 2.5
  target_utilization: 80%
  stable_window: 30s
  panic_window: 4s
  panic_threshold: 150%
  up_stabilization: 0s
  down_stabilization: 5m
rollout:
  max_surge: 2
  max_unavailable: 0
  canary: [{weight: 10, pause: 5m}, {weight: 50, pause: 10m}, {weight: 100}]
)";

TEST(ServiceSpec, ParsesTheDocumentedExample) {
  auto s = ParseServiceSpec(kServiceExample);
  ASSERT_TRUE(s.has_value()) << s.error().field << ": " << s.error().message;
  EXPECT_EQ(s->queue, "serving/online");
  EXPECT_EQ(s->resources.gpus, 0U);
  EXPECT_EQ(s->resources.gpu_share_millis, 500U);
  EXPECT_EQ(s->resources.gpu_memory_bytes, 20ULL << 30);
  EXPECT_EQ(s->resources.cpu_millis, 4000U);
  EXPECT_EQ(s->readiness.kind, ProbeKind::kHttp);
  EXPECT_EQ(s->readiness.http_path, "/health");
  EXPECT_EQ(s->readiness.period_ms, 5000);
  EXPECT_EQ(s->liveness.kind, ProbeKind::kTcp);
  EXPECT_EQ(s->liveness.tcp_port, 8000U);
  EXPECT_EQ(s->liveness.failure_threshold, 5U);
  EXPECT_EQ(s->slo.latency_p95_ms, 800);
  EXPECT_EQ(s->slo.availability_ppm, 999'500U);
  EXPECT_EQ(s->autoscaling.signal, AutoscaleSignal::kMetric);
  EXPECT_EQ(s->autoscaling.metric, "vllm:num_requests_waiting");
  EXPECT_EQ(s->autoscaling.target_milli, 2500);
  EXPECT_EQ(s->autoscaling.target_utilization_pct, 80U);
  EXPECT_EQ(s->autoscaling.stable_window_ms, 30'000);
  EXPECT_EQ(s->autoscaling.panic_window_ms, 4'000);
  EXPECT_EQ(s->autoscaling.panic_threshold_pct, 150U);
  EXPECT_EQ(s->autoscaling.down_stabilization_ms, 300'000);
  ASSERT_EQ(s->rollout.canary.size(), 3U);
  EXPECT_EQ(s->rollout.canary[1].weight_pct, 50U);
  EXPECT_EQ(s->rollout.canary[1].pause_ms, 600'000);
  EXPECT_EQ(s->rollout.canary[2].pause_ms, 0);
}

TEST(ServiceSpec, DefaultsAreTheDocumentedOnes) {
  auto s = ParseServiceSpec("name: echo\ncommand: [echo-server]\n");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->tenant, "default");
  EXPECT_EQ(s->queue, "default");
  EXPECT_EQ(s->port, 8000U);
  // Only the tenant's members call it through the gateway, unless it says public.
  EXPECT_EQ(s->access, ServiceAccess::kTenant);
  EXPECT_EQ(s->replicas.min, 1U);
  EXPECT_EQ(s->replicas.max, 1U);
  // Readiness defaults to a TCP connect on the service's port; no liveness.
  EXPECT_EQ(s->readiness.kind, ProbeKind::kTcp);
  EXPECT_EQ(s->readiness.tcp_port, 8000U);
  EXPECT_EQ(s->readiness.period_ms, 10'000);
  EXPECT_EQ(s->readiness.timeout_ms, 1'000);
  EXPECT_EQ(s->readiness.failure_threshold, 3U);
  EXPECT_EQ(s->liveness.kind, ProbeKind::kNone);
  EXPECT_EQ(s->slo.latency_p95_ms, 0);
  EXPECT_EQ(s->slo.availability_ppm, 999'000U);
  const Autoscaling& a = s->autoscaling;
  EXPECT_EQ(a.signal, AutoscaleSignal::kConcurrency);
  EXPECT_EQ(a.target_milli, 100'000);  // Knative's concurrency target
  EXPECT_EQ(a.target_utilization_pct, 70U);
  EXPECT_EQ(a.stable_window_ms, 20'000);
  EXPECT_EQ(a.panic_window_ms, 10'000);
  EXPECT_EQ(a.panic_threshold_pct, 400U);
  EXPECT_EQ(a.up_stabilization_ms, 0);
  EXPECT_EQ(a.down_stabilization_ms, 600'000);
  EXPECT_FALSE(a.scale_to_zero.enabled);
  EXPECT_EQ(a.scale_to_zero.idle_window_ms, 600'000);
  EXPECT_EQ(s->rollout.max_surge, 1U);
  EXPECT_EQ(s->rollout.max_unavailable, 0U);
  // The port moves the default readiness probe with it; max follows min.
  auto p = ParseServiceSpec("name: e\nimage: x\nport: 9000\nreplicas: {min: 3}\n");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ(p->readiness.tcp_port, 9000U);
  EXPECT_EQ(p->replicas.max, 3U);
}

TEST(ServiceSpec, AShortStableWindowTakesTheDefaultPanicWindowWithIt) {
  auto s = ParseServiceSpec("name: a\nimage: x\nautoscaling: {stable_window: 4s}\n");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->autoscaling.panic_window_ms, 4'000);
}

TEST(ServiceSpec, TargetDefaultsFollowTheSignal) {
  auto rps = ParseServiceSpec("name: a\nimage: x\nautoscaling: {signal: rps}\n");
  ASSERT_TRUE(rps.has_value());
  EXPECT_EQ(rps->autoscaling.target_milli, 200'000);  // Knative's rps target
  auto lat = ParseServiceSpec(
      "name: a\nimage: x\nslo: {latency_p95_ms: 400}\nautoscaling: {signal: p95_latency}\n");
  ASSERT_TRUE(lat.has_value()) << lat.error().message;
  EXPECT_EQ(lat->autoscaling.target_milli, 400'000);  // the SLO's latency, in ms
}

struct Bad {
  std::string doc;
  std::string field;  // the path the error must name
  std::string says;   // and a piece of its message
};

TEST(ServiceSpec, EveryErrorNamesItsField) {
  const std::string base = "name: a\nimage: x\n";
  const std::vector<Bad> table{
      {"image: x\n", "name", "required"},
      {"name: A_b\nimage: x\n", "name", "not a valid name"},
      {"name: a\n", "command", "image, a command"},
      {base + "colour: red\n", "colour", "unknown field"},
      {base + "tenant: Bad!\n", "tenant", "not a valid tenant"},
      {base + "queue: serving//x\n", "queue", "nested queue"},
      {base + "port: 70000\n", "port", "1 to 65535"},
      {base + "access: everyone\n", "access", "use tenant"},
      {base + "access: [tenant]\n", "access", ""},
      {base + "args: [x]\n", "args", "needs a command"},
      {base + "model: {version: v1}\n", "model.name", "required"},
      {base + "model: {name: 'a b'}\n", "model.name", "letters"},
      {base + "replicas: {min: 5, max: 2}\n", "replicas.min", "min <= max"},
      {base + "replicas: {max: 2000}\n", "replicas.max", "1 to 1024"},
      {base + "replicas: {min: 0, max: 3}\n", "replicas.min", "scale_to_zero"},
      {base + "replicas: {min: 1, max: 3, extra: 1}\n", "replicas.extra", "unknown field"},
      {base + "resources: {gpus: 1.5}\n", "resources.gpus", "mixes whole GPUs"},
      {base + "resources: {gpus: 65}\n", "resources.gpus", "0 to 64"},
      {base + "resources: {gpus: 0.0001}\n", "resources.gpus", "not a GPU count"},
      {base + "resources: {gpu_memory: 2048Ti, gpus: 1}\n", "resources.gpu_memory", "at most"},
      {base + "resources: {gpu_memory: 20Gi}\n", "resources.gpu_memory", "needs a GPU"},
      {base + "resources: {cpu: 5000}\n", "resources.cpu", "at most 4096"},
      {base + "readiness: {period: 5s}\n", "readiness", "exactly one of"},
      {base + "readiness: {http: health}\n", "readiness.http", "starting with '/'"},
      {base + "readiness: {tcp: 0}\n", "readiness.tcp", "1 to 65535"},
      {base + "liveness: {command: []}\n", "liveness.command", "name a program"},
      {base + "liveness: {tcp: 80, period: 2h}\n", "liveness.period", "out of range"},
      {base + "liveness: {tcp: 80, period: 2s, timeout: 5s}\n", "liveness.timeout",
       "longer than the period"},
      {base + "liveness: {tcp: 80, failure_threshold: 0}\n", "liveness.failure_threshold",
       "1 to 100"},
      {base + "slo: {latency_p95_ms: 0}\n", "slo.latency_p95_ms", "1 to 600000"},
      {base + "slo: {availability: 100.5%}\n", "slo.availability", "at most 100%"},
      {base + "slo: {availability: high}\n", "slo.availability", "not an availability"},
      {base + "autoscaling: {signal: gpu}\n", "autoscaling.signal", "concurrency, rps"},
      {base + "autoscaling: {signal: metric, target: 2}\n", "autoscaling.metric", "required"},
      {base + "autoscaling: {metric: x}\n", "autoscaling.metric", "only to signal: metric"},
      {base + "autoscaling: {signal: metric, metric: '9x', target: 1}\n", "autoscaling.metric",
       "Prometheus"},
      {base + "autoscaling: {signal: queue_depth}\n", "autoscaling.target", "required"},
      {base + "autoscaling: {signal: p95_latency}\n", "autoscaling.target", "slo.latency_p95_ms"},
      {base + "autoscaling: {target: 0}\n", "autoscaling.target", "above 0"},
      {base + "autoscaling: {target: -3}\n", "autoscaling.target", "not a target"},
      {base + "autoscaling: {target_utilization: 150%}\n", "autoscaling.target_utilization",
       "1 to 100"},
      {base + "autoscaling: {stable_window: 0}\n", "autoscaling.stable_window", "out of range"},
      {base + "autoscaling: {panic_window: 0s}\n", "autoscaling.panic_window", "out of range"},
      {base + "autoscaling: {panic_window: 30s}\n", "autoscaling.panic_window",
       "longer than the stable window"},
      {base + "autoscaling: {panic_threshold: 105%}\n", "autoscaling.panic_threshold", "110%"},
      {base + "autoscaling: {down_stabilization: 2h}\n", "autoscaling.down_stabilization",
       "out of range"},
      {base + "autoscaling: {up_stabilization: soon}\n", "autoscaling.up_stabilization",
       "not a duration"},
      {base + "autoscaling: {scale_to_zero: {enabled: true}}\n",
       "autoscaling.scale_to_zero.enabled", "replicas.min: 0"},
      {base + "replicas: {min: 0, max: 2}\nautoscaling: {scale_to_zero: {enabled: true, "
              "idle_window: 0}}\n",
       "autoscaling.scale_to_zero.idle_window", "out of range"},
      {base + "autoscaling: {scale_to_zero: {enabled: yes}}\n", "autoscaling.scale_to_zero.enabled",
       "true or false"},
      {base + "rollout: {max_surge: 0, max_unavailable: 0}\n", "rollout.max_surge", "both 0"},
      {base + "replicas: {min: 1, max: 2}\nrollout: {max_unavailable: 3}\n",
       "rollout.max_unavailable", "more than replicas.max"},
      {base + "rollout: {canary: [{weight: 50}, {weight: 20}]}\n", "rollout.canary[1].weight",
       "does not increase"},
      {base + "rollout: {canary: [{weight: 120}]}\n", "rollout.canary[0].weight", "1 to 100"},
      {base + "rollout: {canary: [{pause: 5m}]}\n", "rollout.canary[0].weight", "required"},
      {base + "rollout: {canary: []}\n", "rollout.canary", "1 to 20 steps"},
      {base + "name: b\n", "name", "given twice"},
  };
  for (const Bad& b : table) {
    auto s = ParseServiceSpec(b.doc);
    ASSERT_FALSE(s.has_value()) << b.doc;
    EXPECT_EQ(s.error().code, Code::kInvalidArgument) << b.doc;
    EXPECT_EQ(s.error().field, b.field) << b.doc << "\n" << s.error().message;
    EXPECT_NE(s.error().message.find(b.says), std::string::npos)
        << b.doc << "\nmessage: " << s.error().message << "\nexpected: " << b.says;
  }
}

TEST(ServiceSpec, ScaleToZeroNeedsMinZeroAndTheReverse) {
  auto ok = ParseServiceSpec(
      "name: a\nimage: x\nreplicas: {min: 0, max: 4}\n"
      "autoscaling: {scale_to_zero: {enabled: true, idle_window: 45s}}\n");
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_TRUE(ok->autoscaling.scale_to_zero.enabled);
  EXPECT_EQ(ok->autoscaling.scale_to_zero.idle_window_ms, 45'000);
}

TEST(ServiceSpec, BoundsAreInclusive) {
  auto s = ParseServiceSpec(
      "name: a\nimage: x\nreplicas: {min: 1024, max: 1024}\nresources: {gpus: 64, gpu_memory: "
      "1024Ti}\nslo: {latency_p95_ms: 600000, availability: 100%}\n"
      "autoscaling: {target: 1000000000, panic_threshold: 1000%, stable_window: 1h, "
      "panic_window: 1h, down_stabilization: 1h}\n");
  ASSERT_TRUE(s.has_value()) << s.error().field << ": " << s.error().message;
  EXPECT_EQ(s->resources.gpus, 64U);
  EXPECT_EQ(s->autoscaling.target_milli, kMaxTargetMilli);
  EXPECT_EQ(s->slo.availability_ppm, 1'000'000U);
  auto off = ParseServiceSpec("name: a\nimage: x\nautoscaling: {panic_threshold: 0}\n");
  ASSERT_TRUE(off.has_value()) << off.error().message;
  EXPECT_EQ(off->autoscaling.panic_threshold_pct, 0U);  // no panic mode
}

TEST(ServiceSpec, CanonicalYamlAndJsonReadBackToTheSameSpec) {
  for (const std::string& doc :
       {std::string(kServiceExample), std::string("name: echo\ncommand: [echo-server]\n"),
        std::string("name: z\nimage: x\nreplicas: {min: 0, max: 3}\nresources: {gpus: 2, cpu: "
                    "0.25}\nreadiness: {command: [curl, -f, localhost]}\n"
                    "autoscaling: {signal: rps, target: 12.125, panic_threshold: 0, "
                    "scale_to_zero: {enabled: true, idle_window: 90s}}\naccess: public\n")}) {
    auto s = ParseServiceSpec(doc);
    ASSERT_TRUE(s.has_value()) << s.error().field << ": " << s.error().message;
    const std::string yaml = ServiceToYaml(*s);
    auto again = ParseServiceSpec(yaml);
    ASSERT_TRUE(again.has_value()) << yaml << "\n"
                                   << again.error().field << ": " << again.error().message;
    EXPECT_EQ(*again, *s) << yaml;
    EXPECT_EQ(ServiceToYaml(*again), yaml);  // canonical: printing is stable
    auto from_json = ServiceSpecFromJson(ToJson(*s));
    ASSERT_TRUE(from_json.has_value()) << from_json.error().message;
    EXPECT_EQ(*from_json, *s);
  }
}

TEST(ServiceSpec, CanonicalFormShowsEveryDefault) {
  auto s = ParseServiceSpec("name: echo\ncommand: [echo-server]\n");
  ASSERT_TRUE(s.has_value());
  const std::string yaml = ServiceToYaml(*s);
  for (const char* piece :
       {"target: 100", "target_utilization: 70%", "stable_window: 20s", "panic_window: 10s",
        "panic_threshold: 400%", "down_stabilization: 10m", "availability: 99.9%", "tcp: 8000",
        "idle_window: 10m", "access: tenant"}) {
    EXPECT_NE(yaml.find(piece), std::string::npos) << piece << "\n" << yaml;
  }
}

TEST(ServiceSpec, ASessionRunsOneReplicaWithItsLimits) {
  auto s = ParseServiceSpec(
      "kind: session\nname: nb\nqueue: notebooks\nimage: jupyter\nport: 8888\n"
      "resources: {gpus: 1}\nsession: {max_lifetime: 8h, idle_window: 30m, "
      "idle_gpu_utilization: 10}\n");
  ASSERT_TRUE(s.has_value()) << s.error().field << ": " << s.error().message;
  EXPECT_EQ(s->kind, ServiceKind::kSession);
  EXPECT_EQ(s->replicas, (ReplicaBounds{1, 1}));
  EXPECT_EQ(s->session.max_lifetime_ms, 8 * 3'600'000);
  EXPECT_EQ(s->session.idle_window_ms, 30 * 60'000);
  EXPECT_EQ(s->session.idle_gpu_util_pct, 10U);
  // Replaced in place: never two GPUs' worth for one notebook.
  EXPECT_EQ(s->rollout.max_surge, 0U);
  EXPECT_EQ(s->rollout.max_unavailable, 1U);
  const std::string yaml = ServiceToYaml(*s);
  EXPECT_NE(yaml.find("kind: session"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("autoscaling"), std::string::npos) << yaml;
  auto again = ParseServiceSpec(yaml);
  ASSERT_TRUE(again.has_value()) << yaml << again.error().field << ": " << again.error().message;
  EXPECT_EQ(*again, *s);
  auto from_json = ServiceSpecFromJson(ToJson(*s));
  ASSERT_TRUE(from_json.has_value()) << from_json.error().message;
  EXPECT_EQ(*from_json, *s);

  auto defaults = ParseServiceSpec("kind: session\nname: nb\ncommand: [lab]\n");
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ(defaults->session, SessionLimits{});
  auto never = ParseServiceSpec(
      "kind: session\nname: nb\ncommand: [lab]\nsession: "
      "{idle_window: 0}\n");
  ASSERT_TRUE(never.has_value()) << never.error().message;
  EXPECT_EQ(never->session.idle_window_ms, 0);
  // A plain service has no kind line: specs stored before sessions print
  // as they did.
  EXPECT_EQ(ServiceToYaml(*ParseServiceSpec("name: a\nimage: x\n")).find("kind:"),
            std::string::npos);
}

TEST(ServiceSpec, WhatASessionCannotHaveIsRefusedNamingTheField) {
  const std::string head = "kind: session\nname: nb\nimage: jupyter\n";
  for (const auto& [extra, field] : std::vector<std::pair<std::string, std::string>>{
           {"replicas: {min: 1, max: 2}\n", "replicas"},
           {"autoscaling: {signal: rps}\n", "autoscaling"},
           {"rollout: {max_surge: 1}\n", "rollout"},
           {"slo: {latency_p95_ms: 100}\n", "slo"},
           {"access: public\n", "access"},
           {"session: {max_lifetime: 31d}\n", "session.max_lifetime"},
           {"session: {max_lifetime: soon}\n", "session.max_lifetime"},
           {"session: {idle_window: 500ms}\n", "session.idle_window"},
           {"session: {max_lifetime: 1h, idle_window: 2h}\n", "session.idle_window"},
           {"session: {idle_gpu_utilization: 101}\n", "session.idle_gpu_utilization"},
           {"session: {lifetime: 1h}\n", "session.lifetime"}}) {
    auto s = ParseServiceSpec(head + extra);
    ASSERT_FALSE(s.has_value()) << extra;
    EXPECT_EQ(s.error().field, field) << extra << s.error().message;
  }
  auto kind = ParseServiceSpec("kind: notebook\nname: nb\nimage: x\n");
  ASSERT_FALSE(kind.has_value());
  EXPECT_EQ(kind.error().field, "kind");
  auto limits = ParseServiceSpec("name: nb\nimage: x\nsession: {max_lifetime: 1h}\n");
  ASSERT_FALSE(limits.has_value());
  EXPECT_EQ(limits.error().field, "session");
}

TEST(ServiceSpec, TheGatewayHoldsARequestForAsLongAsTheSpecSays) {
  auto s = ParseServiceSpec("name: a\nimage: x\ngateway: {hold_timeout: 5m}\n");
  ASSERT_TRUE(s.has_value()) << s.error().field << ": " << s.error().message;
  EXPECT_EQ(s->gateway.hold_timeout_ms, 300'000);
  EXPECT_NE(ServiceToYaml(*s).find("hold_timeout: 5m"), std::string::npos) << ServiceToYaml(*s);
  EXPECT_EQ(*ParseServiceSpec(ServiceToYaml(*s)), *s);
  EXPECT_EQ(ParseServiceSpec("name: a\nimage: x\n")->gateway.hold_timeout_ms, 60'000);
  EXPECT_EQ(
      ParseServiceSpec("name: a\nimage: x\ngateway: {hold_timeout: 0}\n")->gateway.hold_timeout_ms,
      0);
  for (const auto& [doc, field] : std::vector<std::pair<std::string, std::string>>{
           {"gateway: {hold_timeout: 2h}\n", "gateway.hold_timeout"},
           {"gateway: {hold_timeout: soon}\n", "gateway.hold_timeout"},
           {"gateway: {max_conn: 4}\n", "gateway.max_conn"},
           {"gateway: 5m\n", "gateway"}}) {
    auto bad = ParseServiceSpec("name: a\nimage: x\n" + doc);
    ASSERT_FALSE(bad.has_value()) << doc;
    EXPECT_EQ(bad.error().field, field) << doc << bad.error().message;
  }
}

TEST(ServiceSpec, FormatMilliIsExact) {
  EXPECT_EQ(FormatMilli(0), "0");
  EXPECT_EQ(FormatMilli(2500), "2.5");
  EXPECT_EQ(FormatMilli(12125), "12.125");
  EXPECT_EQ(FormatMilli(100'000), "100");
  EXPECT_EQ(FormatMilli(-1500), "-1.5");
}

// The README's tour applies these files: each stays valid, and the
// service is the scale-to-zero one the tour describes.
TEST(ServiceSpec, TheReadmesExamplesParse) {
  const char* root = std::getenv("BERTH_SOURCE_DIR");
  if (root == nullptr || *root == '\0') root = BERTH_SOURCE_DIR_DEFAULT;
  auto read = [&](const char* name) {
    std::ifstream in(std::filesystem::path(root) / "examples" / name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const std::string service_text = read("web-service.yaml");
  ASSERT_FALSE(service_text.empty());
  auto service = ParseServiceSpec(service_text);
  ASSERT_TRUE(service.has_value()) << service.error().field << ": " << service.error().message;
  EXPECT_EQ(service->queue, "serve");
  EXPECT_EQ(service->replicas.min, 0u);
  EXPECT_TRUE(service->autoscaling.scale_to_zero.enabled);
  auto policy = ParsePolicy(read("serve-policy.yaml"));
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  bool inference = false;
  bool notebooks = false;  // the tour's session queue
  for (const auto& q : policy->queues) {
    inference = inference || q.kind == "inference";
    notebooks = notebooks || (q.path == "default/notebooks" && q.kind == "interactive");
  }
  EXPECT_TRUE(inference);
  EXPECT_TRUE(notebooks);
}

}  // namespace
}  // namespace berth::model
