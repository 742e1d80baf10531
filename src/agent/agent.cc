#include "agent/agent.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ranges>

#include "agent/atomic_file.h"
#include "common/hash.h"
#include "common/units.h"
#include "proto_convert/node.h"
#include "proto_convert/probe.h"

namespace berth::agent {
namespace {

namespace fs = std::filesystem;

// Simulated GPUs get device nodes with the numbers NVIDIA's driver uses
// (major 195, minor = index; nvidiactl 195:255), so the cgroup's device
// rules are the same code as on real nodes and can be tested there: opening
// an allowed stand-in fails with ENXIO (no driver behind it), a denied one
// with EPERM.
void MakeStandInDevices(const fs::path& dir, const std::vector<model::Gpu>& gpus) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0755);
  auto make = [&](const std::string& name, unsigned minor) {
    const fs::path path = dir / name;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) return;
    // 0666 as on a real node: the cgroup, not the mode, decides who opens it.
    if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(195, minor)) != 0 ||
        ::chmod(path.c_str(), 0666) != 0) {
      spdlog::warn("cannot make stand-in device {}: {}", path.string(), std::strerror(errno));
    }
  };
  make("nvidiactl", 255);
  for (const auto& g : gpus) make("nvidia" + std::to_string(g.index), g.index);
}

void FillExit(const std::string& run_id, const RunExit& e, v1::RunExited* out) {
  out->set_run_id(run_id);
  out->set_exit_code(e.exit_code);
  out->set_signal(e.signal);
  out->set_started_at_ms(e.started_at_ms);
  out->set_ended_at_ms(e.ended_at_ms);
  out->set_stopped_for(e.stopped_for);
  out->set_start_error(e.start_error);
  if (e.clean_stop) out->set_clean_stop(*e.clean_stop);
  out->set_last_checkpoint_ms(e.last_checkpoint_ms);
  out->set_oom_kills(e.oom_kills);
  out->set_memory_peak_bytes(e.memory_peak_bytes);
  out->set_memory_limit_bytes(e.memory_limit_bytes);
  out->set_leftover_processes(e.leftover_processes);
  out->set_identity_refused(e.identity_refused);
}

// What the agent tells berthd about one run event.
v1::AgentMessage EventMessage(RunEvent& ev) {
  v1::AgentMessage out;
  switch (ev.kind) {
    case RunEvent::Kind::kStarted: {
      auto* m = out.mutable_run_started();
      m->set_run_id(ev.state.run_id);
      m->set_pid(ev.state.pid);
      m->set_started_at_ms(ev.state.started_at_ms);
      m->set_port(ev.state.port);
      spdlog::info("run {} started, pid {}", ev.state.run_id, ev.state.pid);
      break;
    }
    case RunEvent::Kind::kLog: {
      auto* m = out.mutable_log_chunk();
      m->set_run_id(ev.state.run_id);
      m->set_offset(ev.offset);
      m->set_data(std::move(ev.data));
      break;
    }
    case RunEvent::Kind::kCheckpoint: {
      auto* m = out.mutable_run_checkpoint();
      m->set_run_id(ev.state.run_id);
      m->set_checkpoint_at_ms(ev.checkpoint_at_ms);
      break;
    }
    case RunEvent::Kind::kExited: {
      FillExit(ev.state.run_id, *ev.state.exit, out.mutable_run_exited());
      spdlog::info("run {} exited: code {} signal {}{}", ev.state.run_id, ev.state.exit->exit_code,
                   ev.state.exit->signal,
                   ev.state.exit->start_error.empty() ? "" : ": " + ev.state.exit->start_error);
      break;
    }
  }
  return out;
}

void FillStatus(const RunState& s, v1::RunStatus* out) {
  out->set_run_id(s.run_id);
  out->set_pid(s.pid);
  out->set_started_at_ms(s.started_at_ms);
  out->set_port(s.port);
  if (s.phase == RunPhase::kExited && s.exit) {
    out->set_phase(v1::RunStatus::EXITED);
    FillExit(s.run_id, *s.exit, out->mutable_exit());
  } else {
    // Starting runs are RUNNING with pid 0: accepted, so berthd must not
    // place them elsewhere; their RunStarted follows.
    out->set_phase(v1::RunStatus::RUNNING);
  }
}

