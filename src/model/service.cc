// ParseServiceSpec: the service spec read field by field through the strict
// mapping reader (yaml_object.h), every quantity bounded where it is read,
// then the fields checked against each other.
#include "model/service.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "common/units.h"
#include "model/names.h"
#include "model/yaml_object.h"

namespace berth::model {
namespace {

constexpr std::array<std::string_view, 19> kServiceFields{
    "name",     "tenant",    "queue",     "image",    "command", "port",        "model",
    "replicas", "resources", "readiness", "liveness", "slo",     "autoscaling", "rollout",
    "args",     "access",    "kind",      "session",  "gateway"};
constexpr std::array<std::string_view, 1> kGatewayFields{"hold_timeout"};
constexpr std::array<std::string_view, 2> kKindNames{"service", "session"};
constexpr std::array<std::string_view, 3> kSessionFields{"max_lifetime", "idle_window",
                                                         "idle_gpu_utilization"};
// What a session does not have: it runs one replica, replaced in place.
constexpr std::array<std::string_view, 4> kNotForSessions{"replicas", "autoscaling", "rollout",
                                                          "slo"};
constexpr std::array<std::string_view, 2> kAccessNames{"tenant", "public"};
constexpr std::array<std::string_view, 2> kModelFields{"name", "version"};
constexpr std::array<std::string_view, 2> kReplicaFields{"min", "max"};
constexpr std::array<std::string_view, 4> kResourceFields{"gpus", "gpu_memory", "cpu", "memory"};
constexpr std::array<std::string_view, 7> kProbeFields{
    "http", "tcp", "command", "period", "timeout", "success_threshold", "failure_threshold"};
constexpr std::array<std::string_view, 2> kSloFields{"latency_p95_ms", "availability"};
constexpr std::array<std::string_view, 10> kAutoscalingFields{
    "signal",       "metric",          "target",           "target_utilization", "stable_window",
    "panic_window", "panic_threshold", "up_stabilization", "down_stabilization", "scale_to_zero"};
constexpr std::array<std::string_view, 2> kScaleToZeroFields{"enabled", "idle_window"};
constexpr std::array<std::string_view, 3> kRolloutFields{"max_surge", "max_unavailable", "canary"};
constexpr std::array<std::string_view, 2> kCanaryFields{"weight", "pause"};
constexpr std::array<std::string_view, 5> kSignalNames{"concurrency", "rps", "p95_latency",
                                                       "queue_depth", "metric"};

Result<std::string> Str(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) return InvalidField(field, "must be a string");
  return node.Scalar();
}

Result<bool> Bool(const YAML::Node& node, const std::string& field) {
  if (node.IsScalar() && (node.Scalar() == "true" || node.Scalar() == "false")) {
    return node.Scalar() == "true";
  }
  return InvalidField(field, "must be true or false");
}

// A whole number from lo to hi; `what` says what it counts, for the message.
Result<std::uint32_t> Count(const YAML::Node& node, const std::string& field, std::uint32_t lo,
                            std::uint32_t hi, std::string_view what) {
  auto bad = [&](std::string_view got) {
    return InvalidField(field, fmt::format("'{}' is not allowed; write a whole number of {} from "
                                           "{} to {}",
                                           got, what, lo, hi));
  };
  if (!node.IsScalar()) return bad("(not a number)");
  const std::string& s = node.Scalar();
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || ptr != s.data() + s.size() || v < lo || v > hi) {
    return bad(s);
  }
  return static_cast<std::uint32_t>(v);
}

// A whole percentage from lo to hi: 70 or "70%".
Result<std::uint32_t> Percent(const YAML::Node& node, const std::string& field, std::uint32_t lo,
                              std::uint32_t hi) {
  std::string s = node.IsScalar() ? node.Scalar() : "(not a number)";
  if (s.ends_with("%")) s.pop_back();
  return Count(YAML::Node(s), field, lo, hi, "percent");
}

// A duration from lo_ms to hi_ms; "0" alone is zero.
Result<std::int64_t> Duration(const YAML::Node& node, const std::string& field, std::int64_t lo_ms,
                              std::int64_t hi_ms, std::string_view example) {
  auto s = Str(node, field);
  if (!s) return std::unexpected(s.error());
  auto range = [&] {
    return InvalidField(field,
                        fmt::format("'{}' is out of range; write a duration from {} to {}, "
                                    "e.g. {}",
                                    *s, FormatDurationMs(lo_ms), FormatDurationMs(hi_ms), example));
  };
  std::int64_t ms = 0;
  if (*s != "0") {
    auto parsed = ParseDurationMs(*s);
    if (!parsed) {
      return InvalidField(field, fmt::format("'{}' is not a duration; write e.g. {}", *s, example));
    }
    ms = *parsed;
  }
  if (ms < lo_ms || ms > hi_ms) return range();
  return ms;
}

