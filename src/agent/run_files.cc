#include "agent/run_files.h"

#include <nlohmann/json.hpp>

#include "model/probe_json.h"

namespace berth::agent {
namespace {

using nlohmann::json;

// nlohmann reports type mismatches by exception; they stop here.
template <typename T, typename Fn>
Result<T> ParseWith(std::string_view text, std::string_view what, Fn&& fn) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) return Fail(Code::kInternal, std::string(what) + ": not a JSON object");
    return fn(j);
  } catch (const json::exception& e) {
    return Fail(Code::kInternal, std::string(what) + ": " + e.what());
  }
}

// Proto strings are UTF-8 already; `replace` only guards against a throw.
std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string ToJson(const ShimSpec& spec) {
  return Dump(json{{"command", spec.command},
                   {"env", spec.env},
                   {"working_dir", spec.working_dir},
                   {"log_path", spec.log_path},
                   {"podman", spec.podman},
                   {"image", spec.image},
                   {"container_name", spec.container_name},
                   {"pull_timeout_ms", spec.pull_timeout_ms},
                   {"set_identity", spec.set_identity},
                   {"uid", spec.uid},
                   {"gid", spec.gid},
                   {"groups", spec.groups},
                   {"cgroup_parent", spec.cgroup_parent},
                   {"cgroup_name", spec.cgroup_name},
                   {"memory_limit_bytes", spec.memory_limit_bytes},
                   {"cpu_millis", spec.cpu_millis},
                   {"pids_max", spec.pids_max},
                   {"devices", spec.devices}});
}

std::string ToJson(const PidRecord& rec) {
  return Dump(json{{"shim_pid", rec.shim_pid},
                   {"pid", rec.pid},
                   {"pgid", rec.pgid},
                   {"started_at_ms", rec.started_at_ms}});
}

std::string ToJson(const ExitRecord& rec) {
  return Dump(json{{"exit_code", rec.exit_code},
                   {"signal", rec.signal},
                   {"started_at_ms", rec.started_at_ms},
                   {"ended_at_ms", rec.ended_at_ms},
                   {"start_error", rec.start_error},
                   {"oom_kills", rec.oom_kills},
                   {"memory_peak_bytes", rec.memory_peak_bytes},
                   {"memory_limit_bytes", rec.memory_limit_bytes},
                   {"leftover_processes", rec.leftover_processes},
                   {"identity_refused", rec.identity_refused}});
}

std::string ToJson(const OrderRecord& rec) {
  return Dump(json{{"run_id", rec.run_id},
                   {"job_id", rec.job_id},
                   {"replica", rec.replica},
                   {"attempt", rec.attempt},
                   {"gpu_indices", rec.gpu_indices},
                   {"gpu_uuids", rec.gpu_uuids},
                   {"max_runtime_ms", rec.max_runtime_ms},
                   {"grace_ms", rec.grace_ms},
                   {"stop_signal", rec.stop_signal},
                   {"checkpoint_file", rec.checkpoint_file},
                   {"image", rec.image},
                   {"created_at_ms", rec.created_at_ms},
                   {"gpu_share_millis", rec.gpu_share_millis},
                   {"gpu_share_bytes", rec.gpu_share_bytes},
                   {"port", rec.port},
                   {"service_port", rec.service_port},
                   {"readiness", model::ToJson(rec.readiness)},
                   {"liveness", model::ToJson(rec.liveness)},
                   {"load",
                    {{"pattern", static_cast<int>(rec.load.pattern)},
                     {"util_pct", rec.load.util_pct},
                     {"idle_util_pct", rec.load.idle_util_pct},
                     {"memory_pct", rec.load.memory_pct},
                     {"period_ms", rec.load.period_ms},
                     {"idle_after_ms", rec.load.idle_after_ms}}}});
}

std::string ToJson(const StopRecord& rec) {
  return Dump(json{{"reason", rec.reason},
                   {"requested_at_ms", rec.requested_at_ms},
                   {"grace_ms", rec.grace_ms},
                   {"killed_at_ms", rec.killed_at_ms}});
}

Result<ShimSpec> ParseShimSpec(std::string_view text) {
  return ParseWith<ShimSpec>(text, "spec.json", [](const json& j) -> Result<ShimSpec> {
    ShimSpec s;
    j.at("command").get_to(s.command);
    if (j.contains("env")) j.at("env").get_to(s.env);
    s.working_dir = j.value("working_dir", "");
    j.at("log_path").get_to(s.log_path);
    s.podman = j.value("podman", "");
    s.image = j.value("image", "");
    s.container_name = j.value("container_name", "");
    s.pull_timeout_ms = j.value("pull_timeout_ms", std::int64_t{0});
    s.set_identity = j.value("set_identity", false);
    s.uid = j.value("uid", std::uint32_t{0});
    s.gid = j.value("gid", std::uint32_t{0});
    if (j.contains("groups")) j.at("groups").get_to(s.groups);
    s.cgroup_parent = j.value("cgroup_parent", "");
    s.cgroup_name = j.value("cgroup_name", "");
    s.memory_limit_bytes = j.value("memory_limit_bytes", std::uint64_t{0});
    s.cpu_millis = j.value("cpu_millis", std::uint32_t{0});
    s.pids_max = j.value("pids_max", std::uint32_t{0});
    if (j.contains("devices")) j.at("devices").get_to(s.devices);
    return s;
  });
}