StartOrder OrderFromProto(const v1::StartRun& m) {
  StartOrder o;
  o.run_id = m.run_id();
  o.job_id = m.job_id();
  o.replica = m.replica();
  o.attempt = m.attempt();
  o.command.assign(m.command().begin(), m.command().end());
  for (const auto& [k, v] : m.env()) o.env[k] = v;
  o.working_dir = m.working_dir();
  o.gpu_indices.assign(m.gpu_indices().begin(), m.gpu_indices().end());
  o.gpu_uuids.assign(m.gpu_uuids().begin(), m.gpu_uuids().end());
  o.gpu_share_millis = m.gpu_share_millis();
  o.gpu_share_bytes = m.gpu_share_bytes();
  o.max_runtime_ms = m.max_runtime_ms();
  o.grace_ms = m.grace_ms();
  o.stop_signal = m.stop_signal();
  o.checkpoint_file = m.checkpoint_file();
  o.image = m.image();
  o.tenant = m.tenant();
  o.container_network = m.container_network();
  o.service_port = m.service_port();
  if (m.has_readiness()) o.readiness = proto_convert::ProbeFromProto(m.readiness());
  if (m.has_liveness()) o.liveness = proto_convert::ProbeFromProto(m.liveness());
  o.run_as.user = m.run_as().user();
  o.run_as.numeric = m.run_as().numeric();
  o.run_as.uid = m.run_as().uid();
  o.run_as.gid = m.run_as().gid();
  o.run_as.groups.assign(m.run_as().groups().begin(), m.run_as().groups().end());
  o.run_as.allow_root = m.run_as().allow_root();
  o.cpu_millis = m.cpu_millis();
  o.memory_bytes = m.memory_bytes();
  for (const auto& mount : m.mounts()) o.mounts.emplace_back(mount.path(), mount.read_only());
  if (m.has_load()) {
    const auto& l = m.load();
    o.load.pattern = l.pattern() == v1::LoadProfile::PERIODIC ? model::LoadPattern::kPeriodic
                     : l.pattern() == v1::LoadProfile::IDLE   ? model::LoadPattern::kIdle
                                                              : model::LoadPattern::kSteady;
    o.load.util_pct = l.util_pct();
    o.load.idle_util_pct = l.idle_util_pct();
    o.load.memory_pct = l.memory_pct();
    o.load.period_ms = l.period_ms();
    o.load.idle_after_ms = l.idle_after_ms();
  }
  return o;
}

}  // namespace

Agent::Agent(AgentOptions options, model::NodeInfo base, std::unique_ptr<GpuProvider> provider,
             std::shared_ptr<grpc::Channel> channel, const Clock& clock)
    : options_(std::move(options)),
      base_(std::move(base)),
      provider_(std::move(provider)),
      stub_(v1::AgentService::NewStub(std::move(channel))),
      clock_(clock),
      runner_(
          [this] {
            RunnerOptions r;
            r.data_dir = options_.data_dir;
            r.shim_path = options_.shim_path;
            r.node_name = base_.name;
            r.pull_timeout_ms = options_.pull_timeout_ms;
            r.podman_conf = options_.podman_conf;
            r.search_path = options_.podman_search_path;
            r.output_retention_ms = options_.output_retention_ms;
            // Only real NVIDIA GPUs exist as CDI devices; simulated ones are
            // numbers in the environment and nothing more.
            r.cdi_gpus = provider_->Name() == "nvml";
            r.confine = !options_.single_user && ::geteuid() == 0;
            if (r.confine) r.cgroups = DetectCgroups();
            r.cgroup_parent = options_.cgroup_parent;
            // A run identity must be able to pass through every directory
            // above its working directory. A data directory below a private
            // one (a checkout in /root) keeps the agent's state there and
            // puts the jobs' side (work directories, stand-in devices) in a
            // root-owned directory under /var/tmp instead.
            fs::path job_root = options_.data_dir;
            std::string job_root_gap;  // why run identities cannot reach it
            if (r.confine) {
              for (fs::path up = fs::absolute(job_root).parent_path();
                   !up.empty() && up != up.root_path(); up = up.parent_path()) {
                struct stat st {};
                if (::stat(up.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
                  const fs::path fallback =
                      fmt::format("/var/tmp/berth-runs-{:08x}",
                                  Fnv1a32(fs::absolute(options_.data_dir).string()));
                  if (std::string why = ClaimJobRoot(fallback); !why.empty()) {
                    job_root_gap = (fmt::format(
                        "work directories: {} is not searchable by others (mode {:o}) and {}; "
                        "no run identity reaches its working directory; chmod o+x it or move the "
                        "data directory",
                        up.string(), st.st_mode & 07777, why));
                    break;
                  }
                  job_root = fallback;
                  spdlog::info(
                      "{} is not searchable by run identities (mode {:o}); jobs' working "
                      "directories live in {} instead",
                      up.string(), st.st_mode & 07777, job_root.string());
                  break;
                }
              }
            }
            r.work_root = job_root / "work";
            r.gpu_device_dir =
                options_.gpu_device_dir.empty()
                    ? (provider_->Name() == "nvml" ? fs::path("/dev") : job_root / "dev")
                    : options_.gpu_device_dir;
            if (r.confine && provider_->Name() != "nvml") {
              MakeStandInDevices(r.gpu_device_dir, base_.gpus);
            }
            confinement_.mode = r.confine ? "enforced" : "single-user";
            confinement_.cgroup = CgroupVersionName(r.cgroups.version);
            confinement_.controllers = r.cgroups.controllers;
            confinement_.missing = r.cgroups.missing;
            if (!job_root_gap.empty()) confinement_.missing.push_back(job_root_gap);
            if (!r.confine) {
              confinement_.missing.insert(
                  confinement_.missing.begin(),
                  "run identities: the agent is not root (or runs --single-user), so every job "
                  "runs as the agent's own user and can read and change everything it can");
              spdlog::warn(
                  "single-user mode: jobs run as this agent's own user (uid {}) with no cgroup, "
                  "no run identity and no device confinement; a job can read and change the "
                  "agent's state and every other job on this node. Run the agent as root on "
                  "any node shared by more than one person.",
                  ::geteuid());
            } else {
              for (const auto& gap : confinement_.missing) {
                spdlog::warn("confinement on this node is incomplete: {}", gap);
              }
            }
            return r;
          }(),
          clock),
      fence_(options_.fence_grace_ms, options_.data_dir / "contact.json", clock),
      prober_(clock, [shim = options_.shim_path](const model::Probe& p, const ProbeTarget& t) {
        return RunProbe(p, t, shim);
      }) {}

Agent::~Agent() {
  Stop();
}

void Agent::Start() {
  std::lock_guard lock(mu_);
  if (worker_.joinable() || stopping_) return;
  worker_ = std::thread([this] { WorkerLoop(); });
  prober_.Start();
}

void Agent::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  prober_.Stop();
}

