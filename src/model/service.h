// The inference service: what a user applies (ServiceSpec, parsed and
// validated from YAML or JSON exactly as job specs are), with its
// autoscaling and rollout settings. Berth's defaults, their bounds and the
// anchors' defaults beside them are in docs/services.md.
//
// Quantities are exact integers: milli-GPUs, bytes, milliseconds, and the
// autoscaling target in thousandths of the signal's unit (a concurrency
// target of 2.5 is 2500), so that the autoscaler's arithmetic is exact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace berth::model {

// How a replica is checked: an HTTP GET of a path on the service's port
// (2xx/3xx is healthy), a TCP connect to a port, or a command run in the
// replica (exit 0 is healthy).
enum class ProbeKind { kNone, kHttp, kTcp, kCommand };

struct Probe {
  ProbeKind kind = ProbeKind::kNone;
  std::string http_path{};             // kHttp: "/health"
  std::uint32_t tcp_port = 0;          // kTcp
  std::vector<std::string> command{};  // kCommand: argv
  std::int64_t period_ms = 10'000;
  std::int64_t timeout_ms = 1'000;  // at most period_ms
  std::uint32_t success_threshold = 1;
  std::uint32_t failure_threshold = 3;
  bool operator==(const Probe&) const = default;
};

// What the autoscaler measures, service-wide (docs/services.md):
//  concurrency   requests in flight or queued at the gateway, per replica
//  rps           requests per second, per replica
//  p95_latency   the gateway's p95 latency in ms (not per replica: scaled
//                in proportion, as HPA scales a utilization)
//  queue_depth   requests waiting at the gateway, per replica
//  metric        a Prometheus gauge each replica exposes, summed over the
//                replicas, per replica (e.g. vllm:num_requests_waiting)
enum class AutoscaleSignal { kConcurrency, kRps, kP95Latency, kQueueDepth, kMetric };

std::string_view AutoscaleSignalName(AutoscaleSignal s);
std::optional<AutoscaleSignal> ParseAutoscaleSignal(std::string_view name);

struct ScaleToZero {
  bool enabled = false;
  // No request seen for this long: scale to zero (Knative's grace: 30 s).
  std::int64_t idle_window_ms = 600'000;
  bool operator==(const ScaleToZero&) const = default;
};

// The autoscaler's knobs. Windows are in ms and positive; the panic
// threshold is a percentage of what the ready replicas serve at target
// (0: no panic mode).
struct Autoscaling {
  AutoscaleSignal signal = AutoscaleSignal::kConcurrency;
  std::string metric{};  // signal kMetric: the Prometheus metric name
  // Per replica, in thousandths of the signal's unit.
  std::int64_t target_milli = 100'000;
  std::uint32_t target_utilization_pct = 70;  // aim at target x this
  std::int64_t stable_window_ms = 20'000;
  std::int64_t panic_window_ms = 10'000;    // at most the stable window
  std::uint32_t panic_threshold_pct = 400;  // 0: off; else 110..1000
  std::int64_t up_stabilization_ms = 0;     // 0: scale up at once
  std::int64_t down_stabilization_ms = 600'000;
  ScaleToZero scale_to_zero{};
  bool operator==(const Autoscaling&) const = default;
};

struct ReplicaBounds {
  std::uint32_t min = 1;
  std::uint32_t max = 1;  // min <= max
  bool operator==(const ReplicaBounds&) const = default;
};

// One step of a canary rollout: send `weight_pct` of the traffic to the new
// revision, then wait `pause_ms` (0: until `berth svc rollout` resumes it).
struct CanaryStep {
  std::uint32_t weight_pct = 0;
  std::int64_t pause_ms = 0;
  bool operator==(const CanaryStep&) const = default;
};

struct Rollout {
  // Replicas above the desired count during an update, and below it.
  std::uint32_t max_surge = 1;
  std::uint32_t max_unavailable = 0;
  std::vector<CanaryStep> canary{};  // weights increasing, each 1..100
  bool operator==(const Rollout&) const = default;
};

struct ServiceSlo {
  std::int64_t latency_p95_ms = 0;           // 0: none
  std::uint32_t availability_ppm = 999'000;  // 99.9% as parts per million
  bool operator==(const ServiceSlo&) const = default;
};

// Per-replica resources: whole GPUs (`gpus`) or a slice of one
// (`gpu_share_millis`, written as a fraction such as 0.5), the GPU memory
// the model keeps resident, CPU and RAM.
struct ServiceResources {
  std::uint32_t gpus = 0;
  std::uint32_t gpu_share_millis = 0;  // 1..999 when set; then gpus is 0
  std::uint64_t gpu_memory_bytes = 0;  // resident GPU memory per replica
  std::uint32_t cpu_millis = 0;
  std::uint64_t memory_bytes = 0;
  bool operator==(const ServiceResources&) const = default;
};

struct ModelRef {
  std::string name{};
  std::string version{};
  bool operator==(const ModelRef&) const = default;
};