// A decimal with at most `decimals` places, as an integer scaled by
// 10^decimals: "2.5" with 3 places is 2500. An optional '%' suffix when
// `percent`.
Result<std::int64_t> Decimal(const YAML::Node& node, const std::string& field, int decimals,
                             bool percent, std::string_view how) {
  auto bad = [&](std::string_view got) {
    return InvalidField(field, fmt::format("'{}' is not {}", got, how));
  };
  if (!node.IsScalar()) return bad("(not a number)");
  std::string_view s = node.Scalar();
  if (percent && s.ends_with("%")) s.remove_suffix(1);
  auto dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  if (whole.empty() || whole.size() > 13 || (dot != std::string_view::npos && frac.empty()) ||
      frac.size() > static_cast<std::size_t>(decimals)) {
    return bad(node.Scalar());
  }
  std::int64_t w = 0;
  auto [wp, wec] = std::from_chars(whole.data(), whole.data() + whole.size(), w);
  if (wec != std::errc{} || wp != whole.data() + whole.size() || w < 0) return bad(node.Scalar());
  std::int64_t f = 0;
  if (!frac.empty()) {
    auto [fp, fec] = std::from_chars(frac.data(), frac.data() + frac.size(), f);
    if (fec != std::errc{} || fp != frac.data() + frac.size() || f < 0) return bad(node.Scalar());
  }
  std::int64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  for (std::size_t i = frac.size(); i < static_cast<std::size_t>(decimals); ++i) f *= 10;
  return w * scale + f;
}

Result<std::uint64_t> Size(const YAML::Node& node, const std::string& field) {
  auto s = Str(node, field);
  if (!s) return std::unexpected(s.error());
  auto bytes = ParseBytes(*s, kMaxServiceMemoryBytes);
  if (!bytes) return InvalidField(field, bytes.error().message);
  return *bytes;
}

Result<std::vector<std::string>> Argv(const YAML::Node& node, const std::string& field) {
  if (!node.IsSequence()) {
    return InvalidField(field, "must be a list of strings, e.g. [\"vllm\", \"serve\"]");
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar())
      return InvalidField(fmt::format("{}[{}]", field, i), "must be a string");
    out.push_back(node[i].Scalar());
  }
  if (out.size() > 4096) return InvalidField(field, "has more than 4096 arguments");
  return out;
}

// A name in the policy's alphabet; `nested` allows parent/child (queues).
Status CheckName(const std::string& v, const std::string& field, bool nested) {
  bool valid = !v.empty();
  for (std::size_t start = 0; valid && start <= v.size();) {
    std::size_t slash = nested ? v.find('/', start) : std::string::npos;
    std::string part = v.substr(start, slash == std::string::npos ? v.npos : slash - start);
    valid = IsValidName(part);
    start = slash == std::string::npos ? v.size() + 1 : slash + 1;
  }
  if (valid) return Ok();
  return InvalidField(field,
                      fmt::format("'{}' is not a valid {} name (lower-case letters, digits, '-', "
                                  "'_', '.'; at most {} characters{})",
                                  v, field, kMaxNameLength,
                                  nested ? " per part; a nested queue is parent/child" : ""));
}

Status ParseModel(const YAML::Node& node, ModelRef& m) {
  auto obj = YamlObject::Read(node, "model", kModelFields,
                              "must be a mapping, e.g. {name: qwen2.5-coder-7b, version: v3}");
  if (!obj) return std::unexpected(obj.error());
  auto ok = [](const std::string& s) {
    return !s.empty() && s.size() <= kMaxModelNameLength &&
           std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '/' || c == ':' || c == '@';
           });
  };
  for (auto [key, target] : {std::pair{"name", &m.name}, std::pair{"version", &m.version}}) {
    if (auto n = obj->Get(key)) {
      auto s = Str(n, obj->PathOf(key));
      if (!s) return std::unexpected(s.error());
      if (!ok(*s)) {
        return InvalidField(obj->PathOf(key),
                            fmt::format("'{}' is not allowed; use 1 to {} letters, digits and "
                                        "- _ . / : @, e.g. Qwen/Qwen2.5-Coder-7B",
                                        *s, kMaxModelNameLength));
      }
      *target = *s;
    }
  }
  if (m.name.empty() && !m.version.empty()) {
    return InvalidField("model.name", "is required when model.version is given");
  }
  return Ok();
}

