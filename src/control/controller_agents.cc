// The controller's side of the agent stream: registration, heartbeats,
// telemetry, run starts and exits, checkpoints, GPU health, cordons and logs.
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
namespace {

berth::v1::ServerMessage AckOf(const std::string& run_id) {
  berth::v1::ServerMessage msg;
  msg.mutable_ack_exit()->set_run_id(run_id);
  return msg;
}

// torchrun's environment for one replica of a gang, so `torch.distributed`
// (init_method env://) and launchers that read it work unchanged. Each
// replica is one rank; ranks are contiguous per node, nodes ordered by their
// lowest replica, so RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK when
// every node holds the same number of replicas. MASTER_ADDR is the host of
// rank 0; MASTER_PORT is derived from the job id (29500 + id mod 20000) so
// concurrent gangs rarely meet on one host. A job's own env wins.
}  // namespace

Status Controller::OnRegister(const berth::v1::Register& reg,
                              const std::shared_ptr<AgentSession>& session,
                              std::optional<TimeMs> cert_not_before_ms) {
  std::lock_guard membership(membership_mu_);
  TimeMs now = clock_.NowMs();
  model::NodeInfo info = proto_convert::NodeFromProto(reg.node());
  if (cert_not_before_ms) BERTH_RETURN_IF_ERROR(CheckNodeCert(info.name, *cert_not_before_ms));
  BERTH_RETURN_IF_ERROR(CheckNodeInventory(info));
  for (const auto& g : reg.node().gpus()) {
    // Kept out of placement, not cordoned (as in OnGpuHealth); said here so
    // an operator sees why.
    auto health = proto_convert::HealthFromWire(g.health(), g.health_detail());
    if (!health.known) spdlog::warn("node {} GPU {}: {}", info.name, g.index(), health.detail);
  }
  BERTH_RETURN_IF_ERROR(store_.UpsertNode(info, now));
  store::Publish(store_.change_feed(), store::Topic::kNode, info.name, {}, {}, "registered");
  spdlog::info("node {} registered: {} GPUs ({}), {} runs reported", info.name, info.gpus.size(),
               info.gpu_provider, reg.runs_size());

  // Reconcile what the agent reports against what the store says.
  std::set<std::string> reported;
  std::vector<berth::v1::ServerMessage> replies;
  berth::v1::ServerMessage hello;
  auto* registered = hello.mutable_registered();
  for (const auto& r : reg.runs()) {
    reported.insert(r.run_id());
    auto run = store_.GetRun(r.run_id());
    if (!run) return std::unexpected(run.error());
    std::uint64_t have = 0;
    if (*run) {
      // Every byte received, the dropped middle of a long log included: the
      // agent resumes after it.
      have = RunLogReceived(LogPath((*run)->job_id, r.run_id()));
    }
    (*registered->mutable_log_offsets())[r.run_id()] = have;
    if (r.phase() == berth::v1::RunStatus::EXITED) {
      if (*run) {
        // As in OnRunExited: the log is durable before the exit is.
        BERTH_RETURN_IF_ERROR(SyncRunLog(LogPath((*run)->job_id, r.run_id())));
        if ((*run)->state == model::RunState::kStarting && r.exit().started_at_ms() != 0) {
          BERTH_RETURN_IF_ERROR(control::MarkRunStarted(store_, r.run_id(), r.pid(),
                                                        r.exit().started_at_ms(), now, r.port()));
        }
        store::RunExit exit = ExitFromProto(r.exit());
        ClassifyExit(exit, (*run)->job_id);
        auto job = MarkRunExitedUnderPolicy(exit, now);
        if (!job) return std::unexpected(job.error());
        CountOutcome(*job, now);
      }
      replies.push_back(AckOf(r.run_id()));
      continue;
    }
    // Running on the agent.
    if (!*run || (*run)->state == model::RunState::kExited) {
      // Berth does not know this process (or already settled it): stop it.
      berth::v1::ServerMessage stop;
      stop.mutable_stop_run()->set_run_id(r.run_id());
      stop.mutable_stop_run()->set_reason("unknown to berthd");
      stop.mutable_stop_run()->set_grace_ms(options_.stop_grace_ms);
      replies.push_back(std::move(stop));
      continue;
    }
    // pid 0: accepted by the agent but not started yet; RunStarted follows.
    if ((*run)->state == model::RunState::kStarting && r.pid() != 0) {
      BERTH_RETURN_IF_ERROR(
          control::MarkRunStarted(store_, r.run_id(), r.pid(), r.started_at_ms(), now, r.port()));
    }
    // A replica's readiness as its agent's probes say it now (unset: no
    // verdict since the agent started; what berthd holds stands).
    if (r.has_ready() && (*run)->ready != r.ready()) {
      BERTH_RETURN_IF_ERROR(control::MarkRunHealth(
          store_, r.run_id(), r.ready(), false,
          r.ready() ? "ready when its agent registered" : "not ready when its agent registered",
          now));
    }
  }
  // Runs the store believes are running here that the agent no longer knows.
  auto active = store_.ActiveRuns();
  if (!active) return std::unexpected(active.error());
  for (const auto& run : *active) {
    if (run.node != info.name || reported.contains(run.run_id)) continue;
    if (run.state != model::RunState::kRunning) continue;  // Starting: re-sent below
    store::RunExit lost;
    lost.run_id = run.run_id;
    lost.exit_code = -1;
    lost.ended_at_ms = now;
    lost.stopped_for = model::StopCause::kLost;
    lost.start_error = fmt::format("the agent on {} no longer knows this run", info.name);
    auto job = MarkRunExitedUnderPolicy(lost, now);
    if (!job) return std::unexpected(job.error());
    CountOutcome(*job, now);
  }

  registered->set_node_name(info.name);
  registered->set_lease_ms(options_.lease_ms);
  registered->set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  session->Send(hello);
  for (const auto& m : replies) session->Send(m);

  {
    std::lock_guard lock(mu_);
    auto& live = live_[info.name];
    live.session = session;
    live.last_heartbeat_ms = now;
    live.ready = true;
    live.start_sent.clear();
    live.stop_sent.clear();
    live.registered = true;
    live.reported = std::move(reported);
    live.gpus.clear();
    for (const auto& g : info.gpus) live.gpus.insert(g.index);
  }
  Wake();
  return Ok();
}

