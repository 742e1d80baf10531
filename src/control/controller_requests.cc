// The controller's answers to the API: submissions and their quota checks,
// cancels, nodes, logs and outputs.
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "control/agent_decode.h"
#include "control/controller.h"
#include "control/job_token.h"
#include "control/lifecycle.h"
#include "control/run_log.h"
#include "control/snapshot_builder.h"
#include "meter/alerting.h"
#include "meter/metrics.h"
#include "model/failure.h"
#include "proto_convert/node.h"

namespace berth::server {
Result<std::vector<std::int64_t>> Controller::Submit(
    const model::JobSpec& spec, std::string_view submitted_by,
    const store::AuditOf<std::vector<std::int64_t>>& audit) {
  auto policy = ActivePolicy();
  if (!policy) return std::unexpected(policy.error());
  if ((*policy)->policy.FindQueue(spec.tenant + "/" + spec.queue) == nullptr) {
    return InvalidField("queue",
                        store::UnknownQueueMessage((*policy)->policy, spec.tenant, spec.queue));
  }
  if (!spec.resources.gpu_model.empty()) {
    auto nodes = store_.ListNodes();
    if (!nodes) return std::unexpected(nodes.error());
    std::set<std::string> models;
    for (const auto& n : *nodes) {
      for (const auto& g : n.info.gpus) models.insert(g.model);
    }
    if (!nodes->empty() && !models.contains(spec.resources.gpu_model)) {
      std::string known;
      for (const auto& m : models) known += (known.empty() ? "" : ", ") + m;
      return InvalidField("resources.gpu_model",
                          fmt::format("no node has a GPU of model '{}'; models in this cluster: {}",
                                      spec.resources.gpu_model, known.empty() ? "none" : known));
    }
  }
  BERTH_RETURN_IF_ERROR(model::CheckStorageGrants((*policy)->policy, spec));
  BERTH_RETURN_IF_ERROR(CheckRejectQuota((*policy)->policy, spec));
  auto ids = store_.CreateJobs(spec, clock_.NowMs(), submitted_by, audit);
  if (!ids) return std::unexpected(ids.error());
  for (std::int64_t id : *ids) {
    store::Publish(store_.change_feed(), store::Topic::kJob, std::to_string(id), spec.tenant,
                   spec.queue, std::string(model::JobStateName(model::JobState::kPending)));
  }
  Wake();
  return ids;
}

namespace {

// What a job asks for against quota at submit time, before any placement:
// GPUs (whole, or a share slice) overall and under its GPU model when it
// names one, CPU and RAM; all replicas together. A memory-sized slice has
// no milli-GPU figure before it is placed and counts nothing here.
std::map<model::ResourceKey, std::int64_t> SubmitDemand(const model::JobSpec& spec) {
  std::map<model::ResourceKey, std::int64_t> d;
  const auto& r = spec.resources;
  // An array asks for all its elements at once.
  const std::int64_t replicas = std::int64_t{spec.replicas} * model::JobCount(spec);
  std::int64_t mgpu =
      model::IsSlice(r) ? std::int64_t{r.gpu_share_millis} : std::int64_t{r.gpus} * 1000;
  if (mgpu > 0) {
    d[{model::ResourceKind::kGpus, ""}] += mgpu * replicas;
    if (!r.gpu_model.empty()) d[{model::ResourceKind::kGpus, r.gpu_model}] += mgpu * replicas;
  }
  if (r.cpu_millis > 0) d[{model::ResourceKind::kCpu, ""}] += std::int64_t{r.cpu_millis} * replicas;
  if (r.memory_bytes > 0) {
    d[{model::ResourceKind::kMemory, ""}] += static_cast<std::int64_t>(r.memory_bytes) * replicas;
  }
  return d;
}

}  // namespace

Status Controller::CheckRejectQuota(const model::Policy& policy, const model::JobSpec& spec) {
  const std::string path = spec.tenant + "/" + spec.queue;
  // The queue and its ancestors that refuse work over their guarantee.
  std::vector<const model::QueuePolicy*> rejecting;
  for (const model::QueuePolicy* q = policy.FindQueue(path); q != nullptr;
       q = q->parent.empty() ? nullptr : policy.FindQueue(q->parent)) {
    if (q->over_quota == model::OverQuota::kReject && !q->quota.empty()) rejecting.push_back(q);
  }
  if (rejecting.empty()) return Ok();
  const auto demand = SubmitDemand(spec);
  if (demand.empty()) return Ok();
  store::JobFilter filter;
  filter.states = {model::JobState::kPending, model::JobState::kScheduled,
                   model::JobState::kRunning};
  filter.tenant = spec.tenant;
  filter.limit = std::numeric_limits<std::int32_t>::max();
  auto jobs = store_.ListJobs(filter);
  if (!jobs) return std::unexpected(jobs.error());
  for (const model::QueuePolicy* q : rejecting) {
    std::map<model::ResourceKey, std::int64_t> held;
    for (const auto& job : *jobs) {
      std::string job_path = job.spec.tenant + "/" + job.spec.queue;
      if (job_path != q->path && !job_path.starts_with(q->path + "/")) continue;
      for (const auto& [key, v] : SubmitDemand(job.spec)) held[key] += v;
    }
    for (const auto& [key, quota] : q->quota) {
      auto want = demand.find(key);
      if (want == demand.end()) continue;
      const std::int64_t in_use = held[key];
      if (in_use + want->second <= quota.guaranteed) continue;
      auto amount = [&](std::int64_t v) { return model::FormatQuotaAmount(key.kind, v); };
      return Fail(
          Code::kFailedPrecondition,
          fmt::format("queue {} refuses work over its quota (over_quota: reject): this job asks "
                      "for {} {}, its pending and running jobs already hold {} of {} guaranteed, "
                      "and {} + {} is over {}; nothing was submitted. Submit a smaller job, wait "
                      "for jobs to finish, or ask for more (berth quota request {} --resource {} "
                      "--guaranteed N --reason ...)",
                      q->path, amount(want->second), model::ResourceKeyName(key), amount(in_use),
                      amount(quota.guaranteed), amount(in_use), amount(want->second),
                      amount(quota.guaranteed), q->path, model::ResourceKeyName(key)),
          "resources");
    }
  }
  return Ok();
}

Result<store::ArrayCancel> Controller::CancelArray(
    std::int64_t array_id, const std::string& by, const store::AuditOf<store::ArrayCancel>& audit) {
  auto done = control::CancelArray(store_, array_id, by, clock_.NowMs(), audit);
  if (!done) return done;
  if (metrics_ != nullptr) {
    for (std::size_t i = 0; i < done->cancelled; ++i) {
      metrics_->CountOutcome(done->tenant,
                             std::string(model::JobStateName(model::JobState::kCancelled)), "");
    }
  }
  Wake();
  return done;
}

Result<store::JobRecord> Controller::Cancel(
    std::int64_t job_id, const std::string& by,
    const store::AuditOf<store::JobRecord, store::JobRecord>& audit) {
  const TimeMs now = clock_.NowMs();
  auto job = control::CancelJob(store_, job_id, by, now, audit);
  if (job) {
    CountOutcome(*job, now);
    Wake();
  }
  return job;
}

Result<std::vector<NodeStatus>> Controller::Nodes() {
  auto nodes = store_.ListNodes();
  if (!nodes) return std::unexpected(nodes.error());
  std::vector<NodeStatus> out;
  std::lock_guard lock(mu_);
  for (auto& n : *nodes) {
    NodeStatus s{std::move(n), false, 0};
    if (auto it = live_.find(s.record.info.name); it != live_.end()) {
      s.connected = it->second.session != nullptr;
      s.last_heartbeat_ms = it->second.last_heartbeat_ms;
      s.record.state = it->second.ready ? model::NodeState::kReady : model::NodeState::kNotReady;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::filesystem::path Controller::LogPath(std::int64_t job_id, const std::string& run_id) const {
  return options_.log_dir / std::to_string(job_id) / (run_id + ".log");
}

std::string Controller::LogTail(const store::JobRecord& job, const std::string& run_id,
                                std::size_t bytes) {
  return RunLogTail(LogPath(job.id, run_id), bytes, LogLimitFor(job.spec.tenant));
}

std::uint64_t Controller::LogLimitFor(std::string_view tenant) {
  auto active = ActivePolicy();
  if (!active) return options_.log_limit_bytes;
  const model::EffectiveLimit limit =
      model::LimitOf((*active)->policy, tenant, &model::Limits::log_bytes_per_run);
  if (limit.setting.empty()) return options_.log_limit_bytes;
  return static_cast<std::uint64_t>(limit.value);
}

void Controller::ClassifyExit(store::RunExit& exit, std::int64_t job_id) {
  if (store::RunLost(exit.stopped_for)) {
    // Stopped by its own agent, cut off from berthd: the node's fault.
    exit.failure_class = model::FailureClassName(model::FailureClass::kNodeLost);
    return;
  }
  if (exit.oom_kills > 0 && exit.start_error.empty()) {
    // The kernel's own count in the run's cgroup: nothing the job printed.
    exit.failure_class = model::FailureClassName(model::FailureClass::kHostOutOfMemory);
    return;
  }
  if (!exit.start_error.empty()) {
    if (exit.failure_class.empty()) {  // run_identity, from the agent, stays
      exit.failure_class = model::FailureClassName(model::FailureClass::kCommandNotFound);
    }
    return;
  }
  if (exit.exit_code == 0 && exit.signal == 0) return;
  // The agent ships every byte of the log before the exit, so the tail is
  // complete here; the class decides whether the retry policy retries.
  model::Reason r{model::ReasonCode::kFailedExitCode, {}, {}};
  if (exit.signal != 0) {
    r.counts["signal"] = exit.signal;
  } else {
    r.counts["exit_code"] = exit.exit_code;
  }
  auto tenant = store_.JobTenant(job_id);
  const std::uint64_t limit = tenant ? LogLimitFor(*tenant) : options_.log_limit_bytes;
  const std::string tail = RunLogTail(LogPath(job_id, exit.run_id), kFailureTailBytes, limit);
  if (auto f = model::ClassifyFailure(r, tail)) {
    exit.failure_class = model::FailureClassName(f->cls);
  }
}

Result<berth::v1::OutputReply> Controller::AskOutputs(const std::string& node,
                                                      berth::v1::OutputRequest req) {
  std::shared_ptr<AgentSession> session;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(node); it != live_.end() && it->second.ready) {
      session = it->second.session;
    }
  }
  if (session == nullptr) {
    return Fail(Code::kUnavailable,
                fmt::format("node {} is not connected, and a run's outputs stay on the node that "
                            "ran it; try again once it is back (berth node {})",
                            node, node));
  }
  return outputs_.Ask(*session, std::move(req));
}

}  // namespace berth::server
