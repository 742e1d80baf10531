#include "api/history.h"

#include "model/json.h"
#include "sim/history.h"

namespace berth::server {
namespace {

using nlohmann::json;

json Opt(const std::optional<std::int64_t>& v) {
  return v ? json(*v) : json(nullptr);
}
json Opt(const std::optional<std::int32_t>& v) {
  return v ? json(*v) : json(nullptr);
}

json RunJson(const store::RunRecord& r) {
  return json{{"run_id", r.run_id},
              {"replica", r.replica},
              {"attempt", r.attempt},
              {"node", r.node},
              {"gpus", r.gpu_indices},
              {"gpu_share_millis", r.gpu_share_millis},
              {"gpu_share_bytes", r.gpu_share_bytes},
              {"state", model::RunStateName(r.state)},
              {"started_ms", Opt(r.started_at_ms)},
              {"finished_ms", Opt(r.finished_at_ms)},
              {"exit_code", Opt(r.exit_code)},
              {"signal", Opt(r.signal)},
              {"stopped_for", model::StopCauseName(r.stopped_for)},
              {"start_error", r.start_error}};
}

json JobJson(const store::JobRecord& job) {
  const model::JobSpec& s = job.spec;
  json runs = json::array();
  for (const auto& r : job.runs) runs.push_back(RunJson(r));
  return json{{"id", job.id},
              {"name", s.name},
              {"tenant", s.tenant},
              {"queue", s.queue},
              {"priority", model::PriorityName(s.priority)},
              {"replicas", s.replicas},
              {"resources", model::ToJson(s.resources)},
              {"preemptible", s.preemptible ? json(*s.preemptible) : json(nullptr)},
              {"max_runtime_ms", s.max_runtime_ms},
              {"pool", s.pool},
              {"state", model::JobStateName(job.state)},
              {"submitted_ms", job.submitted_at_ms},
              {"started_ms", Opt(job.started_at_ms)},
              {"finished_ms", Opt(job.finished_at_ms)},
              {"exit_code", Opt(job.exit_code)},
              {"signal", Opt(job.signal)},
              {"runs", runs}};
}

}  // namespace

json HistoryJson(const std::vector<store::JobRecord>& jobs,
                 const std::vector<store::NodeRecord>& nodes, const store::PolicyVersion& policy,
                 TimeMs since_ms, TimeMs until_ms, TimeMs now_ms) {
  json node_list = json::array();
  for (const auto& n : nodes) {
    json j = model::ToJson(n.info);
    j["state"] = model::NodeStateName(n.state);
    node_list.push_back(std::move(j));
  }
  json job_list = json::array();
  for (const auto& job : jobs) job_list.push_back(JobJson(job));
  return json{{"format", sim::kHistoryFormat},
              {"since_ms", since_ms},
              {"until_ms", until_ms},
              {"exported_ms", now_ms},
              {"policy", {{"version", policy.version}, {"yaml", policy.yaml}}},
              {"nodes", node_list},
              {"jobs", job_list}};
}

}  // namespace berth::server