TelemetryCounts Controller::telemetry_counts() const {
  std::lock_guard lock(telemetry_mu_);
  return telemetry_counts_;
}

void Controller::OnTelemetry(const std::string& node, const berth::v1::GpuTelemetry& msg) {
  std::set<std::uint32_t> gpus;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(node);
    if (it != live_.end()) gpus = it->second.gpus;
  }
  // Each run named is looked up once per message: active on this node or not.
  std::map<std::string, bool> active;
  auto is_active = [&](const std::string& run_id) {
    auto [it, fresh] = active.emplace(run_id, false);
    if (fresh) {
      auto run = store_.GetRun(run_id);
      it->second = run && *run && (*run)->node == node && (*run)->state != model::RunState::kExited;
    }
    return it->second;
  };
  std::vector<model::GpuSample> samples;
  samples.reserve(static_cast<std::size_t>(msg.samples_size()));
  TelemetryCounts counted;
  for (const auto& p : msg.samples()) {
    if (!gpus.contains(p.gpu())) {
      ++counted.dropped_unknown_gpu;
      continue;
    }
    if (!std::all_of(p.run_ids().begin(), p.run_ids().end(), is_active)) {
      ++counted.dropped_inactive_run;
      continue;
    }
    samples.push_back(SampleFromProto(node, p));
  }
  if (telemetry_sink_) {
    counted.accepted = samples.size();
    if (!samples.empty()) telemetry_sink_(samples);
  } else {
    counted.dropped_no_sink = samples.size();
  }
  if (counted.dropped_unknown_gpu + counted.dropped_inactive_run > 0) {
    spdlog::debug(
        "agent {}: dropped {} telemetry samples of unregistered GPUs and {} naming runs "
        "not active on the node",
        node, counted.dropped_unknown_gpu, counted.dropped_inactive_run);
  }
  std::lock_guard lock(telemetry_mu_);
  telemetry_counts_.accepted += counted.accepted;
  telemetry_counts_.dropped_unknown_gpu += counted.dropped_unknown_gpu;
  telemetry_counts_.dropped_inactive_run += counted.dropped_inactive_run;
  telemetry_counts_.dropped_no_sink += counted.dropped_no_sink;
}