Result<PidRecord> ParsePidRecord(std::string_view text) {
  return ParseWith<PidRecord>(text, "pid.json", [](const json& j) -> Result<PidRecord> {
    PidRecord r;
    j.at("shim_pid").get_to(r.shim_pid);
    j.at("pid").get_to(r.pid);
    j.at("pgid").get_to(r.pgid);
    j.at("started_at_ms").get_to(r.started_at_ms);
    return r;
  });
}

Result<ExitRecord> ParseExitRecord(std::string_view text) {
  return ParseWith<ExitRecord>(text, "exit.json", [](const json& j) -> Result<ExitRecord> {
    ExitRecord r;
    j.at("exit_code").get_to(r.exit_code);
    j.at("signal").get_to(r.signal);
    j.at("started_at_ms").get_to(r.started_at_ms);
    j.at("ended_at_ms").get_to(r.ended_at_ms);
    r.start_error = j.value("start_error", "");
    r.oom_kills = j.value("oom_kills", std::uint64_t{0});
    r.memory_peak_bytes = j.value("memory_peak_bytes", std::uint64_t{0});
    r.memory_limit_bytes = j.value("memory_limit_bytes", std::uint64_t{0});
    r.leftover_processes = j.value("leftover_processes", std::uint32_t{0});
    r.identity_refused = j.value("identity_refused", false);
    return r;
  });
}

Result<OrderRecord> ParseOrderRecord(std::string_view text) {
  return ParseWith<OrderRecord>(text, "order.json", [](const json& j) -> Result<OrderRecord> {
    OrderRecord r;
    j.at("run_id").get_to(r.run_id);
    r.job_id = j.value("job_id", std::int64_t{0});
    r.replica = j.value("replica", std::uint32_t{0});
    r.attempt = j.value("attempt", std::uint32_t{0});
    if (j.contains("gpu_indices")) j.at("gpu_indices").get_to(r.gpu_indices);
    if (j.contains("gpu_uuids")) j.at("gpu_uuids").get_to(r.gpu_uuids);
    r.max_runtime_ms = j.value("max_runtime_ms", std::int64_t{0});
    r.grace_ms = j.value("grace_ms", std::int64_t{0});
    r.stop_signal = j.value("stop_signal", "");
    r.checkpoint_file = j.value("checkpoint_file", "");
    r.image = j.value("image", "");
    r.created_at_ms = j.value("created_at_ms", std::int64_t{0});
    r.gpu_share_millis = j.value("gpu_share_millis", std::uint32_t{0});
    r.gpu_share_bytes = j.value("gpu_share_bytes", std::uint64_t{0});
    r.port = j.value("port", std::uint32_t{0});
    r.service_port = j.value("service_port", std::uint32_t{0});
    if (auto p = j.find("readiness"); p != j.end()) r.readiness = model::ProbeFromJson(*p);
    if (auto p = j.find("liveness"); p != j.end()) r.liveness = model::ProbeFromJson(*p);
    // Orders written before telemetry have no load: the default profile.
    if (auto l = j.find("load"); l != j.end() && l->is_object()) {
      const int pattern = l->value("pattern", 0);
      r.load.pattern = pattern == 1   ? model::LoadPattern::kPeriodic
                       : pattern == 2 ? model::LoadPattern::kIdle
                                      : model::LoadPattern::kSteady;
      r.load.util_pct = l->value("util_pct", r.load.util_pct);
      r.load.idle_util_pct = l->value("idle_util_pct", r.load.idle_util_pct);
      r.load.memory_pct = l->value("memory_pct", r.load.memory_pct);
      r.load.period_ms = l->value("period_ms", r.load.period_ms);
      r.load.idle_after_ms = l->value("idle_after_ms", r.load.idle_after_ms);
    }
    return r;
  });
}

Result<StopRecord> ParseStopRecord(std::string_view text) {
  return ParseWith<StopRecord>(text, "stop.json", [](const json& j) -> Result<StopRecord> {
    StopRecord r;
    j.at("reason").get_to(r.reason);
    j.at("requested_at_ms").get_to(r.requested_at_ms);
    r.grace_ms = j.value("grace_ms", std::int64_t{0});
    r.killed_at_ms = j.value("killed_at_ms", std::int64_t{0});
    return r;
  });
}

}  // namespace berth::agent