model::NodeInfo Agent::Describe() {
  model::NodeInfo node = base_;
  auto found = provider_->Discover();
  if (found) {
    last_discovery_ = *found;
  } else {
    spdlog::warn("GPU discovery failed ({}); reporting the last known GPUs", found.error().message);
  }
  if (last_discovery_) {
    node.gpus = last_discovery_->gpus;
    if (!options_.shared_gpus.empty()) {
      if (auto marked = MarkShared(options_.shared_gpus, node.gpus); !marked) {
        spdlog::warn("--shared-gpus: {}", marked.error().message);
      }
    }
    node.driver_version = last_discovery_->driver_version;
    node.cuda_version = last_discovery_->cuda_version;
  }
  node.gpu_provider = provider_->Name();
  node.agent_version = std::string(kAgentVersion);
  node.confinement = confinement_;
  node.container_runtime = runner_.FindPodman().empty() ? "" : "podman";
  reported_runtime_ = node.container_runtime;
  reported_health_.clear();
  for (const auto& g : node.gpus) {
    reported_health_[g.index] = {g.health == model::Health::kHealthy, g.health_detail};
  }
  return node;
}

bool Agent::ReportHealthChanges(Stream* stream) {
  auto found = provider_->Discover();
  if (!found) {
    spdlog::warn("GPU health poll failed: {}", found.error().message);
    return true;
  }
  for (const auto& g : found->gpus) {
    const bool healthy = g.health == model::Health::kHealthy;
    auto it = reported_health_.find(g.index);
    if (it != reported_health_.end() && it->second.first == healthy &&
        it->second.second == g.health_detail) {
      continue;
    }
    v1::AgentMessage out;
    auto* m = out.mutable_gpu_health();
    proto_convert::HealthChangeToProto(g, m);
    m->set_at_ms(clock_.NowMs());
    spdlog::warn("GPU {} ({}) is now {}{}", g.index, g.uuid, m->health(),
                 g.health_detail.empty() ? "" : ": " + g.health_detail);
    if (!Send(stream, out)) return false;
    reported_health_[g.index] = {healthy, g.health_detail};
  }
  last_discovery_ = std::move(*found);
  return true;
}

bool Agent::ReportRuntimeChange(Stream* stream) {
  std::string podman = runner_.FindPodman();
  std::string runtime = podman.empty() ? "" : "podman";
  if (runtime == reported_runtime_) return true;
  v1::AgentMessage out;
  out.mutable_container_runtime()->set_container_runtime(runtime);
  out.mutable_container_runtime()->set_at_ms(clock_.NowMs());
  if (podman.empty()) {
    spdlog::warn(
        "podman is no longer on the search path; telling berthd this node has no "
        "container runtime");
  } else {
    spdlog::info("found podman ({}); telling berthd this node runs jobs with an image", podman);
  }
  if (!Send(stream, out)) return false;
  reported_runtime_ = std::move(runtime);
  return true;
}