void Controller::OnHeartbeat(const std::string& node) {
  TimeMs now = clock_.NowMs();
  bool back = false;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(node);
    if (it == live_.end()) return;
    it->second.last_heartbeat_ms = now;
    if (!it->second.ready) {
      it->second.ready = true;
      back = true;
    }
  }
  if (back) {
    spdlog::info("node {} heartbeats again: Ready", node);
    if (auto st = store_.SetNodeState(node, model::NodeState::kReady, now); !st) {
      spdlog::error("recording node {} Ready failed: {}", node, st.error().message);
    } else {
      store::Publish(store_.change_feed(), store::Topic::kNode, node, {}, {}, "state");
    }
    Wake();
  }
}

void Controller::OnDisconnect(const std::shared_ptr<AgentSession>& session) {
  std::lock_guard lock(mu_);
  auto it = live_.find(session->node());
  // The lease, not the stream, decides readiness: a short network blip must
  // not fail a node. Only forget the session if it is still the current one.
  if (it != live_.end() && it->second.session == session) it->second.session = nullptr;
}

Status Controller::OnRunStarted(const std::string& node, const berth::v1::RunStarted& msg) {
  (void)node;
  auto st = control::MarkRunStarted(store_, msg.run_id(), msg.pid(), msg.started_at_ms(),
                                    clock_.NowMs(), msg.port());
  if (!st && st.error().code == Code::kNotFound) {
    spdlog::warn("agent {} started unknown run {}", node, msg.run_id());
    return Ok();
  }
  return st;
}

Status Controller::OnRunExited(const std::string& node, const berth::v1::RunExited& msg) {
  store::RunExit exit = ExitFromProto(msg);
  auto run = store_.GetRun(msg.run_id());
  if (!run) return std::unexpected(run.error());
  if (*run) {
    // Every byte of the log arrived before the exit on this stream; it is
    // made durable before the exit is recorded, so the ack below never lets
    // the agent drop a copy berthd could still lose.
    BERTH_RETURN_IF_ERROR(SyncRunLog(LogPath((*run)->job_id, msg.run_id())));
    // Only a failed exit has a class to read from its log.
    if (exit.exit_code != 0 || exit.signal != 0 || !exit.start_error.empty()) {
      ClassifyExit(exit, (*run)->job_id);
    }
  }
  const TimeMs now = clock_.NowMs();
  auto job = MarkRunExitedUnderPolicy(exit, now);
  if (!job && job.error().code != Code::kNotFound) return std::unexpected(job.error());
  if (job) CountOutcome(*job, now);
  std::shared_ptr<AgentSession> session;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(node); it != live_.end()) session = it->second.session;
  }
  // The exit is durable: the agent may now forget the run.
  if (session) session->Send(AckOf(msg.run_id()));
  Wake();
  return Ok();
}

Status Controller::OnRunHealth(const std::string& node, const berth::v1::RunHealth& msg) {
  // Bounded: the detail is the agent's words, shown in the API.
  std::string detail = msg.detail().substr(0, 512);
  auto st = control::MarkRunHealth(store_, msg.run_id(), msg.ready(), msg.liveness_failed(), detail,
                                   msg.at_ms() > 0 ? msg.at_ms() : clock_.NowMs());
  if (!st && st.error().code == Code::kNotFound) {
    spdlog::warn("agent {} reported the health of unknown run {}", node, msg.run_id());
    return Ok();
  }
  if (st && on_run_health_) on_run_health_();
  return st;
}

