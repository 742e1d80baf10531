// The controller's start orders: what each run of a placed job is sent to its
// agent (command, environment, GPUs, the gang's rendezvous) and when.
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
#include "proto_convert/probe.h"

namespace berth::server {
namespace {

std::map<std::string, std::string> DistributedEnv(const store::RunRecord& run,
                                                  const model::JobSpec& spec,
                                                  const std::vector<store::RunRecord>& gang,
                                                  const std::vector<store::NodeRecord>& nodes) {
  std::vector<const store::RunRecord*> by_replica;
  by_replica.reserve(gang.size());
  for (const auto& r : gang) by_replica.push_back(&r);
  std::sort(by_replica.begin(), by_replica.end(),
            [](const auto* a, const auto* b) { return a->replica < b->replica; });
  std::vector<std::string> node_order;  // by lowest replica
  for (const auto* r : by_replica) {
    if (std::find(node_order.begin(), node_order.end(), r->node) == node_order.end()) {
      node_order.push_back(r->node);
    }
  }
  std::uint32_t rank = 0;
  std::uint32_t local_rank = 0;
  std::uint32_t local_world = 0;
  std::uint32_t node_rank = 0;
  std::uint32_t next = 0;
  for (std::size_t n = 0; n < node_order.size(); ++n) {
    std::uint32_t local = 0;
    for (const auto* r : by_replica) {
      if (r->node != node_order[n]) continue;
      if (r->replica == run.replica) {
        rank = next;
        local_rank = local;
        node_rank = static_cast<std::uint32_t>(n);
      }
      ++local;
      ++next;
    }
    if (node_order[n] == run.node) local_world = local;
  }
  std::string master = node_order.empty() ? run.node : node_order.front();
  for (const auto& n : nodes) {
    if (n.info.name == master && !n.info.hostname.empty()) master = n.info.hostname;
  }
  std::map<std::string, std::string> env{
      {"WORLD_SIZE", std::to_string(spec.replicas)},
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"GROUP_RANK", std::to_string(node_rank)},
      {"NODE_RANK", std::to_string(node_rank)},
      {"MASTER_ADDR", master},
      {"MASTER_PORT", std::to_string(29500 + run.job_id % 20000)},
      {"BERTH_NNODES", std::to_string(node_order.size())},
      {"BERTH_NODE_RANK", std::to_string(node_rank)}};
  return env;
}

}  // namespace