bool Agent::SendTelemetry(Stream* stream) {
  std::vector<GpuOccupant> occupants;
  for (const auto& held : runner_.Running()) {
    for (auto gpu : held.order.gpu_indices) {
      occupants.push_back({gpu, held.order.run_id, held.started_at_ms, held.order.load,
                           held.order.gpu_share_millis, held.order.gpu_share_bytes});
    }
  }
  auto samples = provider_->Sample(occupants, clock_.NowMs());
  if (!samples) {
    if (samples.error().message != telemetry_error_) {
      spdlog::warn("GPU telemetry: sampling failed ({}); nothing is sent until it works",
                   samples.error().message);
      telemetry_error_ = samples.error().message;
    }
    return true;
  }
  if (!telemetry_error_.empty()) {
    spdlog::info("GPU telemetry: sampling works again");
    telemetry_error_.clear();
  }
  if (samples->empty()) return true;
  v1::AgentMessage out;
  auto* t = out.mutable_telemetry();
  for (const auto& s : *samples) {
    auto* p = t->add_samples();
    p->set_at_ms(s.at_ms);
    p->set_gpu(s.gpu);
    p->set_uuid(s.uuid);
    p->set_util_pct(s.util_pct);
    p->set_mem_util_pct(s.mem_util_pct);
    p->set_memory_used_bytes(s.memory_used_bytes);
    p->set_memory_total_bytes(s.memory_total_bytes);
    p->set_temperature_c(s.temperature_c);
    p->set_power_mw(s.power_mw);
    p->set_ecc_sbe_total(s.ecc_sbe_total);
    p->set_ecc_dbe_total(s.ecc_dbe_total);
    p->set_last_xid(s.last_xid);
    for (const auto& r : s.run_ids) p->add_run_ids(r);
  }
  return Send(stream, out);
}

void Agent::Supervise() {
  if (fence_.Due()) {
    std::size_t before = fenced_.size();
    for (const auto& id : held_) {
      if (fenced_.contains(id)) continue;
      auto state = runner_.Get(id);
      if (!state || state->phase == RunPhase::kExited) continue;
      // Each order carries its grace (berthd counts that one); a run
      // without one gets none.
      if (auto st = runner_.Stop(id, "fenced", 0); !st) {
        spdlog::error("cannot fence run {}: {}; trying again", id, st.error().message);
        continue;
      }
      fenced_.insert(id);
    }
    if (fenced_.size() > before) {
      spdlog::warn(
          "no contact with berthd for {} ms (lease {} ms + fence grace {} ms): stopping {} "
          "run(s), since berthd may now start their jobs elsewhere (fenced)",
          clock_.NowMs() - fence_.last_contact_ms(), fence_.lease_ms(),
          fence_.grace_ms().value_or(0), fenced_.size() - before);
    }
  }
  runner_.Supervise();
  TendProbes();
}

void Agent::TendProbes() {
  std::vector<ProbeTarget> targets;
  for (const auto& held : runner_.Running()) {
    const OrderRecord& o = held.order;
    if (o.port == 0) continue;
    if (o.readiness.kind == model::ProbeKind::kNone && o.liveness.kind == model::ProbeKind::kNone) {
      continue;
    }
    targets.push_back({o.run_id, o.port, o.service_port, runner_.RunDir(o.run_id), o.readiness,
                       o.liveness, held.started_at_ms});
  }
  prober_.SetTargets(std::move(targets));
  for (auto& change : prober_.TakeChanges()) {
    if (change.liveness_failed) {
      spdlog::warn("run {}: {}; stopping it (liveness)", change.run_id, change.detail);
      // With the run's own grace from its order (none: 0).
      if (auto st = runner_.Stop(change.run_id, "liveness", 0); !st) {
        spdlog::error("cannot stop run {} after its liveness failed: {}", change.run_id,
                      st.error().message);
      }
    } else {
      spdlog::info("run {} is {}: {}", change.run_id, change.ready ? "ready" : "not ready",
                   change.detail);
    }
    v1::AgentMessage out;
    auto* m = out.mutable_run_health();
    m->set_run_id(change.run_id);
    m->set_ready(change.ready);
    m->set_liveness_failed(change.liveness_failed);
    m->set_detail(change.detail);
    m->set_at_ms(change.at_ms);
    health_out_.push_back(std::move(out));
  }
  // Verdicts wait for the stream while berthd is away; a registration
  // carries the current ones, so only the newest few matter.
  while (health_out_.size() > 1024) health_out_.pop_front();
}