// gpus: a whole number of GPUs (0..64) or a fraction of one GPU (0.5,
// at most 3 decimals).
Status ParseResources(const YAML::Node& node, ServiceResources& r) {
  auto obj = YamlObject::Read(node, "resources", kResourceFields,
                              "must be a mapping, e.g. {gpus: 1, gpu_memory: 40Gi}");
  if (!obj) return std::unexpected(obj.error());
  if (auto n = obj->Get("gpus")) {
    auto v = Decimal(n, "resources.gpus", 3, false,
                     fmt::format("a GPU count; write whole GPUs from 0 to {} (2) or a fraction of "
                                 "one GPU (0.5, at most 3 decimals)",
                                 kMaxServiceGpus));
    if (!v) return std::unexpected(v.error());
    if (*v >= 1000 && *v % 1000 != 0) {
      return InvalidField("resources.gpus",
                          fmt::format("'{}' mixes whole GPUs and a slice; a replica takes whole "
                                      "GPUs (2) or a slice of one GPU (0.5)",
                                      n.Scalar()));
    }
    if (*v > std::int64_t{kMaxServiceGpus} * 1000) {
      return InvalidField("resources.gpus", fmt::format("'{}' GPUs per replica is not allowed; use "
                                                        "0 to {}",
                                                        n.Scalar(), kMaxServiceGpus));
    }
    if (*v >= 1000) {
      r.gpus = static_cast<std::uint32_t>(*v / 1000);
    } else {
      r.gpu_share_millis = static_cast<std::uint32_t>(*v);
    }
  }
  if (auto n = obj->Get("gpu_memory")) {
    auto b = Size(n, "resources.gpu_memory");
    if (!b) return std::unexpected(b.error());
    r.gpu_memory_bytes = *b;
  }
  if (auto n = obj->Get("cpu")) {
    auto v = Decimal(n, "resources.cpu", 3, false,
                     "a CPU amount; write cores with at most 3 decimals (4, 0.5), at most 4096");
    if (!v) return std::unexpected(v.error());
    if (*v > kMaxServiceCpuMillis) {
      return InvalidField("resources.cpu",
                          fmt::format("'{}' cores is not allowed; at most 4096", n.Scalar()));
    }
    r.cpu_millis = static_cast<std::uint32_t>(*v);
  }
  if (auto n = obj->Get("memory")) {
    auto b = Size(n, "resources.memory");
    if (!b) return std::unexpected(b.error());
    r.memory_bytes = *b;
  }
  if (r.gpu_memory_bytes > 0 && r.gpus == 0 && r.gpu_share_millis == 0) {
    return InvalidField("resources.gpu_memory",
                        "resident GPU memory needs a GPU; set resources.gpus (1, or 0.5)");
  }
  return Ok();
}

Status ParseProbe(const YAML::Node& node, const std::string& path, Probe& p) {
  auto obj = YamlObject::Read(node, path, kProbeFields,
                              "must be a mapping with one of http, tcp or command, e.g. "
                              "{http: /health, period: 10s}");
  if (!obj) return std::unexpected(obj.error());
  int kinds =
      (obj->Has("http") ? 1 : 0) + (obj->Has("tcp") ? 1 : 0) + (obj->Has("command") ? 1 : 0);
  if (kinds != 1) {
    return InvalidField(path, fmt::format("give exactly one of http (a path), tcp (a port) or "
                                          "command (a list); {} given",
                                          kinds));
  }
  if (auto n = obj->Get("http")) {
    auto s = Str(n, obj->PathOf("http"));
    if (!s) return std::unexpected(s.error());
    if (s->empty() || s->front() != '/' || s->size() > 1024 ||
        std::any_of(s->begin(), s->end(), [](char c) { return c <= ' ' || c == 0x7f; })) {
      return InvalidField(obj->PathOf("http"),
                          "must be a URL path starting with '/', without spaces, e.g. /health");
    }
    p.kind = ProbeKind::kHttp;
    p.http_path = *s;
  } else if (auto t = obj->Get("tcp")) {
    auto v = Count(t, obj->PathOf("tcp"), 1, 65535, "a port");
    if (!v) return std::unexpected(v.error());
    p.kind = ProbeKind::kTcp;
    p.tcp_port = *v;
  } else {
    auto argv = Argv(obj->Get("command"), obj->PathOf("command"));
    if (!argv) return std::unexpected(argv.error());
    if (argv->empty() || argv->front().empty()) {
      return InvalidField(obj->PathOf("command"), "must name a program to run");
    }
    p.kind = ProbeKind::kCommand;
    p.command = std::move(*argv);
  }
  if (auto n = obj->Get("period")) {
    auto v = Duration(n, obj->PathOf("period"), 1000, kMaxProbePeriodMs, "10s");
    if (!v) return std::unexpected(v.error());
    p.period_ms = *v;
  }
  if (auto n = obj->Get("timeout")) {
    auto v = Duration(n, obj->PathOf("timeout"), 1, kMaxProbePeriodMs, "1s");
    if (!v) return std::unexpected(v.error());
    p.timeout_ms = *v;
  }
  if (p.timeout_ms > p.period_ms) {
    return InvalidField(obj->PathOf("timeout"),
                        fmt::format("{} is longer than the period {}; a probe must end before the "
                                    "next one starts",
                                    FormatDurationMs(p.timeout_ms), FormatDurationMs(p.period_ms)));
  }
  for (auto [key, target] : {std::pair{"success_threshold", &p.success_threshold},
                             std::pair{"failure_threshold", &p.failure_threshold}}) {
    if (auto n = obj->Get(key)) {
      auto v = Count(n, obj->PathOf(key), 1, kMaxProbeThreshold, "probes");
      if (!v) return std::unexpected(v.error());
      *target = *v;
    }
  }
  return Ok();
}

