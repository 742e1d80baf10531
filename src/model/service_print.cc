// The service spec's canonical form: one ordered document, every field and
// default in a fixed order, served as JSON (ToJson) and printed as YAML
// (ServiceToYaml). Both read back through ParseServiceSpec to an equal
// spec, so what is shown is what is checked.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "model/json.h"
#include "model/service.h"

namespace berth::model {
namespace {

using Doc = nlohmann::ordered_json;

std::string Availability(std::uint32_t ppm) {
  std::string out = fmt::format("{}", ppm / 10'000);
  if (std::uint32_t f = ppm % 10'000; f != 0) {
    std::string frac = fmt::format("{:04}", f);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out + "%";
}

Doc ProbeDoc(const Probe& p) {
  Doc d;
  switch (p.kind) {
    case ProbeKind::kHttp:
      d["http"] = p.http_path;
      break;
    case ProbeKind::kTcp:
      d["tcp"] = p.tcp_port;
      break;
    case ProbeKind::kCommand:
      d["command"] = p.command;
      break;
    case ProbeKind::kNone:
      break;
  }
  d["period"] = FormatDurationMs(p.period_ms);
  d["timeout"] = FormatDurationMs(p.timeout_ms);
  d["success_threshold"] = p.success_threshold;
  d["failure_threshold"] = p.failure_threshold;
  return d;
}

Doc Canonical(const ServiceSpec& s) {
  Doc d;
  const bool session = s.kind == ServiceKind::kSession;
  if (session) d["kind"] = std::string(ServiceKindName(s.kind));
  d["name"] = s.name;
  d["tenant"] = s.tenant;
  d["queue"] = s.queue;
  if (!s.image.empty()) d["image"] = s.image;
  if (!s.command.empty()) d["command"] = s.command;
  d["port"] = s.port;
  d["access"] = std::string(ServiceAccessName(s.access));
  if (!s.model.name.empty()) {
    d["model"]["name"] = s.model.name;
    if (!s.model.version.empty()) d["model"]["version"] = s.model.version;
  }
  if (!session) d["replicas"] = Doc{{"min", s.replicas.min}, {"max", s.replicas.max}};
  const auto& r = s.resources;
  d["resources"]["gpus"] =
      r.gpu_share_millis > 0 ? FormatMilli(r.gpu_share_millis) : fmt::format("{}", r.gpus);
  d["resources"]["gpu_memory"] = FormatBytes(r.gpu_memory_bytes);
  d["resources"]["cpu"] = FormatMilli(r.cpu_millis);
  d["resources"]["memory"] = FormatBytes(r.memory_bytes);
  d["gateway"]["hold_timeout"] = FormatDurationMs(s.gateway.hold_timeout_ms);
  if (s.readiness.kind != ProbeKind::kNone) d["readiness"] = ProbeDoc(s.readiness);
  if (s.liveness.kind != ProbeKind::kNone) d["liveness"] = ProbeDoc(s.liveness);
  if (session) {
    d["session"] = Doc{{"max_lifetime", FormatDurationMs(s.session.max_lifetime_ms)},
                       {"idle_window", FormatDurationMs(s.session.idle_window_ms)},
                       {"idle_gpu_utilization", fmt::format("{}%", s.session.idle_gpu_util_pct)}};
    return d;  // one replica: no SLO, autoscaling or rollout
  }
  if (s.slo.latency_p95_ms > 0) d["slo"]["latency_p95_ms"] = s.slo.latency_p95_ms;
  d["slo"]["availability"] = Availability(s.slo.availability_ppm);
  const auto& a = s.autoscaling;
  Doc as;
  as["signal"] = std::string(AutoscaleSignalName(a.signal));
  if (a.signal == AutoscaleSignal::kMetric) as["metric"] = a.metric;
  as["target"] = FormatMilli(a.target_milli);
  as["target_utilization"] = fmt::format("{}%", a.target_utilization_pct);
  as["stable_window"] = FormatDurationMs(a.stable_window_ms);
  as["panic_window"] = FormatDurationMs(a.panic_window_ms);
  as["panic_threshold"] = fmt::format("{}%", a.panic_threshold_pct);
  as["up_stabilization"] = FormatDurationMs(a.up_stabilization_ms);
  as["down_stabilization"] = FormatDurationMs(a.down_stabilization_ms);
  as["scale_to_zero"] = Doc{{"enabled", a.scale_to_zero.enabled},
                            {"idle_window", FormatDurationMs(a.scale_to_zero.idle_window_ms)}};
  d["autoscaling"] = std::move(as);
  d["rollout"]["max_surge"] = s.rollout.max_surge;
  d["rollout"]["max_unavailable"] = s.rollout.max_unavailable;
  if (!s.rollout.canary.empty()) {
    Doc steps = Doc::array();
    for (const auto& c : s.rollout.canary) {
      steps.push_back(Doc{{"weight", fmt::format("{}%", c.weight_pct)},
                          {"pause", FormatDurationMs(c.pause_ms)}});
    }
    d["rollout"]["canary"] = std::move(steps);
  }
  return d;
}

// Lists of scalars print on one line ([a, b]); a canary step list as a
// block of flow maps.
void Emit(YAML::Emitter& out, const Doc& d) {
  if (d.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : d.items()) {
      out << YAML::Key << k << YAML::Value;
      Emit(out, v);
    }
    out << YAML::EndMap;
  } else if (d.is_array()) {
    const bool flat =
        std::all_of(d.begin(), d.end(), [](const Doc& e) { return !e.is_structured(); });
    if (flat) out << YAML::Flow;
    out << YAML::BeginSeq;
    for (const auto& e : d) {
      if (e.is_object()) out << YAML::Flow;
      Emit(out, e);
    }
    out << YAML::EndSeq;
  } else if (d.is_string()) {
    out << d.get<std::string>();
  } else if (d.is_boolean()) {
    out << (d.get<bool>() ? "true" : "false");
  } else {
    out << d.dump();
  }
}

}  // namespace

std::string ServiceToYaml(const ServiceSpec& spec) {
  YAML::Emitter out;
  Emit(out, Canonical(spec));
  return std::string(out.c_str()) + "\n";
}

nlohmann::json ToJson(const ServiceSpec& spec) {
  return nlohmann::json::parse(Canonical(spec).dump());
}

Result<ServiceSpec> ServiceSpecFromJson(const nlohmann::json& j) {
  return ParseServiceSpec(j.dump());
}

}  // namespace berth::model