bool Agent::WaitSupervising(std::int64_t ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    Supervise();
    std::unique_lock lock(mu_);
    auto step =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.poll_interval_ms);
    cv_.wait_until(lock, std::min(until, step), [this] { return stopping_; });
    if (stopping_) return false;
    if (std::chrono::steady_clock::now() >= until) return true;
  }
}

void Agent::WorkerLoop() {
  fence_.Restore();
  if (options_.cert_renewal) {
    auto cert = ReadNodeCert(options_.cert_renewal->cert_pem);
    if (!cert) {
      spdlog::error("cannot read the node certificate ({}); it is not renewed",
                    cert.error().message);
      options_.cert_renewal.reset();
    } else {
      renew_at_ms_ = RenewAtMs(*cert);
      spdlog::info("node certificate valid until {}; renewed from {}",
                   FormatTimeMs(cert->not_after_ms), FormatTimeMs(renew_at_ms_));
    }
  }
  if (auto runs = runner_.Scan(); !runs) {
    spdlog::error("cannot read run directories: {}", runs.error().message);
  } else if (!runs->empty()) {
    spdlog::info("found {} run(s) from before this agent started", runs->size());
    for (const auto& r : *runs) held_.insert(r.run_id);
  }
  int failures = 0;
  for (;;) {
    if (next_channel_) {
      // A renewed certificate: presented from this connection on.
      stub_ = v1::AgentService::NewStub(std::move(next_channel_));
      next_channel_.reset();
    }
    bool registered = RunConnection();
    failures = registered ? 0 : std::min(failures + 1, 2);
    if (!registered && !next_channel_) {
      // A fresh channel (and subchannels) for the next try: the old one's
      // backoff could hold it back seconds after a berthd began listening.
      if (options_.cert_renewal && options_.cert_renewal->channel) {
        next_channel_ = options_.cert_renewal->channel(options_.cert_renewal->cert_pem,
                                                       options_.cert_renewal->key_pem);
      } else if (options_.new_channel) {
        next_channel_ = options_.new_channel();
      }
    }
    std::int64_t backoff = options_.reconnect_backoff_ms << std::max(failures - 1, 0);
    // One more try just before the fence time: a berthd back by then
    // spares the runs.
    if (auto at = fence_.deadline_ms(); at && *at > clock_.NowMs()) {
      backoff = std::min(backoff, *at - clock_.NowMs());
    }
    if (!WaitSupervising(backoff)) return;
  }
}

bool Agent::Send(Stream* stream, const v1::AgentMessage& msg) {
  std::lock_guard lock(write_mu_);
  return stream->Write(msg);
}

void Agent::ReaderLoop(Stream* stream) {
  v1::ServerMessage msg;
  while (stream->Read(&msg)) {
    std::lock_guard lock(mu_);
    inbox_.push_back(std::move(msg));
    msg.Clear();
    cv_.notify_all();
  }
  std::lock_guard lock(mu_);
  stream_broken_ = true;
  cv_.notify_all();
}

