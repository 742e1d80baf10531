// berth-sim --services: an inference service replayed on a trace of LLM
// requests (the Azure LLM inference trace, docs/services.md), with replicas
// modelled like an LLM engine, under static provisioning or the autoscaler
// berthd runs (sched::Decide, called on a tick as berthd calls it).
//
// The replica model, per request: service time = (context tokens x prefill
// time + generated tokens x decode time) x (1 + slowdown x (n - 1)), where n
// is the replica's requests in flight once this one starts (a batching
// slowdown, fixed at the request's start); its first token comes after the
// prefill part. A replica holds at most max_concurrency requests; the rest
// wait in one FIFO queue at the gateway and go to the ready replica with the
// fewest in flight. A new replica serves after cold_start. A replica
// removed by a scale-down takes no new requests and stops when its last
// one ends (its time counts until then).
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/service.h"
#include "sched/autoscale.h"

namespace berth::sim {

// The service the replay runs unless --service-spec names another: a code
// completion model on one GPU per replica, scaled on concurrency with a
// target of its engine's max concurrency (16) at 70%, allowed to scale to
// zero, with a time-to-first-token SLO of 1 s.
inline constexpr std::string_view kReplayServiceSpec = R"(name: code-completion
image: docker.io/vllm/vllm-openai:v0.6.3
model: {name: azure-llm-code}
replicas: {min: 0, max: 128}
resources: {gpus: 1, gpu_memory: 60Gi}
slo: {latency_p95_ms: 1000}
autoscaling: {signal: concurrency, target: 16, scale_to_zero: {enabled: true}}
)";

// One request: arrival (µs since the trace's first request), prompt and
// output lengths.
struct LlmRequest {
  std::int64_t arrival_us = 0;
  std::uint32_t context_tokens = 0;
  std::uint32_t generated_tokens = 0;
  bool operator==(const LlmRequest&) const = default;
};

// The Azure LLM inference trace (Splitwise, ISCA'24): a header
// TIMESTAMP,ContextTokens,GeneratedTokens and rows such as
// "2023-11-16 18:17:03.9799600,4808,10". Rows in time order.
// `span_ms` > 0 keeps only the requests of the first span_ms.
Result<std::vector<LlmRequest>> ReadAzureLlm(std::istream& in, TimeMs span_ms = 0);
Result<std::vector<LlmRequest>> ReadAzureLlmFile(const std::filesystem::path& path,
                                                 TimeMs span_ms = 0);

// The trace at `scale` times its rate, keeping its shape over time: each
// request stands for floor(scale) requests (one more with probability
// scale - floor(scale)): itself, and copies arriving uniformly within the
// second after it with the tokens of a request drawn from the whole trace.
// Deterministic for a seed.
std::vector<LlmRequest> ScaleRate(const std::vector<LlmRequest>& requests, double scale,
                                  std::uint64_t seed);

struct ReplicaModel {
  std::int64_t prefill_us_per_token = 50;     // 20,000 tokens/s
  std::int64_t decode_us_per_token = 15'000;  // 15 ms
  std::uint32_t slowdown_pct = 5;             // per other request in flight
  std::uint32_t max_concurrency = 16;
  TimeMs cold_start_ms = 20'000;
};

// Requests per µs one replica serves at max_concurrency, as work at
// concurrency 1 per µs: the sizing rule of the static policies.
double ReplicaThroughput(const ReplicaModel& model);

// What provisions the replicas: a fixed count, or the autoscaler with these
// settings, called every decide_every_ms (samples are taken every 2 s).
struct ServicePolicy {
  std::string name;
  bool autoscale = false;
  std::uint32_t static_replicas = 0;
  model::Autoscaling autoscaling{};
  model::ReplicaBounds bounds{};
  TimeMs decide_every_ms = 2'000;
};
inline constexpr TimeMs kSampleEveryMs = 2'000;

// The service's own settings, as berthd would run them.
ServicePolicy BerthPolicy(const model::ServiceSpec& spec);
// Knative/KServe's defaults on the same target: 60 s stable window, 6 s
// panic window at 200%, no stabilization, scale to zero after 30 s (where
// min is 0), a 2 s tick.
ServicePolicy KnativeLikePolicy(const model::ServiceSpec& spec);
// HPA's defaults on the same target: a 15 s loop on the current
// utilization (the last 15 s), no panic mode, scale-up at once, 300 s
// scale-down stabilization, at least one replica.
ServicePolicy HpaLikePolicy(const model::ServiceSpec& spec);
ServicePolicy StaticPolicy(std::string name, std::uint32_t replicas);

// Static sizes: enough replicas at max_concurrency for the offered work of
// the busiest `window_ms` (peak), or of the whole trace (mean).
struct StaticSizes {
  std::uint32_t peak = 1;
  std::uint32_t mean = 1;
};
StaticSizes SizeStatic(const std::vector<LlmRequest>& requests, const ReplicaModel& model,
                       TimeMs window_ms = 10'000);

struct ServiceReplayResult {
  std::string policy;
  std::string replicas;  // "37" or "0-64"
  std::size_t requests = 0;
  double replica_hours = 0;  // until the last arrival
  std::uint32_t max_replicas = 0;
  // Latency is time to first token: the wait at the gateway plus the
  // prefill at the replica's slowdown.
  std::size_t within_slo = 0;
  TimeMs slo_ms = 0;
  double ttft_p50_ms = 0;
  double ttft_p95_ms = 0;
  double ttft_p99_ms = 0;
  double e2e_p99_ms = 0;
  std::uint32_t cold_starts = 0;  // replicas started after time 0
  // Requests that arrived with no replica ready, and how long they waited.
  std::size_t held = 0;
  double held_wait_s = 0;
  double held_wait_max_s = 0;
  std::map<std::string, std::size_t> decisions;  // by reason code
  double SloAttainment() const {
    return requests == 0 ? 1.0 : static_cast<double>(within_slo) / static_cast<double>(requests);
  }
};

Result<ServiceReplayResult> ReplayService(const std::vector<LlmRequest>& requests,
                                          const ReplicaModel& model, const ServicePolicy& policy,
                                          TimeMs slo_ms);

std::string RenderServiceTable(const std::vector<ServiceReplayResult>& results);

}  // namespace berth::sim