// Who may call a service through the gateway (docs/services.md, "Who may
// call a service"):
//  tenant  a Berth token of a member or tenant-admin of the service's tenant
//          (or a platform admin), as `Authorization: Bearer TOKEN`; the
//          gateway asks berthd, remembers the verdict for a few seconds and
//          passes the caller's name to the replica, never the token
//  public  anyone who reaches the gateway's port; the replica sees every
//          header as sent (its own API keys, say)
enum class ServiceAccess { kTenant, kPublic };

std::string_view ServiceAccessName(ServiceAccess a);

// What a spec runs (docs/services.md, "Interactive sessions"):
//  service  an inference service in a queue of kind inference: replicas,
//           autoscaling, rollout, SLO
//  session  a notebook or dev box in a queue of kind interactive: one
//           replica, reached through the gateway like a service, ended by
//           `berth session stop`, its maximum lifetime or its idle window
enum class ServiceKind { kService, kSession };

std::string_view ServiceKindName(ServiceKind k);

// How long a session may live and when it counts as idle. Idle: no request
// through the gateway and every GPU of its replica under idle_gpu_util_pct
// for idle_window_ms (0: never culled for idleness). The lifetime counts
// from when the session was started (applied), waiting for a GPU included.
struct SessionLimits {
  std::int64_t max_lifetime_ms = 43'200'000;  // 12h
  std::int64_t idle_window_ms = 3'600'000;    // 1h
  std::uint32_t idle_gpu_util_pct = 5;
  bool operator==(const SessionLimits&) const = default;
};
inline constexpr std::int64_t kMaxSessionLifetimeMs = std::int64_t{30} * 86'400'000;  // 30d

// How the gateway treats the service's requests.
struct GatewaySettings {
  // How long a request waits at the gateway for a ready replica (scaled to
  // zero, starting, all replicas busy past their connection limit) before
  // it is answered 503; 0: 503 at once. Long enough for a model's load.
  std::int64_t hold_timeout_ms = 60'000;
  bool operator==(const GatewaySettings&) const = default;
};
inline constexpr std::int64_t kMaxHoldTimeoutMs = 3'600'000;  // gateway::kMaxHoldTimeoutMs

struct ServiceSpec {
  ServiceKind kind = ServiceKind::kService;
  std::string name;
  std::string tenant = "default";
  std::string queue = "default";
  std::string image{};                 // OCI image; or
  std::vector<std::string> command{};  // argv (with an image: its command)
  std::uint32_t port = 8000;
  ServiceAccess access = ServiceAccess::kTenant;
  ModelRef model{};
  ReplicaBounds replicas{};
  ServiceResources resources{};
  // Absent readiness: a TCP connect to `port`. Absent liveness: none.
  Probe readiness{};
  Probe liveness{};
  ServiceSlo slo{};
  Autoscaling autoscaling{};
  Rollout rollout{};
  GatewaySettings gateway{};
  SessionLimits session{};  // kind session only
  bool operator==(const ServiceSpec&) const = default;
};

// Limits users see in validation errors; documented in docs/services.md.
inline constexpr std::uint32_t kMaxServiceReplicas = 1024;
inline constexpr std::uint32_t kMaxServiceGpus = 64;
inline constexpr std::uint64_t kMaxServiceMemoryBytes = std::uint64_t{1} << 50;  // 1024Ti
inline constexpr std::uint32_t kMaxServiceCpuMillis = 4096 * 1000;
inline constexpr std::int64_t kMaxProbePeriodMs = 3'600'000;  // 1h
inline constexpr std::uint32_t kMaxProbeThreshold = 100;
inline constexpr std::int64_t kMaxWindowMs = 3'600'000;             // autoscaling windows: 1h
inline constexpr std::int64_t kMaxIdleWindowMs = 86'400'000;        // scale_to_zero: 24h
inline constexpr std::int64_t kMaxLatencySloMs = 600'000;           // 10m
inline constexpr std::int64_t kMaxTargetMilli = 1'000'000'000'000;  // 1e9 of the unit
inline constexpr std::size_t kMaxCanarySteps = 20;
inline constexpr std::int64_t kMaxCanaryPauseMs = 86'400'000;  // 24h
inline constexpr std::size_t kMaxServiceSpecBytes = 1 << 20;
inline constexpr std::size_t kMaxModelNameLength = 256;

// Parses a YAML (or JSON, which is YAML) service spec and validates every
// field, then the fields against each other. Unknown fields are errors;
// the error's `field` names the offending field's full path
// ("autoscaling.scale_to_zero.idle_window").
Result<ServiceSpec> ParseServiceSpec(std::string_view text);

// The spec in its canonical form: every field, defaults included, in a
// fixed order, as ParseServiceSpec reads it back to an equal spec. What
// `berth svc show` will print.
std::string ServiceToYaml(const ServiceSpec& spec);

// "0.5", "2.25", "100": a value in thousandths, exactly.
std::string FormatMilli(std::int64_t milli);

}  // namespace berth::model