bool Agent::RunConnection() {
  grpc::ClientContext context;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    context_ = &context;
    stream_broken_ = false;
    inbox_.clear();
  }
  std::unique_ptr<Stream> stream = stub_->Connect(&context);
  // An answer to a request sent on an earlier stream never comes.
  renew_pending_.reset();

  v1::AgentMessage hello;
  auto* reg = hello.mutable_register_();
  proto_convert::NodeToProto(Describe(), reg->mutable_node());
  held_.clear();
  for (const RunState& s : runner_.ReportAll()) {
    held_.insert(s.run_id);
    auto* status = reg->add_runs();
    FillStatus(s, status);
    if (auto ready = prober_.Ready(s.run_id)) status->set_ready(*ready);
  }
  // The registration says each replica's readiness now.
  health_out_.clear();
  bool ok = Send(stream.get(), hello);
  std::thread reader;
  if (ok) reader = std::thread([this, s = stream.get()] { ReaderLoop(s); });

  bool registered = false;
  std::int64_t heartbeat_ms = 1000;
  TimeMs next_heartbeat = 0;
  TimeMs next_health = clock_.NowMs() + options_.health_interval_ms;
  TimeMs next_telemetry = clock_.NowMs() + options_.telemetry_interval_ms;
  while (ok) {
    std::deque<v1::ServerMessage> inbox;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms),
                   [this] { return stopping_ || stream_broken_ || !inbox_.empty(); });
      inbox.swap(inbox_);
      if (stopping_ || (stream_broken_ && inbox.empty())) break;
    }
    for (const auto& msg : inbox) {
      if (msg.has_registered()) {
        const auto& r = msg.registered();
        heartbeat_ms = r.heartbeat_interval_ms() > 0 ? r.heartbeat_interval_ms()
                       : r.lease_ms() > 0            ? r.lease_ms() / 3
                                                     : 1000;
        heartbeat_ms = std::max<std::int64_t>(heartbeat_ms, 10);
        if (!registered) {
          spdlog::info(
              "registered with berthd as {} (lease {} ms, heartbeat every {} ms{})",
              r.node_name().empty() ? base_.name : r.node_name(), r.lease_ms(), heartbeat_ms,
              options_.fence_grace_ms && r.lease_ms() > 0
                  ? fmt::format(", runs fenced after {} ms without contact",
                                model::AgentFenceAfterMs(r.lease_ms(), *options_.fence_grace_ms))
                  : std::string());
        }
        for (const auto& [run_id, offset] : r.log_offsets()) runner_.SetLogOffset(run_id, offset);
        if (!fenced_.empty()) {
          spdlog::info("in contact with berthd again; {} fenced run(s) report their exits",
                       fenced_.size());
          fenced_.clear();
        }
        fence_.Registered(r.lease_ms());
        registered = true;
        next_heartbeat = 0;
      } else {
        Handle(stream.get(), msg);
      }
    }
    if (!registered) {
      Supervise();
      continue;
    }
    // Open and registered: gRPC keepalive would have closed a stream whose
    // berthd stopped answering.
    fence_.InContact();
    for (auto& ev : runner_.Poll()) {
      ok = Send(stream.get(), EventMessage(ev));
      if (!ok) break;
    }
    // After the runs' starts, so that berthd knows every run a verdict is of.
    if (ok) TendProbes();
    while (ok && !health_out_.empty()) {
      ok = Send(stream.get(), health_out_.front());
      if (ok) health_out_.pop_front();
    }
    if (ok && clock_.NowMs() >= next_health) {
      ok = ReportHealthChanges(stream.get());
      next_health = clock_.NowMs() + options_.health_interval_ms;
    }
    if (ok && options_.telemetry_interval_ms > 0 && clock_.NowMs() >= next_telemetry) {
      ok = SendTelemetry(stream.get());
      next_telemetry = clock_.NowMs() + options_.telemetry_interval_ms;
    }
    if (ok) ok = MaybeRenewCert(stream.get());
    if (ok && clock_.NowMs() >= next_heartbeat) {
      // Before the heartbeat: podman installed or removed since the
      // registration reaches berthd within one heartbeat interval.
      ok = ReportRuntimeChange(stream.get());
    }
    if (ok && clock_.NowMs() >= next_heartbeat) {
      v1::AgentMessage hb;
      hb.mutable_heartbeat()->set_sent_at_ms(clock_.NowMs());
      ok = Send(stream.get(), hb);
      next_heartbeat = clock_.NowMs() + heartbeat_ms;
    }
  }

  bool ended_by_server = false;
  {
    std::lock_guard lock(mu_);
    ended_by_server = stream_broken_;
  }
  // When berthd ended the stream its status is waiting (PERMISSION_DENIED for
  // a certificate of another node, say); cancelling would replace it.
  if (!ended_by_server) context.TryCancel();
  if (reader.joinable()) reader.join();
  grpc::Status status = stream->Finish();
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    context_ = nullptr;
    stopping = stopping_;
  }
  if (!stopping) {
    // Loud once per outage, quiet while berthd stays away.
    auto level = registered || !quiet_retries_ ? spdlog::level::warn : spdlog::level::debug;
    std::string fencing;
    if (auto at = fence_.deadline_ms(); at && registered) {
      fencing = fmt::format("; without contact, its runs are stopped in {} ms (fenced)",
                            std::max<TimeMs>(*at - clock_.NowMs(), 0));
    }
    spdlog::log(level, "stream to berthd closed ({}); reconnecting{}",
                status.error_message().empty() ? "no detail" : status.error_message(), fencing);
    quiet_retries_ = !registered;
  }
  return registered;
}

