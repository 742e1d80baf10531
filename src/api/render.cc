#include "api/render.h"

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/utf8.h"
#include "model/json.h"
#include "model/reason.h"

namespace berth::server {

using nlohmann::json;

namespace {

template <typename T>
json Opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// What a job's full form and its summary both show: who, where, its state
// and why, its times and outcome, and its place in an array.
json JobFieldsJson(const store::JobRecord& job, JobRefs refs) {
  model::Reason reason = job.reason;
  if (refs == JobRefs::kHideOtherTenants) model::HideOtherTenantsJobs(reason);
  json out{{"id", job.id},
           {"name", job.spec.name},
           {"tenant", job.spec.tenant},
           {"queue", job.spec.queue},
           {"submitted_by", job.submitted_by},
           {"state", model::JobStateName(job.state)},
           {"reason", model::ToJson(reason)},
           {"submitted_at_ms", job.submitted_at_ms},
           {"started_at_ms", Opt(job.started_at_ms)},
           {"finished_at_ms", Opt(job.finished_at_ms)},
           {"exit_code", Opt(job.exit_code)},
           {"signal", Opt(job.signal)},
           {"cancel_requested", job.cancel_requested},
           {"failures", job.failures},
           {"retry_after_ms", Opt(job.retry_after_ms)}};
  out["array"] = nullptr;
  if (const auto& a = job.spec.array_element) {
    out["array"] = {{"id", a->id}, {"index", a->index}, {"size", a->size}};
  }
  out["service"] = nullptr;
  if (const auto& o = job.spec.service) {
    out["service"] = {{"name", o->name}, {"revision", o->revision}};
  }
  return out;
}

// One env map as `view` may see it.
json EnvJson(const std::map<std::string, std::string>& env, const std::set<std::string>& secret,
             EnvView view) {
  json out = json::object();
  for (const auto& [key, value] : env) {
    if (secret.contains(key)) {
      out[key] = model::kSecretEnvValue;
    } else if (view != EnvView::kSubmitter) {
      out[key] = model::kHiddenEnvValue;
    } else {
      out[key] = value;
    }
  }
  return out;
}

}  // namespace

json SpecJson(const model::JobSpec& spec, EnvView view) {
  json out = model::ToJson(spec);
  out["env"] = EnvJson(spec.env, spec.secret_env, view);
  // A submitted array's parameter sets are env too (never stored, but a
  // spec rendered before it is expanded shows them no more than env).
  if (spec.array && !spec.array->params.empty()) {
    json params = json::array();
    for (const auto& set : spec.array->params) {
      params.push_back(EnvJson(set, spec.secret_env, view));
    }
    out["array"]["params"] = std::move(params);
  }
  return out;
}

json JobJson(const store::JobRecord& job, bool with_timeline, EnvView view, JobRefs refs) {
  auto run_json = [](const store::RunRecord& r) {
    return json{{"replica", r.replica},
                {"attempt", r.attempt},
                {"run_id", r.run_id},
                {"node", r.node},
                {"gpus", r.gpu_indices},
                {"gpu_uuids", r.gpu_uuids},
                {"gpu_share_mgpu", r.gpu_share_millis},
                {"gpu_share_bytes", r.gpu_share_bytes},
                {"state", model::RunStateName(r.state)},
                {"pid", r.pid == 0 ? json(nullptr) : json(r.pid)},
                {"port", r.port == 0 ? json(nullptr) : json(r.port)},
                {"exit_code", Opt(r.exit_code)},
                {"signal", Opt(r.signal)},
                {"stopped_for", model::StopCauseName(r.stopped_for)},
                {"start_error", r.start_error},
                {"clean_stop", Opt(r.clean_stop)},
                {"last_checkpoint_ms", Opt(r.last_checkpoint_ms)},
                {"failure_class", r.failure_class},
                {"stop_detail", r.stop_detail},
                {"started_at_ms", Opt(r.started_at_ms)},
                {"finished_at_ms", Opt(r.finished_at_ms)}};
  };
  json placement = json::array();
  std::uint32_t attempt = 0;
  for (const auto& r : job.runs) attempt = std::max(attempt, r.attempt);
  for (const auto& r : job.runs) {
    if (r.attempt == attempt) placement.push_back(run_json(r));
  }
  json out = JobFieldsJson(job, refs);
  out["policy_version"] = Opt(job.policy_version);
  out["spec"] = SpecJson(job.spec, view);
  out["placement"] = std::move(placement);
  if (with_timeline) {
    // Every attempt's runs: how earlier attempts ended (a clean checkpointed
    // stop, a kill after the grace period) explains the current one.
    json runs = json::array();
    for (const auto& r : job.runs) runs.push_back(run_json(r));
    out["runs"] = std::move(runs);
    json timeline = json::array();
    for (const auto& e : job.timeline) {
      timeline.push_back({{"time_ms", e.time_ms},
                          {"state", model::JobStateName(e.state)},
                          {"event", e.event},
                          {"message", e.message},
                          {"policy_version", Opt(e.policy_version)}});
    }
    out["timeline"] = timeline;
  }
  return out;
}

json JobSummaryJson(const store::JobRecord& job, JobRefs refs) {
  const model::Resources& r = job.spec.resources;
  json out = JobFieldsJson(job, refs);
  out["priority"] = model::PriorityName(job.spec.priority);
  out["replicas"] = job.spec.replicas;
  out["resources"] = {{"gpus", r.gpus},
                      {"gpu_model", r.gpu_model},
                      {"gpu_share_millis", r.gpu_share_millis},
                      {"gpu_share_bytes", r.gpu_share_bytes}};
  return out;
}

json CordonJson(const std::optional<store::Cordon>& c) {
  if (!c) return nullptr;
  return {{"kind", model::CordonKindName(c->kind)},
          {"reason", c->reason},
          {"by", c->by},
          {"automatic", c->automatic},
          {"at_ms", c->at_ms}};
}

json NodeJson(const NodeStatus& n, const std::vector<store::RunRecord>& active) {
  const auto& info = n.record.info;
  std::set<std::uint32_t> held;
  for (const auto& r : active) {
    if (r.node == info.name) held.insert(r.gpu_indices.begin(), r.gpu_indices.end());
  }
  std::set<std::string> models;
  std::size_t free = 0;
  for (const auto& g : info.gpus) {
    models.insert(g.model);
    if (!held.contains(g.index) && g.health == model::Health::kHealthy &&
        !n.record.gpu_cordons.contains(g.index) && !n.record.cordon) {
      ++free;
    }
  }
  json j = model::ToJson(info);
  j.erase("gpus");
  j["state"] = model::NodeStateName(n.record.state);
  j["state_changed_ms"] = n.record.state_changed_ms;
  j["connected"] = n.connected;
  j["last_heartbeat_ms"] = n.last_heartbeat_ms;
  j["gpus_total"] = info.gpus.size();
  j["gpus_free"] = free;
  j["models"] = models;
  j["cordon"] = CordonJson(n.record.cordon);
  j["gpus_cordoned"] = n.record.gpu_cordons.size();
  return j;
}

json GpusJson(const std::vector<NodeStatus>& nodes, const std::vector<store::JobRecord>& holders,
              const std::function<bool(std::string_view tenant)>& visible) {
  // The live runs of each node, in the holders' order: a GPU looks only at
  // its own node's, not at every run of the fleet.
  std::unordered_map<std::string_view,
                     std::vector<std::pair<const store::JobRecord*, const store::RunRecord*>>>
      runs_on;
  for (const auto& job : holders) {
    for (const auto& r : job.runs) {
      if (r.state != model::RunState::kExited) runs_on[r.node].emplace_back(&job, &r);
    }
  }
  static const std::vector<std::pair<const store::JobRecord*, const store::RunRecord*>> kNone;
  json out = json::array();
  for (const auto& n : nodes) {
    const auto here = runs_on.find(n.record.info.name);
    const auto& node_runs = here == runs_on.end() ? kNone : here->second;
    for (const auto& g : n.record.info.gpus) {
      json holder = nullptr;          // a whole-GPU run
      json slices = json::array();    // runs holding slices of a sharing GPU
      std::uint64_t shared_mgpu = 0;  // what the slices hold
      std::uint64_t shared_bytes = 0;
      for (const auto& [job_ptr, run_ptr] : node_runs) {
        const auto& job = *job_ptr;
        const auto& r = *run_ptr;
        if (std::find(r.gpu_indices.begin(), r.gpu_indices.end(), g.index) == r.gpu_indices.end()) {
          continue;
        }
        json h = {{"id", job.id},
                  {"name", job.spec.name},
                  {"tenant", job.spec.tenant},
                  {"queue", job.spec.queue},
                  {"replica", r.replica},
                  {"run_id", r.run_id}};
        if (visible && !visible(job.spec.tenant)) {
          h = {{"id", nullptr},
               {"name", "another tenant"},
               {"tenant", nullptr},
               {"queue", nullptr},
               {"other_tenant", true}};
        }
        if (r.gpu_share_millis == 0) {
          holder = std::move(h);
          continue;
        }
        h["gpu_share_mgpu"] = r.gpu_share_millis;
        h["gpu_memory_bytes"] = r.gpu_share_bytes;
        shared_mgpu += r.gpu_share_millis;
        shared_bytes += r.gpu_share_bytes;
        slices.push_back(std::move(h));
      }
      json sharing = nullptr;
      if (g.sharing) {
        sharing = {{"used_mgpu", shared_mgpu},
                   {"used_memory_bytes", shared_bytes},
                   {"free_memory_bytes", holder.is_null() && shared_bytes <= g.memory_bytes
                                             ? g.memory_bytes - shared_bytes
                                             : 0},
                   {"holders", slices}};
      }
      out.push_back({{"node", n.record.info.name},
                     {"node_state", model::NodeStateName(n.record.state)},
                     {"index", g.index},
                     {"uuid", g.uuid},
                     {"model", g.model},
                     {"memory_bytes", g.memory_bytes},
                     {"health", model::HealthName(g.health)},
                     {"health_detail", g.health_detail},
                     {"cordon", CordonJson(n.record.cordon ? n.record.cordon
                                           : n.record.gpu_cordons.contains(g.index)
                                               ? std::optional<store::Cordon>(
                                                     n.record.gpu_cordons.at(g.index))
                                               : std::nullopt)},
                     {"nvlink_island", g.nvlink_island},
                     {"numa_node", g.numa_node},
                     {"job", holder},
                     {"sharing", sharing}});
    }
  }
  return out;
}

json PolicyJson(const model::Policy& policy) {
  json pools = json::array();
  for (const auto& p : policy.pools) {
    pools.push_back({{"name", p.name},
                     {"selector", p.selector},
                     {"inference_headroom_gpus", p.inference_headroom_gpus}});
  }
  json classes = json::array();
  for (const auto& c : policy.priority_classes) {
    classes.push_back({{"name", c.name}, {"value", c.value}, {"preemptible", c.preemptible}});
  }
  json queues = json::array();
  for (const auto& q : policy.queues) {
    json quota = json::object();
    for (const auto& [key, v] : q.quota) {
      quota[model::ResourceKeyName(key)] = {{"guaranteed", v.guaranteed},
                                            {"borrow_limit", Opt(v.borrow_limit)},
                                            {"weight", v.weight},
                                            {"lending_limit", v.lending_limit}};
    }
    std::string_view over = q.over_quota == model::OverQuota::kWait     ? "wait"
                            : q.over_quota == model::OverQuota::kReject ? "reject"
                                                                        : "borrow";
    queues.push_back(
        {{"path", q.path},
         {"tenant", q.tenant},
         {"parent", q.parent},
         {"kind", q.kind},
         {"pools", q.pools},
         {"quota", quota},
         {"over_quota", over},
         {"preemptible", q.preemptible_by_default},
         {"max_session_lifetime_ms",
          q.max_session_lifetime_ms ? json(*q.max_session_lifetime_ms) : json(nullptr)},
         {"retry_max_attempts", Opt(q.retry.max_attempts)}});
  }
  return json{{"usage_half_life_ms", policy.usage_half_life_ms},
              {"min_runtime_ms", policy.min_runtime_ms},
              {"reclaim_grace_ms", policy.reclaim_grace_ms},
              {"short_first_max_wait_ms", policy.short_first_max_wait_ms},
              {"retry_max_attempts", Opt(policy.retry.max_attempts)},
              {"pools", pools},
              {"priority_classes", classes},
              {"queues", queues}};
}

json PolicyVersionJson(const store::PolicyVersion& v, std::int64_t active, bool full) {
  json out{{"version", v.version},          {"active", v.version == active},
           {"applied_at_ms", v.applied_ms}, {"applied_by", v.applied_by},
           {"comment", v.comment},          {"rolled_back_from", Opt(v.rolled_back_from)},
           {"restores", Opt(v.restores)}};
  if (full) {
    out["yaml"] = v.yaml;
    out["normalized"] = v.normalized;
    out["policy"] = PolicyJson(v.policy);
  }
  return out;
}

json ErrorJson(const Error& e) {
  // The parsers name odd bytes escaped; this keeps any error that still
  // quotes one from failing to be written (a 500 in place of its status).
  json err{{"code", CodeName(e.code)}, {"message", EscapeInvalidUtf8(e.message)}};
  if (!e.field.empty()) err["field"] = EscapeInvalidUtf8(e.field);
  return json{{"error", err}};
}

}  // namespace berth::server