berth::v1::StartRun Controller::StartOrder(const store::RunRecord& run, const model::JobSpec& spec,
                                           const std::vector<store::RunRecord>& gang,
                                           const std::vector<store::NodeRecord>& nodes,
                                           const model::Policy& policy) const {
  berth::v1::StartRun o;
  // Who the run executes as on its node: the tenant's, from the policy in
  // force when it starts (docs/security.md).
  const model::RunAs run_as = model::RunIdentityOf(policy, spec.tenant);
  auto* id = o.mutable_run_as();
  id->set_user(run_as.user);
  id->set_numeric(run_as.uid.has_value());
  id->set_uid(run_as.uid.value_or(0));
  id->set_gid(run_as.gid);
  for (auto g : run_as.groups) id->add_groups(g);
  id->set_allow_root(run_as.allow_root);
  o.set_tenant(spec.tenant);
  if (auto net = model::ContainerNetworkOf(policy, spec.tenant);
      net != model::ContainerNetwork::kPrivate) {
    o.set_container_network(std::string(model::ContainerNetworkName(net)));
  }
  if (spec.service) {
    o.set_service_port(spec.service->port);
    if (spec.service->readiness.kind != model::ProbeKind::kNone) {
      proto_convert::ProbeToProto(spec.service->readiness, o.mutable_readiness());
    }
    if (spec.service->liveness.kind != model::ProbeKind::kNone) {
      proto_convert::ProbeToProto(spec.service->liveness, o.mutable_liveness());
    }
  }
  o.set_cpu_millis(spec.resources.cpu_millis);
  o.set_memory_bytes(spec.resources.memory_bytes);
  for (const auto& m : spec.mounts) {
    auto* mount = o.add_mounts();
    mount->set_path(m.path);
    mount->set_read_only(m.read_only);
  }
  o.set_run_id(run.run_id);
  o.set_job_id(run.job_id);
  o.set_replica(run.replica);
  o.set_attempt(run.attempt);
  for (const auto& arg : spec.command) o.add_command(arg);
  auto& env = *o.mutable_env();
  for (const auto& [k, v] : spec.env) env[k] = v;
  env["BERTH_JOB_ID"] = std::to_string(run.job_id);
  env["BERTH_JOB_NAME"] = spec.name;
  env["BERTH_TENANT"] = spec.tenant;
  env["BERTH_QUEUE"] = spec.queue;
  env["BERTH_REPLICA"] = std::to_string(run.replica);
  env["BERTH_REPLICAS"] = std::to_string(spec.replicas);
  // Attempts count from 1; every placement after an eviction, a move or a
  // retry is a restart.
  env["BERTH_RESTART_COUNT"] = std::to_string(run.attempt > 0 ? run.attempt - 1 : 0);
  if (spec.array_element) {
    env["BERTH_ARRAY_ID"] = std::to_string(spec.array_element->id);
    env["BERTH_ARRAY_INDEX"] = std::to_string(spec.array_element->index);
    env["BERTH_ARRAY_SIZE"] = std::to_string(spec.array_element->size);
  }
  for (const auto& [k, v] : DistributedEnv(run, spec, gang, nodes)) {
    if (env.find(k) == env.end()) env[k] = v;  // a job's own env wins
  }
  if (job_api_.key != nullptr) {
    // Its own credential (job_token.h): never stored, never in the job's
    // record; a spec cannot set BERTH_* names, so these are Berth's.
    env["BERTH_JOB_TOKEN"] = job_api_.key->Issue(run.job_id, run.replica, run.attempt);
    if (!job_api_.api_url.empty()) env["BERTH_API_URL"] = job_api_.api_url;
    if (!job_api_.ca_pem.empty()) env["BERTH_CA_PEM"] = job_api_.ca_pem;
  }
  if (!spec.checkpoint.dir.empty()) env["BERTH_CHECKPOINT_DIR"] = spec.checkpoint.dir;
  if (!spec.checkpoint.file.empty()) env["BERTH_CHECKPOINT_FILE"] = spec.checkpoint.file;
  if (spec.checkpoint.enabled) {
    o.set_stop_signal(spec.checkpoint.signal);
    o.set_checkpoint_file(spec.checkpoint.file);
  }
  o.set_image(spec.image);
  o.set_working_dir(spec.working_dir);
  for (auto idx : run.gpu_indices) o.add_gpu_indices(idx);
  for (const auto& u : run.gpu_uuids) o.add_gpu_uuids(u);
  o.set_gpu_share_millis(run.gpu_share_millis);
  o.set_gpu_share_bytes(run.gpu_share_bytes);
  o.set_max_runtime_ms(spec.max_runtime_ms);
  o.set_grace_ms(spec.checkpoint.grace_ms > 0 ? spec.checkpoint.grace_ms : options_.stop_grace_ms);
  auto* load = o.mutable_load();
  load->set_pattern(
      spec.load.pattern == model::LoadPattern::kPeriodic ? berth::v1::LoadProfile::PERIODIC
      : spec.load.pattern == model::LoadPattern::kIdle   ? berth::v1::LoadProfile::IDLE
                                                         : berth::v1::LoadProfile::STEADY);
  load->set_util_pct(spec.load.util_pct);
  load->set_idle_util_pct(spec.load.idle_util_pct);
  load->set_memory_pct(spec.load.memory_pct);
  load->set_period_ms(spec.load.period_ms);
  load->set_idle_after_ms(spec.load.idle_after_ms);
  return o;
}