void Agent::Handle(Stream* stream, const v1::ServerMessage& msg) {
  if (msg.has_start_run()) {
    const auto& m = msg.start_run();
    auto state = runner_.Start(OrderFromProto(m));
    if (state) held_.insert(m.run_id());
    if (!state) {
      // Nothing was recorded, so nothing can be retried: tell berthd now.
      spdlog::error("cannot start run {}: {}", m.run_id(), state.error().message);
      v1::AgentMessage out;
      RunExit e;
      e.exit_code = 126;
      e.start_error = state.error().message;
      e.started_at_ms = e.ended_at_ms = clock_.NowMs();
      FillExit(m.run_id(), e, out.mutable_run_exited());
      Send(stream, out);
    }
  } else if (msg.has_stop_run()) {
    const auto& m = msg.stop_run();
    std::string reason = m.reason().empty() ? "cancelled" : m.reason();
    if (auto st = runner_.Stop(m.run_id(), reason, m.grace_ms()); !st) {
      if (st.error().code == Code::kNotFound && runner_.NeverHeld(m.run_id())) {
        // Its StartRun never arrived: nothing ran, nothing to stop. Report
        // the exit so berthd settles the run instead of waiting forever.
        spdlog::info("run {} stopped ({}) before it was started here; reporting it never started",
                     m.run_id(), reason);
        RunExit e;
        e.stopped_for = reason;
        e.ended_at_ms = clock_.NowMs();
        v1::AgentMessage out;
        FillExit(m.run_id(), e, out.mutable_run_exited());
        out.mutable_run_exited()->set_never_started(true);
        Send(stream, out);
      } else {
        spdlog::warn("cannot stop run {}: {}", m.run_id(), st.error().message);
      }
    }
  } else if (msg.has_ack_exit()) {
    if (auto st = runner_.Ack(msg.ack_exit().run_id()); !st) {
      spdlog::warn("cannot forget run {}: {}", msg.ack_exit().run_id(), st.error().message);
    } else {
      held_.erase(msg.ack_exit().run_id());
      fenced_.erase(msg.ack_exit().run_id());
    }
  } else if (msg.has_certificate_issued()) {
    OnCertificateIssued(msg.certificate_issued());
  } else if (msg.has_output_request()) {
    // A tenant downloading results: berthd checked who asks; the runner
    // reads only what the run's identity owns (agent/outputs.h).
    const auto& m = msg.output_request();
    v1::AgentMessage out;
    auto* reply = out.mutable_output_reply();
    reply->set_request_id(m.request_id());
    auto read = runner_.ReadOutput(m.run_id(), m.path(), m.offset(), m.length());
    if (!read) {
      reply->set_error(read.error().message);
      reply->set_code(static_cast<std::int32_t>(read.error().code));
    } else {
      reply->set_is_dir(read->is_dir);
      reply->set_truncated(read->truncated);
      reply->set_size(read->size);
      reply->set_modified_ms(read->modified_ms);
      reply->set_data(std::move(read->data));
      for (auto& e : read->entries) {
        auto* entry = reply->add_entries();
        entry->set_name(std::move(e.name));
        entry->set_type(std::move(e.type));
        entry->set_size(e.size);
        entry->set_modified_ms(e.modified_ms);
      }
    }
    Send(stream, out);
  }
}

// How long a renewal waits for berthd's answer before it asks again.
constexpr TimeMs kRenewAnswerTimeoutMs = 30'000;

bool Agent::MaybeRenewCert(Stream* stream) {
  if (!options_.cert_renewal) return true;
  const TimeMs now = clock_.NowMs();
  if (renew_pending_) {
    if (now - renew_sent_ms_ < kRenewAnswerTimeoutMs) return true;
    renew_pending_.reset();
    ScheduleRenewalRetry("berthd did not answer the renewal request");
    return true;
  }
  if (now < renew_at_ms_) return true;
  // A new key for every request: it never leaves this node.
  auto request = MakeNodeCsr(base_.name);
  if (!request) {
    ScheduleRenewalRetry(request.error().message);
    return true;
  }
  v1::AgentMessage out;
  out.mutable_renew_certificate()->set_csr_pem(request->csr_pem);
  renew_pending_ = std::move(*request);
  renew_sent_ms_ = now;
  spdlog::info("node certificate due for renewal; asking berthd to sign a new key's request");
  return Send(stream, out);
}