Status Controller::AddJobEvent(std::int64_t job_id, const std::string& event,
                               const std::string& message) {
  return control::AddJobEvent(store_, job_id, event, message, clock_.NowMs());
}

Status Controller::OnRunCheckpoint(const std::string& node, const berth::v1::RunCheckpoint& msg) {
  auto st = store_.RecordCheckpoint(msg.run_id(), msg.checkpoint_at_ms());
  if (!st && st.error().code == Code::kNotFound) {
    spdlog::warn("agent {} reported a checkpoint of unknown run {}", node, msg.run_id());
    return Ok();
  }
  return st;
}

Status Controller::OnGpuHealth(const std::string& node, const berth::v1::GpuHealthChanged& msg) {
  const TimeMs now = clock_.NowMs();
  const proto_convert::WireHealth health =
      proto_convert::HealthFromWire(msg.health(), msg.health_detail());
  const bool healthy = health.health == model::Health::kHealthy;
  auto st = store_.SetGpuHealth(node, msg.index(), healthy, health.detail, now);
  if (!st && st.error().code == Code::kNotFound) {
    spdlog::warn("agent {} reported health of unknown GPU {}", node, msg.index());
    return Ok();
  }
  BERTH_RETURN_IF_ERROR(st);
  store::Publish(store_.change_feed(), store::Topic::kNode, node, {}, {}, "health");
  if (healthy) {
    // Recovery is an admin's call: the automatic cordon stays until
    // `berth uncordon NODE/GPU`.
    spdlog::info(
        "node {} GPU {} reports healthy again; it stays cordoned until an admin "
        "uncordons it",
        node, msg.index());
    Wake();
    return Ok();
  }
  if (!health.known) {
    // An agent of another version may send a health berthd does not know.
    // The GPU takes no new work (recorded unhealthy above, with why), but
    // Berth neither cordons it nor stops its runs on a word it cannot read:
    // agents upgraded ahead of berthd would otherwise stop every job of a
    // fleet. The agent's next "healthy" makes the GPU schedulable again.
    spdlog::warn("node {} GPU {}: {}; its runs keep running", node, msg.index(), health.detail);
    Wake();
    return Ok();
  }
  const std::string detail =
      fmt::format("GPU {} ({}) on node {}: {}", msg.index(), msg.uuid(), node, msg.health_detail());
  spdlog::error("{}; cordoning that GPU and stopping its jobs", detail);
  store::Cordon cordon;
  cordon.reason = msg.health_detail();
  cordon.by = "berth";
  cordon.automatic = true;
  // Berth's own action, recorded with the cordon itself.
  store::AuditEntry entry;
  entry.time_ms = now;
  entry.actor = "berth";
  entry.action = "gpu.cordon";
  entry.object = fmt::format("gpu/{}/{}", node, msg.index());
  entry.after =
      nlohmann::json{{"cordon", "cordon"}, {"reason", cordon.reason}, {"automatic", true}}.dump();
  entry.outcome = "ok";
  BERTH_RETURN_IF_ERROR(
      store_.SetCordon(node, msg.index(), cordon, now, [&entry] { return std::optional(entry); }));
  store::Publish(store_.change_feed(), store::Topic::kNode, node, {}, {}, "cordon");
  auto jobs = control::StopRunsOnGpu(store_, node, msg.index(), detail, now);
  if (!jobs) return std::unexpected(jobs.error());
  store::Alert alert;
  alert.kind = model::AlertKind::kGpuHardware;
  alert.node = node;
  alert.gpu = msg.index();
  alert.subject = fmt::format("{}/{}", node, msg.index());
  alert.raised_ms = now;
  alert.message = fmt::format(
      "{}. Berth cordoned the GPU{}. Check it, then `berth uncordon {}/{}` if the error was "
      "transient.",
      detail,
      jobs->empty()
          ? ""
          : fmt::format(" and stopped {} job(s) on it for their retry policies", jobs->size()),
      node, msg.index());
  if (alerts_ != nullptr) {
    // The gpu_health rule sets severity and sinks; one open alert per GPU.
    auto id = alerts_->Raise(model::AlertRuleKind::kGpuHealth, std::move(alert),
                             store::AlertDedupe::kOpen);
    if (!id) return std::unexpected(id.error());
  } else {
    alert.severity = model::AlertSeverity::kCritical;
    auto id = store_.RaiseAlert(alert);
    if (!id) return std::unexpected(id.error());
    store::Publish(store_.change_feed(), store::Topic::kAlert, std::to_string(*id), {}, {}, "open");
  }
  Wake();
  return Ok();
}

