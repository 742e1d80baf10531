// berth-sim --services: the LLM trace reader, the rate multiplier, and a
// replay of the trace's first 20 minutes in which Berth's autoscaler uses
// fewer replica-hours than static provisioning for the peak while keeping
// SLO attainment above 90%, and the Knative-like and HPA-like baselines are
// the same Decide with other settings.
#include "sim/service_replay.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "model/service.h"

namespace berth::sim {
namespace {

std::filesystem::path TracesDir() {
  const char* env = std::getenv("BERTH_TRACES_DIR");
  return env != nullptr ? std::filesystem::path(env) : std::filesystem::path(BERTH_TRACES_DIR);
}

std::filesystem::path LlmTrace() {
  return TracesDir() / "azure-llm-2023" / "AzureLLMInferenceTrace_code.csv";
}

TEST(ReadAzureLlm, ReadsTimesTokensAndRefusesBadRows) {
  std::istringstream ok(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 23:59:59.5000000,100,7\n"
      "2023-11-17 00:00:00.2500000,2048,31\r\n");
  auto r = ReadAzureLlm(ok);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->size(), 2U);
  EXPECT_EQ((*r)[0], (LlmRequest{0, 100, 7}));
  EXPECT_EQ((*r)[1], (LlmRequest{750'000, 2048, 31}));  // across midnight
  for (const char* bad : {"TIME,ContextTokens,GeneratedTokens\n",
                          "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1\n",
                          "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16T18:17:03,1,2\n",
                          "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,-1,2\n",
                          "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,2\n"
                          "2023-11-16 18:17:02,1,2\n"}) {
    std::istringstream in(bad);
    EXPECT_FALSE(ReadAzureLlm(in).has_value()) << bad;
  }
}

TEST(ScaleRate, MultipliesTheRateAndKeepsTheShape) {
  std::vector<LlmRequest> trace;
  for (int i = 0; i < 1000; ++i) trace.push_back({i * 3'600'000LL, 100, 10});  // one every 3.6 s
  auto x4 = ScaleRate(trace, 4, 7);
  EXPECT_EQ(x4.size(), 4000U);
  EXPECT_TRUE(std::is_sorted(x4.begin(), x4.end(), [](const auto& a, const auto& b) {
    return a.arrival_us < b.arrival_us;
  }));
  EXPECT_EQ(ScaleRate(trace, 4, 7), x4);  // deterministic for a seed
  EXPECT_NE(ScaleRate(trace, 4, 8), x4);
  // Every copy arrives within a second of its original.
  EXPECT_LE(x4.back().arrival_us, trace.back().arrival_us + 1'000'000);
  const auto half = ScaleRate(trace, 2.5, 1);
  EXPECT_GT(half.size(), 2400U);
  EXPECT_LT(half.size(), 2600U);
}

// The replay's own service, its policies, and a 20-minute slice at 10x.
struct Slice {
  model::ServiceSpec spec;
  ReplicaModel model;
  std::vector<LlmRequest> requests;
};

std::optional<Slice> TraceSlice() {
  if (!std::filesystem::exists(LlmTrace())) return std::nullopt;
  auto spec = model::ParseServiceSpec(kReplayServiceSpec);
  EXPECT_TRUE(spec.has_value());
  auto trace = ReadAzureLlmFile(LlmTrace(), 20 * 60'000);
  EXPECT_TRUE(trace.has_value());
  if (!spec || !trace) return std::nullopt;
  return Slice{*spec, ReplicaModel{}, ScaleRate(*trace, 10, 1)};
}

TEST(ServiceReplay, BerthUsesFewerReplicaHoursThanPeakStaticAndKeepsItsSlo) {
  auto slice = TraceSlice();
  if (!slice) GTEST_SKIP() << "no " << LlmTrace();
  const TimeMs slo = slice->spec.slo.latency_p95_ms;
  const StaticSizes sizes = SizeStatic(slice->requests, slice->model);
  auto peak =
      ReplayService(slice->requests, slice->model, StaticPolicy("static-peak", sizes.peak), slo);
  auto mean =
      ReplayService(slice->requests, slice->model, StaticPolicy("static-mean", sizes.mean), slo);
  auto berth = ReplayService(slice->requests, slice->model, BerthPolicy(slice->spec), slo);
  ASSERT_TRUE(peak && mean && berth);
  EXPECT_EQ(berth->requests, slice->requests.size());
  // Static for the peak meets the SLO almost always; for the mean it drowns.
  EXPECT_GT(peak->SloAttainment(), 0.99);
  EXPECT_LT(mean->SloAttainment(), 0.5);
  // The stated bound: at most 85% of peak-static's replica-hours, at least
  // 90% of requests within the SLO.
  EXPECT_LT(berth->replica_hours, 0.85 * peak->replica_hours)
      << berth->replica_hours << " vs " << peak->replica_hours;
  EXPECT_GE(berth->SloAttainment(), 0.90);
  // It started from zero: the first requests were held for a cold start.
  EXPECT_GT(berth->cold_starts, 0U);
  EXPECT_GT(berth->held, 0U);
  EXPECT_GT(berth->held_wait_max_s, 0.0);
  EXPECT_LE(berth->held_wait_max_s, slice->model.cold_start_ms / 1000.0 + 3.0);
  EXPECT_EQ(peak->cold_starts, 0U);
  EXPECT_EQ(peak->held, 0U);
}

// Replays that agree on every measured figure.
void ExpectSameReplay(const ServiceReplayResult& a, const ServiceReplayResult& b) {
  EXPECT_EQ(a.replica_hours, b.replica_hours);
  EXPECT_EQ(a.within_slo, b.within_slo);
  EXPECT_EQ(a.ttft_p99_ms, b.ttft_p99_ms);
  EXPECT_EQ(a.cold_starts, b.cold_starts);
  EXPECT_EQ(a.held, b.held);
  EXPECT_EQ(a.decisions, b.decisions);
}

TEST(ServiceReplay, KnativeAndHpaLikeAreSettingsOfTheSameAutoscaler) {
  auto slice = TraceSlice();
  if (!slice) GTEST_SKIP() << "no " << LlmTrace();
  const TimeMs slo = slice->spec.slo.latency_p95_ms;
  const ServicePolicy berth = BerthPolicy(slice->spec);
  const ServicePolicy knative = KnativeLikePolicy(slice->spec);
  const ServicePolicy hpa = HpaLikePolicy(slice->spec);
  // Same signal and target as the service; other windows.
  for (const ServicePolicy* p : {&knative, &hpa}) {
    EXPECT_TRUE(p->autoscale);
    EXPECT_EQ(p->autoscaling.signal, berth.autoscaling.signal);
    EXPECT_EQ(p->autoscaling.target_milli, berth.autoscaling.target_milli);
    EXPECT_NE(p->autoscaling, berth.autoscaling);
  }
  EXPECT_EQ(knative.autoscaling.stable_window_ms, 60'000);
  EXPECT_EQ(knative.autoscaling.panic_threshold_pct, 200U);
  EXPECT_EQ(knative.autoscaling.scale_to_zero.idle_window_ms, 30'000);
  EXPECT_EQ(hpa.decide_every_ms, 15'000);
  EXPECT_EQ(hpa.autoscaling.down_stabilization_ms, 300'000);
  EXPECT_EQ(hpa.autoscaling.panic_threshold_pct, 0U);
  EXPECT_EQ(hpa.bounds.min, 1U);

  // A service whose spec carries Knative's settings, run as Berth runs any
  // service, replays exactly as the Knative-like baseline.
  std::string doc(kReplayServiceSpec);
  doc = doc.substr(0, doc.find("autoscaling:"));
  auto knative_spec = model::ParseServiceSpec(
      doc +
      "autoscaling: {signal: concurrency, target: 16, target_utilization: 70%, stable_window: "
      "60s, panic_window: 6s, panic_threshold: 200%, up_stabilization: 0s, down_stabilization: "
      "0s, scale_to_zero: {enabled: true, idle_window: 30s}}\n");
  ASSERT_TRUE(knative_spec.has_value()) << knative_spec.error().message;
  auto a = ReplayService(slice->requests, slice->model, knative, slo);
  auto b = ReplayService(slice->requests, slice->model, BerthPolicy(*knative_spec), slo);
  ASSERT_TRUE(a && b);
  ExpectSameReplay(*a, *b);

  auto hpa_spec = model::ParseServiceSpec(
      "name: code-completion\nimage: x\nreplicas: {min: 1, max: 128}\n"
      "slo: {latency_p95_ms: 1000}\n"
      "autoscaling: {signal: concurrency, target: 16, stable_window: 15s, panic_window: 15s, "
      "panic_threshold: 0, down_stabilization: 5m}\n");
  ASSERT_TRUE(hpa_spec.has_value()) << hpa_spec.error().message;
  ServicePolicy hpa_as_berth = BerthPolicy(*hpa_spec);
  hpa_as_berth.decide_every_ms = 15'000;  // HPA's loop; berthd's is 2 s
  auto c = ReplayService(slice->requests, slice->model, hpa, slo);
  auto d = ReplayService(slice->requests, slice->model, hpa_as_berth, slo);
  ASSERT_TRUE(c && d);
  ExpectSameReplay(*c, *d);
  // And the settings matter: the three replays differ.
  auto e = ReplayService(slice->requests, slice->model, berth, slo);
  ASSERT_TRUE(e);
  EXPECT_NE(a->replica_hours, e->replica_hours);
  EXPECT_NE(c->replica_hours, e->replica_hours);
}

}  // namespace
}  // namespace berth::sim