Status ParseSlo(const YAML::Node& node, ServiceSlo& slo) {
  auto obj = YamlObject::Read(node, "slo", kSloFields,
                              "must be a mapping, e.g. {latency_p95_ms: 500, availability: 99.9%}");
  if (!obj) return std::unexpected(obj.error());
  if (auto n = obj->Get("latency_p95_ms")) {
    auto v = Count(n, "slo.latency_p95_ms", 1, kMaxLatencySloMs, "milliseconds");
    if (!v) return std::unexpected(v.error());
    slo.latency_p95_ms = *v;
  }
  if (auto n = obj->Get("availability")) {
    auto v = Decimal(n, "slo.availability", 4, true,
                     "an availability; write a percentage above 0 and at most 100 with at most 4 "
                     "decimals, e.g. 99.9%");
    if (!v) return std::unexpected(v.error());
    // Four decimals of a percentage are parts per million.
    if (*v <= 0 || *v > 1'000'000) {
      return InvalidField("slo.availability",
                          fmt::format("'{}' is not above 0% and at most 100%", n.Scalar()));
    }
    slo.availability_ppm = static_cast<std::uint32_t>(*v);
  }
  return Ok();
}

Status ParseAutoscaling(const YAML::Node& node, const ServiceSlo& slo, Autoscaling& a) {
  auto obj = YamlObject::Read(node, "autoscaling", kAutoscalingFields,
                              "must be a mapping, e.g. {signal: concurrency, target: 8}");
  if (!obj) return std::unexpected(obj.error());
  if (auto n = obj->Get("signal")) {
    auto s = Str(n, "autoscaling.signal");
    if (!s) return std::unexpected(s.error());
    auto sig = ParseAutoscaleSignal(*s);
    if (!sig) {
      return InvalidField("autoscaling.signal",
                          fmt::format("'{}' is not a signal; use {}", *s, JoinNames(kSignalNames)));
    }
    a.signal = *sig;
  }
  if (auto n = obj->Get("metric")) {
    auto s = Str(n, "autoscaling.metric");
    if (!s) return std::unexpected(s.error());
    // Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]*.
    bool ok = !s->empty() && s->size() <= 200 && !((*s)[0] >= '0' && (*s)[0] <= '9') &&
              std::all_of(s->begin(), s->end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == ':';
              });
    if (!ok) {
      return InvalidField("autoscaling.metric",
                          fmt::format("'{}' is not a Prometheus metric name (letters, digits, '_' "
                                      "and ':', not starting with a digit), e.g. "
                                      "vllm:num_requests_waiting",
                                      *s));
    }
    if (a.signal != AutoscaleSignal::kMetric) {
      return InvalidField("autoscaling.metric",
                          "applies only to signal: metric; set signal: metric or remove metric");
    }
    a.metric = *s;
  }
  if (a.signal == AutoscaleSignal::kMetric && a.metric.empty()) {
    return InvalidField("autoscaling.metric",
                        "is required with signal: metric: the Prometheus gauge each replica "
                        "exposes, e.g. vllm:num_requests_waiting");
  }
  if (auto n = obj->Get("target")) {
    auto v = Decimal(n, "autoscaling.target", 3, false,
                     "a target; write a number above 0 with at most 3 decimals, e.g. 8 or 2.5");
    if (!v) return std::unexpected(v.error());
    if (*v <= 0 || *v > kMaxTargetMilli) {
      return InvalidField("autoscaling.target",
                          fmt::format("'{}' is out of range; write a number above 0 and at most "
                                      "1000000000",
                                      n.Scalar()));
    }
    a.target_milli = *v;
  } else {
    // Knative's defaults for concurrency (100) and rps (200); the SLO for
    // p95 latency; the others have no meaningful default.
    switch (a.signal) {
      case AutoscaleSignal::kConcurrency:
        a.target_milli = 100'000;
        break;
      case AutoscaleSignal::kRps:
        a.target_milli = 200'000;
        break;
      case AutoscaleSignal::kP95Latency:
        if (slo.latency_p95_ms == 0) {
          return InvalidField("autoscaling.target",
                              "is required with signal: p95_latency unless slo.latency_p95_ms is "
                              "set; give the latency to aim at in ms, e.g. 500");
        }
        a.target_milli = slo.latency_p95_ms * 1000;
        break;
      case AutoscaleSignal::kQueueDepth:
      case AutoscaleSignal::kMetric:
        return InvalidField("autoscaling.target",
                            fmt::format("is required with signal: {}: the value per replica to "
                                        "aim at, e.g. 4",
                                        AutoscaleSignalName(a.signal)));
    }
  }
  if (auto n = obj->Get("target_utilization")) {
    auto v = Percent(n, "autoscaling.target_utilization", 1, 100);
    if (!v) return std::unexpected(v.error());
    a.target_utilization_pct = *v;
  }
  struct Window {
    const char* key;
    std::int64_t* target;
    std::int64_t lo;
    std::int64_t hi;
    const char* example;
  };
  for (const Window& w :
       {Window{"stable_window", &a.stable_window_ms, 1000, kMaxWindowMs, "60s"},
        Window{"panic_window", &a.panic_window_ms, 1000, kMaxWindowMs, "6s"},
        Window{"up_stabilization", &a.up_stabilization_ms, 0, kMaxWindowMs, "0s"},
        Window{"down_stabilization", &a.down_stabilization_ms, 0, kMaxWindowMs, "3m"}}) {
    if (auto n = obj->Get(w.key)) {
      auto v = Duration(n, obj->PathOf(w.key), w.lo, w.hi, w.example);
      if (!v) return std::unexpected(v.error());
      *w.target = *v;
    }
  }
  // A stable window shorter than the default panic window takes the panic
  // window down with it; one given explicitly must fit.
  if (!obj->Has("panic_window"))
    a.panic_window_ms = std::min(a.panic_window_ms, a.stable_window_ms);
  if (a.panic_window_ms > a.stable_window_ms) {
    return InvalidField(
        "autoscaling.panic_window",
        fmt::format("{} is longer than the stable window {}; the panic window is a "
                    "short part of it",
                    FormatDurationMs(a.panic_window_ms), FormatDurationMs(a.stable_window_ms)));
  }
  if (auto n = obj->Get("panic_threshold")) {
    auto v = Percent(n, "autoscaling.panic_threshold", 0, 1000);
    if (!v || (*v != 0 && *v < 110)) {
      return InvalidField("autoscaling.panic_threshold",
                          fmt::format("'{}' is not allowed; write a percentage of target from 110% "
                                      "to 1000% (200%), or 0 for no panic mode",
                                      n.IsScalar() ? n.Scalar() : "(not a number)"));
    }
    a.panic_threshold_pct = *v;
  }
  if (auto n = obj->Get("scale_to_zero")) {
    auto z = YamlObject::Read(n, "autoscaling.scale_to_zero", kScaleToZeroFields,
                              "must be a mapping, e.g. {enabled: true, idle_window: 5m}");
    if (!z) return std::unexpected(z.error());
    if (auto e = z->Get("enabled")) {
      auto b = Bool(e, z->PathOf("enabled"));
      if (!b) return std::unexpected(b.error());
      a.scale_to_zero.enabled = *b;
    }
    if (auto w = z->Get("idle_window")) {
      auto v = Duration(w, z->PathOf("idle_window"), 1000, kMaxIdleWindowMs, "5m");
      if (!v) return std::unexpected(v.error());
      a.scale_to_zero.idle_window_ms = *v;
    }
  }
  return Ok();
}