Status Controller::Dispatch(const std::vector<store::RunRecord>& active,
                            const std::vector<store::NodeRecord>& nodes) {
  struct Order {
    std::shared_ptr<AgentSession> session;
    berth::v1::ServerMessage msg;
  };
  std::vector<Order> orders;
  std::vector<const store::RunRecord*> never_started;
  for (const auto& run : active) {
    std::shared_ptr<AgentSession> session;
    bool send_start = false;
    bool send_stop = false;
    {
      std::lock_guard lock(mu_);
      auto it = live_.find(run.node);
      if (it == live_.end()) continue;
      const LiveNode& live = it->second;
      // Stopped before its start order went out, and not on the agent (see
      // LiveNode::reported): a StopRun would find nothing to stop, so the
      // run is settled here, connected or not.
      if (run.stop_requested && run.state == model::RunState::kStarting && live.registered &&
          !live.reported.contains(run.run_id) && !live.start_sent.contains(run.run_id)) {
        never_started.push_back(&run);
        continue;
      }
      if (live.session == nullptr) continue;
      session = it->second.session;
      if (run.stop_requested) {
        send_stop = it->second.stop_sent.insert(run.run_id).second;
      } else if (run.state == model::RunState::kStarting) {
        send_start = it->second.start_sent.insert(run.run_id).second;
      }
    }
    berth::v1::ServerMessage msg;
    if (send_start) {
      // `active` was read when this pass began. A registration since then
      // may have settled the run (its agent reported it exited, OnRegister)
      // and forgotten what was sent: the run is read again, and the order
      // goes out only on the session it was counted against. Without this a
      // run that ended while berthd changed hands was started a second time
      // (found by berth-fault-trial).
      auto fresh = store_.GetRun(run.run_id);
      if (!fresh) return std::unexpected(fresh.error());
      bool current =
          *fresh && (*fresh)->state == model::RunState::kStarting && !(*fresh)->stop_requested;
      {
        std::lock_guard lock(mu_);
        auto it = live_.find(run.node);
        current = current && it != live_.end() && it->second.session == session &&
                  it->second.start_sent.contains(run.run_id);
      }
      if (!current) continue;
      auto spec = SpecOf(run.job_id);
      if (!spec) return std::unexpected(spec.error());
      std::vector<store::RunRecord> gang;
      if (spec->replicas > 1) {
        auto job = store_.GetJob(run.job_id);
        if (!job) return std::unexpected(job.error());
        for (auto& r : job->runs) {
          if (r.attempt == run.attempt) gang.push_back(std::move(r));
        }
      } else {
        gang.push_back(run);
      }
      auto policy = ActivePolicy();
      if (!policy) return std::unexpected(policy.error());
      *msg.mutable_start_run() = StartOrder(run, *spec, gang, nodes, (*policy)->policy);
    } else if (send_stop) {
      auto* stop = msg.mutable_stop_run();
      stop->set_run_id(run.run_id);
      // The agent stream carries the cause's name (agent/agent.cc).
      stop->set_reason(std::string(model::StopCauseName(run.stopped_for == model::StopCause::kNone
                                                            ? model::StopCause::kCancelled
                                                            : run.stopped_for)));
      stop->set_grace_ms(options_.stop_grace_ms);
    } else {
      continue;
    }
    orders.push_back({std::move(session), std::move(msg)});
  }
  for (auto& o : orders) {
    if (!o.session->Send(o.msg)) {
      spdlog::warn("agent {} stream closed; order will be re-sent on reconnect", o.session->node());
    }
  }
  if (never_started.empty()) return Ok();
  const TimeMs now = clock_.NowMs();
  for (const auto* run : never_started) {
    store::RunExit exit;
    exit.run_id = run->run_id;
    exit.ended_at_ms = now;
    exit.stopped_for = run->stopped_for == model::StopCause::kNone ? model::StopCause::kCancelled
                                                                   : run->stopped_for;
    exit.never_started = true;
    spdlog::info(
        "run {} of job {} on {} was stopped ({}) before its start order was sent; "
        "settled as never started",
        run->run_id, run->job_id, run->node, model::StopCauseName(exit.stopped_for));
    // An exit the agent reported meanwhile wins: MarkRunExited settles once.
    auto job = MarkRunExitedUnderPolicy(exit, now);
    if (!job) return std::unexpected(job.error());
    CountOutcome(*job, now);
  }
  // A requeued job (preempted, drained) can be placed again at once.
  Wake();
  return Ok();
}

}  // namespace berth::server