Status Controller::OnContainerRuntime(const std::string& node,
                                      const berth::v1::ContainerRuntimeChanged& msg) {
  auto runtime = ContainerRuntimeFromProto(msg);
  if (!runtime) return std::unexpected(runtime.error());
  auto changed = store_.SetContainerRuntime(node, *runtime, clock_.NowMs());
  if (!changed && changed.error().code == Code::kNotFound) {
    // Removed while its stream was open: the node comes back only by
    // registering again, which says its runtime anyway.
    spdlog::warn("agent {} reported a container runtime for a node not in the inventory", node);
    return Ok();
  }
  if (!changed) return std::unexpected(changed.error());
  if (!*changed) return Ok();
  spdlog::info("node {}: {}", node,
               runtime->empty() ? "podman is gone from its agent's search path; jobs with an "
                                  "image are no longer placed there"
                                : "its agent found podman; jobs with an image may be placed there");
  store::Publish(store_.change_feed(), store::Topic::kNode, node, {}, {}, "container_runtime");
  Wake();
  return Ok();
}

Status Controller::Cordon(const std::string& node, std::optional<std::uint32_t> gpu, bool drain,
                          const std::string& reason, const std::string& by,
                          const store::AuditOf<>& audit) {
  if (drain && gpu) {
    return InvalidField("gpu", "drain applies to whole nodes; cordon a single GPU instead");
  }
  const TimeMs now = clock_.NowMs();
  store::Cordon cordon;
  cordon.kind = drain ? model::CordonKind::kDrain : model::CordonKind::kCordon;
  cordon.reason = reason;
  cordon.by = by;
  BERTH_RETURN_IF_ERROR(store_.SetCordon(node, gpu, cordon, now, audit));
  store::Publish(store_.change_feed(), store::Topic::kNode, node, {}, {}, "cordon");
  if (drain) {
    auto jobs = control::StopRunsOnNode(store_, node, now);
    if (!jobs) return std::unexpected(jobs.error());
    spdlog::info("node {} drained by {}: stopping {} job(s)", node, by, jobs->size());
  }
  Wake();
  return Ok();
}

Result<bool> Controller::Uncordon(const std::string& node, std::optional<std::uint32_t> gpu,
                                  const std::string& by, const store::AuditOf<>& audit) {
  auto had = store_.Uncordon(node, gpu, by, clock_.NowMs(), audit);
  if (had && *had) {
    store::Publish(store_.change_feed(), store::Topic::kNode, node, {}, {}, "cordon");
  }
  if (had) Wake();
  return had;
}

Result<std::optional<std::string>> Controller::NodeOfRun(const std::string& run_id) {
  auto run = store_.GetRun(run_id);
  if (!run) return std::unexpected(run.error());
  if (!*run) return std::optional<std::string>();
  return std::optional<std::string>((*run)->node);
}

Status Controller::OnLogChunk(const std::string& node, const berth::v1::LogChunk& msg) {
  auto run = store_.GetRun(msg.run_id());
  if (!run) return std::unexpected(run.error());
  if (!*run) {
    spdlog::warn("agent {} sent logs for unknown run {}", node, msg.run_id());
    return Ok();
  }
  auto tenant = store_.JobTenant((*run)->job_id);
  if (!tenant) return std::unexpected(tenant.error());
  const std::uint64_t limit = LogLimitFor(*tenant);
  auto path = LogPath((*run)->job_id, msg.run_id());
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::lock_guard lock(log_mu_);
  return WriteRunLog(path, msg.offset(), msg.data(), limit);
}

}  // namespace berth::server