Status ParseRollout(const YAML::Node& node, std::uint32_t max_replicas, Rollout& r) {
  auto obj = YamlObject::Read(node, "rollout", kRolloutFields,
                              "must be a mapping, e.g. {max_surge: 1, max_unavailable: 0}");
  if (!obj) return std::unexpected(obj.error());
  for (auto [key, target] :
       {std::pair{"max_surge", &r.max_surge}, std::pair{"max_unavailable", &r.max_unavailable}}) {
    if (auto n = obj->Get(key)) {
      auto v = Count(n, obj->PathOf(key), 0, kMaxServiceReplicas, "replicas");
      if (!v) return std::unexpected(v.error());
      *target = *v;
    }
  }
  if (r.max_surge == 0 && r.max_unavailable == 0) {
    return InvalidField("rollout.max_surge",
                        "and max_unavailable are both 0, so an update could never replace a "
                        "replica; allow a surge (1) or an unavailable replica");
  }
  if (r.max_unavailable > max_replicas) {
    return InvalidField("rollout.max_unavailable", fmt::format("{} is more than replicas.max ({})",
                                                               r.max_unavailable, max_replicas));
  }
  if (auto n = obj->Get("canary")) {
    if (!n.IsSequence() || n.size() == 0 || n.size() > kMaxCanarySteps) {
      return InvalidField("rollout.canary",
                          fmt::format("must be a list of 1 to {} steps {{weight, pause}}, e.g. "
                                      "[{{weight: 10, pause: 5m}}, {{weight: 50, pause: 5m}}]",
                                      kMaxCanarySteps));
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string path = fmt::format("rollout.canary[{}]", i);
      auto step =
          YamlObject::Read(n[i], path, kCanaryFields,
                           "must be a mapping {weight, pause}, e.g. {weight: 10, pause: 5m}");
      if (!step) return std::unexpected(step.error());
      CanaryStep c;
      auto w = step->Get("weight");
      if (!w)
        return InvalidField(step->PathOf("weight"),
                            "is required: the new revision's share of traffic in percent");
      auto wv = Percent(w, step->PathOf("weight"), 1, 100);
      if (!wv) return std::unexpected(wv.error());
      c.weight_pct = *wv;
      if (!r.canary.empty() && c.weight_pct <= r.canary.back().weight_pct) {
        return InvalidField(step->PathOf("weight"),
                            fmt::format("{}% does not increase on the step before ({}%); canary "
                                        "weights must rise step by step",
                                        c.weight_pct, r.canary.back().weight_pct));
      }
      if (auto p = step->Get("pause")) {
        auto v = Duration(p, step->PathOf("pause"), 0, kMaxCanaryPauseMs, "5m");
        if (!v) return std::unexpected(v.error());
        c.pause_ms = *v;
      }
      r.canary.push_back(c);
    }
  }
  return Ok();
}