void Agent::ScheduleRenewalRetry(const std::string& why) {
  renew_failures_ = std::min(renew_failures_ + 1, 8);
  // 5 s, 10 s, 20 s ... up to about 10 minutes.
  const TimeMs backoff = std::int64_t{5'000} << (renew_failures_ - 1);
  renew_at_ms_ = clock_.NowMs() + backoff;
  spdlog::warn("node certificate renewal failed ({}); trying again in {}", why,
               FormatDurationMs(backoff));
}

void Agent::OnCertificateIssued(const v1::CertificateIssued& msg) {
  if (!options_.cert_renewal || !renew_pending_) return;  // not asked on this stream
  NodeKeyRequest request = std::move(*renew_pending_);
  renew_pending_.reset();
  if (!msg.error().empty()) return ScheduleRenewalRetry("berthd refused: " + msg.error());
  const std::string& cert_pem = msg.cert_pem();
  if (auto st = CheckCertMatchesKey(cert_pem, request.key_pem); !st) {
    return ScheduleRenewalRetry(st.error().message);
  }
  auto info = ReadNodeCert(cert_pem);
  if (!info) return ScheduleRenewalRetry(info.error().message);
  if (info->common_name != base_.name) {
    return ScheduleRenewalRetry(fmt::format("berthd signed a certificate for '{}', not '{}'",
                                            info->common_name, base_.name));
  }
  auto& renewal = *options_.cert_renewal;
  // The key first (created 0600), then the certificate: each file is
  // replaced whole, never seen half written.
  if (int err = WriteFileAtomic(renewal.key_file.string(), request.key_pem); err != 0) {
    return ScheduleRenewalRetry(
        fmt::format("cannot write {}: {}", renewal.key_file.string(),
                    std::error_code(err, std::generic_category()).message()));
  }
  if (int err = WriteFileAtomic(renewal.cert_file.string(), cert_pem); err != 0) {
    return ScheduleRenewalRetry(
        fmt::format("cannot write {}: {}", renewal.cert_file.string(),
                    std::error_code(err, std::generic_category()).message()));
  }
  std::error_code ec;
  std::filesystem::permissions(
      renewal.cert_file,
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
          std::filesystem::perms::group_read | std::filesystem::perms::others_read,
      ec);
  renewal.cert_pem = cert_pem;
  renewal.key_pem = request.key_pem;
  renew_failures_ = 0;
  renew_at_ms_ = RenewAtMs(*info);
  if (renewal.channel) next_channel_ = renewal.channel(cert_pem, request.key_pem);
  spdlog::info(
      "node certificate renewed: valid until {}, written to {} and {}; the next connection "
      "presents it (next renewal from {})",
      FormatTimeMs(info->not_after_ms), renewal.cert_file.string(), renewal.key_file.string(),
      FormatTimeMs(renew_at_ms_));
}

Result<std::string> AgentTarget(std::string_view servers) {
  if (servers.find(',') == std::string_view::npos) {
    if (servers.empty()) return InvalidField("server", "give berthd's agent endpoint HOST:PORT");
    return std::string(servers);
  }
  std::string family;
  std::string out;
  for (auto part : servers | std::views::split(',')) {
    const std::string address(part.begin(), part.end());
    const auto colon = address.rfind(':');
    std::string host = colon == std::string::npos ? address : address.substr(0, colon);
    const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
    const bool v6 = host.size() > 2 && host.front() == '[' && host.back() == ']';
    if (v6) host = host.substr(1, host.size() - 2);
    std::array<unsigned char, 16> bytes{};
    const bool literal = inet_pton(v6 ? AF_INET6 : AF_INET, host.c_str(), bytes.data()) == 1;
    const bool port_ok = !port.empty() && port.size() <= 5 &&
                         std::ranges::all_of(port, [](char c) { return c >= '0' && c <= '9'; }) &&
                         std::stoi(port) > 0 && std::stoi(port) <= 65535;
    if (!literal || !port_ok) {
      return InvalidField(
          "server",
          fmt::format("'{}' in the list is not IP:PORT: several control-plane addresses are IP "
                      "literals with ports (10.0.0.1:7461,10.0.0.2:7461, [fd00::1]:7461,...); "
                      "for host names give one DNS name that resolves to every berthd",
                      address));
    }
    const std::string this_family = v6 ? "ipv6" : "ipv4";
    if (!family.empty() && family != this_family) {
      return InvalidField("server", "the control-plane addresses are all IPv4 or all IPv6");
    }
    family = this_family;
    out += out.empty() ? family + ":" : ",";
    out += address;
  }
  return out;
}

std::shared_ptr<grpc::Channel> MakeAgentChannel(const std::string& target,
                                                const std::optional<AgentTls>& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(model::kAgentConnectTimeoutMs));
  // Fencing counts an open stream as contact (fence.h): a berthd that stops
  // answering pings, or a network that stops carrying them, closes it.
  // berthd allows pings this often (berthd_main.cc).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(model::kAgentKeepaliveMs));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(model::kAgentKeepaliveTimeoutMs));
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Subchannels of its own: a new channel (Agent::new_channel) starts
  // without another channel's backoff to the same addresses.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!tls) return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls->ca_pem;
  ssl.pem_cert_chain = tls->cert_pem;
  ssl.pem_private_key = tls->key_pem;
  if (!tls->server_name.empty()) {
    args.SetSslTargetNameOverride(tls->server_name);
  }
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

}  // namespace berth::agent