Status ParseSession(const YAML::Node& node, SessionLimits& limits) {
  auto obj = YamlObject::Read(node, "session", kSessionFields,
                              "must be a mapping, e.g. {max_lifetime: 8h, idle_window: 1h}");
  if (!obj) return std::unexpected(obj.error());
  if (auto n = obj->Get("max_lifetime")) {
    auto v = Duration(n, obj->PathOf("max_lifetime"), 1000, kMaxSessionLifetimeMs, "8h");
    if (!v) return std::unexpected(v.error());
    limits.max_lifetime_ms = *v;
  }
  if (auto n = obj->Get("idle_window")) {
    auto v =
        Duration(n, obj->PathOf("idle_window"), 0, kMaxSessionLifetimeMs, "1h, or 0 for never");
    if (!v) return std::unexpected(v.error());
    if (*v != 0 && *v < 1000) {
      return InvalidField(obj->PathOf("idle_window"),
                          "must be at least 1s, or 0 for a session never culled for idleness");
    }
    limits.idle_window_ms = *v;
  }
  if (auto n = obj->Get("idle_gpu_utilization")) {
    auto v = Percent(n, obj->PathOf("idle_gpu_utilization"), 0, 100);
    if (!v) return std::unexpected(v.error());
    limits.idle_gpu_util_pct = *v;
  }
  return Ok();
}

Status ParseInto(const YAML::Node& root, ServiceSpec& spec) {
  auto obj = YamlObject::Read(root, "", kServiceFields,
                              "a service spec must be a YAML mapping with at least name and an "
                              "image or command");
  if (!obj) return std::unexpected(obj.error());
  if (auto n = obj->Get("kind")) {
    auto k = Str(n, "kind");
    if (!k) return std::unexpected(k.error());
    if (*k == "session") {
      spec.kind = ServiceKind::kSession;
    } else if (*k != "service") {
      return InvalidField("kind", fmt::format("'{}' is not allowed; use service (an inference "
                                              "service; the default) or session (a notebook or "
                                              "dev box in an interactive queue)",
                                              *k));
    }
  }
  if (spec.kind == ServiceKind::kSession) {
    for (std::string_view key : kNotForSessions) {
      if (obj->Has(std::string(key))) {
        return InvalidField(std::string(key),
                            fmt::format("is not for kind: session (a session runs one replica, "
                                        "replaced in place); remove {}",
                                        key));
      }
    }
    spec.rollout.max_surge = 0;
    spec.rollout.max_unavailable = 1;
    if (auto n = obj->Get("session")) BERTH_RETURN_IF_ERROR(ParseSession(n, spec.session));
    if (spec.session.idle_window_ms > spec.session.max_lifetime_ms) {
      return InvalidField("session.idle_window",
                          fmt::format("{} is longer than session.max_lifetime ({}); it could "
                                      "never apply",
                                      FormatDurationMs(spec.session.idle_window_ms),
                                      FormatDurationMs(spec.session.max_lifetime_ms)));
    }
  } else if (obj->Has("session")) {
    return InvalidField("session", "is for kind: session only; remove it or add kind: session");
  }
  auto name = obj->Get("name");
  if (!name) return InvalidField("name", "is required: a short name for the service, e.g. coder");
  auto name_s = Str(name, "name");
  if (!name_s) return std::unexpected(name_s.error());
  if (!IsValidName(*name_s)) {
    return InvalidField("name",
                        fmt::format("'{}' is not a valid name: 1 to {} lower-case letters, "
                                    "digits, '-', '_' or '.', starting and ending with a letter "
                                    "or digit",
                                    *name_s, kMaxNameLength));
  }
  spec.name = *name_s;
  for (auto [key, target] : {std::pair{"tenant", &spec.tenant}, std::pair{"queue", &spec.queue}}) {
    if (auto n = obj->Get(key)) {
      auto v = Str(n, key);
      if (!v) return std::unexpected(v.error());
      BERTH_RETURN_IF_ERROR(CheckName(*v, key, std::string_view(key) == "queue"));
      *target = *v;
    }
  }
  if (auto n = obj->Get("image")) {
    auto s = Str(n, "image");
    if (!s) return std::unexpected(s.error());
    if (s->empty() || s->size() > 512 ||
        std::any_of(s->begin(), s->end(), [](char c) { return c <= ' ' || c == 0x7f; })) {
      return InvalidField("image",
                          "must be an OCI image reference without spaces, e.g. "
                          "docker.io/vllm/vllm-openai:v0.6.3");
    }
    spec.image = *s;
  }
  if (auto n = obj->Get("command")) {
    auto argv = Argv(n, "command");
    if (!argv) return std::unexpected(argv.error());
    if (argv->empty() || argv->front().empty()) {
      return InvalidField("command", "must name a program to run");
    }
    spec.command = std::move(*argv);
  }
  if (auto n = obj->Get("args")) {
    if (spec.command.empty()) {
      return InvalidField("args", "needs a command; put the program and its arguments in command");
    }
    auto argv = Argv(n, "args");
    if (!argv) return std::unexpected(argv.error());
    spec.command.insert(spec.command.end(), argv->begin(), argv->end());
  }
  if (spec.image.empty() && spec.command.empty()) {
    return InvalidField("command",
                        "give an image, a command, or both: what each replica runs, e.g. "
                        "command: [\"vllm\", \"serve\", \"Qwen/Qwen2.5-Coder-7B\"]");
  }
  if (auto n = obj->Get("port")) {
    auto v = Count(n, "port", 1, 65535, "a port");
    if (!v) return std::unexpected(v.error());
    spec.port = *v;
  }
  if (auto n = obj->Get("access")) {
    auto a = Str(n, "access");
    if (!a) return std::unexpected(a.error());
    if (*a == "tenant") {
      spec.access = ServiceAccess::kTenant;
    } else if (*a == "public") {
      spec.access = ServiceAccess::kPublic;
    } else {
      return InvalidField("access",
                          fmt::format("'{}' is not allowed; use tenant (callers show a Berth token "
                                      "of the service's tenant; the default) or public (anyone "
                                      "who reaches the gateway)",
                                      *a));
    }
  }
  if (spec.kind == ServiceKind::kSession && spec.access == ServiceAccess::kPublic) {
    return InvalidField("access",
                        "public is not allowed for a session: whoever reaches a notebook runs code "
                        "as its tenant; a session is reached by its tenant's members only");
  }
  if (auto n = obj->Get("model")) BERTH_RETURN_IF_ERROR(ParseModel(n, spec.model));
  if (auto n = obj->Get("gateway")) {
    auto g = YamlObject::Read(n, "gateway", kGatewayFields,
                              "must be a mapping, e.g. {hold_timeout: 2m}");
    if (!g) return std::unexpected(g.error());
    if (auto h = g->Get("hold_timeout")) {
      auto v =
          Duration(h, g->PathOf("hold_timeout"), 0, kMaxHoldTimeoutMs, "2m, or 0 for 503 at once");
      if (!v) return std::unexpected(v.error());
      spec.gateway.hold_timeout_ms = *v;
    }
  }
  if (auto n = obj->Get("replicas")) {
    auto r =
        YamlObject::Read(n, "replicas", kReplicaFields, "must be a mapping, e.g. {min: 1, max: 4}");
    if (!r) return std::unexpected(r.error());
    bool max_given = false;
    for (auto [key, target] :
         {std::pair{"min", &spec.replicas.min}, std::pair{"max", &spec.replicas.max}}) {
      if (auto v = r->Get(key)) {
        auto c = Count(v, r->PathOf(key), std::string_view(key) == "max" ? 1 : 0,
                       kMaxServiceReplicas, "replicas");
        if (!c) return std::unexpected(c.error());
        *target = *c;
        max_given = max_given || std::string_view(key) == "max";
      }
    }
    // max defaults to min: a service scales only where a range is given.
    if (!max_given) spec.replicas.max = std::max<std::uint32_t>(spec.replicas.min, 1);
    if (spec.replicas.min > spec.replicas.max) {
      return InvalidField("replicas.min", fmt::format("{} is above replicas.max ({}); min <= max",
                                                      spec.replicas.min, spec.replicas.max));
    }
  }
  if (auto n = obj->Get("resources")) BERTH_RETURN_IF_ERROR(ParseResources(n, spec.resources));
  spec.readiness.kind = ProbeKind::kTcp;
  spec.readiness.tcp_port = spec.port;
  if (auto n = obj->Get("readiness")) {
    spec.readiness = Probe{};
    BERTH_RETURN_IF_ERROR(ParseProbe(n, "readiness", spec.readiness));
  }
  if (auto n = obj->Get("liveness")) {
    BERTH_RETURN_IF_ERROR(ParseProbe(n, "liveness", spec.liveness));
  }
  if (auto n = obj->Get("slo")) BERTH_RETURN_IF_ERROR(ParseSlo(n, spec.slo));
  if (auto n = obj->Get("autoscaling")) {
    BERTH_RETURN_IF_ERROR(ParseAutoscaling(n, spec.slo, spec.autoscaling));
  }
  if (spec.autoscaling.scale_to_zero.enabled && spec.replicas.min != 0) {
    return InvalidField("autoscaling.scale_to_zero.enabled",
                        fmt::format("needs replicas.min: 0 (it is {}); set min to 0 or disable "
                                    "scale to zero",
                                    spec.replicas.min));
  }
  if (spec.replicas.min == 0 && !spec.autoscaling.scale_to_zero.enabled) {
    return InvalidField("replicas.min",
                        "0 means scaling to zero when idle; enable it with "
                        "autoscaling.scale_to_zero.enabled: true, or set min to 1");
  }
  if (auto n = obj->Get("rollout")) {
    BERTH_RETURN_IF_ERROR(ParseRollout(n, spec.replicas.max, spec.rollout));
  }
  return Ok();
}

}  // namespace

std::string_view ServiceKindName(ServiceKind k) {
  return kKindNames[static_cast<std::size_t>(k)];
}

std::string_view ServiceAccessName(ServiceAccess a) {
  return kAccessNames[static_cast<std::size_t>(a)];
}

std::string_view AutoscaleSignalName(AutoscaleSignal s) {
  return kSignalNames[static_cast<std::size_t>(s)];
}

std::optional<AutoscaleSignal> ParseAutoscaleSignal(std::string_view name) {
  for (std::size_t i = 0; i < kSignalNames.size(); ++i) {
    if (kSignalNames[i] == name) return static_cast<AutoscaleSignal>(i);
  }
  return std::nullopt;
}

std::string FormatMilli(std::int64_t milli) {
  const char* sign = milli < 0 ? "-" : "";
  std::uint64_t m =
      milli < 0 ? static_cast<std::uint64_t>(-(milli + 1)) + 1 : static_cast<std::uint64_t>(milli);
  std::string out = fmt::format("{}{}", sign, m / 1000);
  if (std::uint64_t f = m % 1000; f != 0) {
    std::string frac = fmt::format("{:03}", f);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out;
}

Result<ServiceSpec> ParseServiceSpec(std::string_view text) {
  ServiceSpec spec;
  BERTH_RETURN_IF_ERROR(
      ReadDocument(text, kMaxServiceSpecBytes, "spec",
                   [&](const YAML::Node& root) { return ParseInto(root, spec); }));
  return spec;
}

}  // namespace berth::model
