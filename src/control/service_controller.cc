#include "control/service_controller.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/units.h"
#include "control/controller.h"
#include "model/json.h"

namespace berth::server {
namespace {

using nlohmann::json;

std::string ServiceKey(const std::string& tenant, const std::string& name) {
  return tenant + "/" + name;
}

// The audit record of a replica the controller started or stopped: Berth's
// own action on the service's behalf.
store::AuditEntry ReplicaRecord(const std::string& tenant, const std::string& name,
                                std::string_view action, const json& after, TimeMs now) {
  store::AuditEntry e;
  e.time_ms = now;
  e.actor = "berth";
  e.tenant = tenant;
  e.action = std::string(action);
  e.object = fmt::format("service/{}/{}", tenant, name);
  e.after = after.dump();
  e.outcome = "ok";
  return e;
}

constexpr std::size_t kServicePage = 1000;
// A round reads every live replica at once; far above what the
// per-tenant service limit and kMaxServiceReplicas allow in practice.
constexpr std::size_t kMaxLiveReplicas = 1'000'000;

}  // namespace

ServiceController::~ServiceController() {
  Stop();
}

std::uint32_t ServiceController::DesiredReplicas(const model::ServiceSpec& spec) {
  return spec.replicas.min;
}

model::JobSpec ServiceController::ReplicaSpec(const store::ServiceRecord& service) {
  const model::ServiceSpec& s = service.spec;
  model::JobSpec j;
  j.name = service.name;
  j.tenant = service.tenant;
  j.queue = s.queue;
  j.command = s.command;
  j.image = s.image;
  j.env["BERTH_SERVICE"] = ServiceKey(service.tenant, service.name);
  if (!s.model.name.empty()) j.env["BERTH_MODEL"] = s.model.name;
  if (!s.model.version.empty()) j.env["BERTH_MODEL_VERSION"] = s.model.version;
  j.resources.gpus = s.resources.gpus;
  j.resources.gpu_share_millis = s.resources.gpu_share_millis;
  if (s.resources.gpus > 0 && s.resources.gpu_memory_bytes > 0) {
    // The resident model spread over the replica's GPUs: each needs its part.
    j.resources.gpu_memory_bytes =
        (s.resources.gpu_memory_bytes + s.resources.gpus - 1) / s.resources.gpus;
  }
  j.resources.cpu_millis = s.resources.cpu_millis;
  j.resources.memory_bytes = s.resources.memory_bytes;
  // The replicas a service keeps are not taken by training's preemption
  // (docs/services.md, "Replicas").
  j.preemptible = false;
  j.service = model::ServiceOwner{service.name, service.revision, s.port};
  // Its agent probes it (agent/prober.h); a replica changes with its
  // revision's probes only when something else of its spec changes too.
  j.service->readiness = s.readiness;
  j.service->liveness = s.liveness;
  return j;
}

bool ServiceController::RunsCurrentSpec(const store::ServiceRecord& service,
                                        const model::JobSpec& replica) {
  if (!replica.service) return false;
  if (replica.service->revision == service.revision) return true;
  model::JobSpec current = ReplicaSpec(service);
  model::JobSpec other = replica;
  current.service.reset();
  other.service.reset();
  return model::ToJson(current) == model::ToJson(other);
}

ReplicaHealth ServiceController::HealthOf(const store::JobRecord& job) {
  ReplicaHealth h;
  h.stopping = job.cancel_requested;
  h.running = job.state == model::JobState::kRunning;
  const model::RunRecord* run = nullptr;
  for (const auto& r : job.runs) {
    if (r.state != model::RunState::kExited) run = &r;
  }
  if (run == nullptr) return h;
  h.node = run->node;
  h.port = run->port;
  h.probe_detail = run->probe_detail;
  if (!h.running || run->state != model::RunState::kRunning) return h;
  const bool probed =
      job.spec.service && job.spec.service->readiness.kind != model::ProbeKind::kNone;
  h.ready = !probed || run->ready.value_or(false);
  if (!h.ready) {
    h.not_ready_since_ms =
        run->ready_changed_ms.value_or(run->started_at_ms.value_or(job.started_at_ms.value_or(1)));
  }
  return h;
}

ReplicaCounts ServiceController::CountReplicas(
    const store::ServiceRecord& service, const std::vector<const store::JobRecord*>& replicas) {
  ReplicaCounts n;
  for (const store::JobRecord* job : replicas) {
    const ReplicaHealth h = HealthOf(*job);
    if (h.stopping) {
      ++n.stopping;
    } else if (!h.running) {
      ++n.starting;
    } else {
      ++n.running;
      if (!h.ready) {
        ++n.not_ready;
      } else if (RunsCurrentSpec(service, job->spec)) {
        ++n.ready;
      }
    }
  }
  return n;
}

std::optional<ServiceRound> ServiceController::LastRound(const std::string& tenant,
                                                         const std::string& name) const {
  std::lock_guard lock(rounds_mu_);
  auto it = rounds_.find(ServiceKey(tenant, name));
  if (it == rounds_.end()) return std::nullopt;
  return it->second;
}

Status ServiceController::StopReplica(const std::string& tenant, const std::string& name,
                                      std::int64_t job_id, std::string_view cause,
                                      const std::string& why, TimeMs now) {
  auto done =
      controller_.Cancel(job_id, why, [&](const store::JobRecord&, const store::JobRecord&) {
        return std::optional<store::AuditEntry>(ReplicaRecord(
            tenant, name, "service.replica.stop", json{{"job", job_id}, {"cause", cause}}, now));
      });
  // Ended by itself since the round read it: nothing to stop.
  if (!done && done.error().code != Code::kFailedPrecondition) {
    return std::unexpected(done.error());
  }
  return Ok();
}

Status ServiceController::Reconcile() {
  const TimeMs now = clock_.NowMs();
  store::JobFilter live;
  live.states = {model::JobState::kPending, model::JobState::kScheduled, model::JobState::kRunning};
  live.replicas_only = true;
  live.with_runs = true;  // readiness is the current run's
  live.limit = kMaxLiveReplicas;
  auto replicas = store_.ListJobs(live);
  if (!replicas) return std::unexpected(replicas.error());
  std::map<std::string, std::vector<store::JobRecord>> by_service;
  for (auto& job : *replicas) {
    by_service[ServiceKey(job.spec.tenant, job.spec.service->name)].push_back(std::move(job));
  }

  std::map<std::string, ServiceRound> seen;
  store::ServiceFilter filter;
  filter.limit = kServicePage;
  Status failed = Ok();
  while (true) {
    auto page = store_.ListServices(filter);
    if (!page) return std::unexpected(page.error());
    for (const auto& service : *page) {
      const std::string key = ServiceKey(service.tenant, service.name);
      auto it = by_service.find(key);
      static const std::vector<store::JobRecord> kNone;
      const auto& mine = it == by_service.end() ? kNone : it->second;
      if (auto st = ReconcileOne(service, mine, now); !st && failed) failed = st;
      if (it != by_service.end()) by_service.erase(it);
      std::lock_guard lock(rounds_mu_);
      if (auto r = rounds_.find(key); r != rounds_.end()) seen[key] = r->second;
    }
    if (page->size() < filter.limit) break;
    filter.before_id = page->back().id;
  }
  {
    std::lock_guard lock(rounds_mu_);
    rounds_ = std::move(seen);
  }
  // Replicas whose service is gone.
  for (const auto& [key, jobs] : by_service) {
    for (const auto& job : jobs) {
      if (job.cancel_requested) continue;
      const std::string why = fmt::format("berth: service {} deleted", key);
      if (auto st =
              StopReplica(job.spec.tenant, job.spec.service->name, job.id, "deleted", why, now);
          !st) {
        if (failed) failed = st;
        continue;
      }
      spdlog::info("service {}: replica job {} stopped (service deleted)", key, job.id);
    }
  }
  return failed;
}

Status ServiceController::ReconcileOne(const store::ServiceRecord& service,
                                       const std::vector<store::JobRecord>& replicas, TimeMs now) {
  const std::string key = ServiceKey(service.tenant, service.name);
  sched::ReplicaPlanInput in;
  in.revision = service.revision;
  in.desired = DesiredReplicas(service.spec);
  in.rollout = service.spec.rollout;
  in.now_ms = now;
  std::uint32_t current = 0;
  // The current revision's replicas running but not ready, for the status.
  std::vector<std::pair<std::int64_t, ReplicaHealth>> unready;
  for (const auto& job : replicas) {
    if (job.cancel_requested) continue;  // stopping already
    // A replica that runs the current spec counts as the current revision's.
    const bool same = RunsCurrentSpec(service, job.spec);
    const std::int64_t revision = same ? service.revision : job.spec.service->revision;
    ReplicaHealth h = HealthOf(job);
    in.replicas.push_back({job.id, revision, h.ready, h.not_ready_since_ms});
    if (same) ++current;
    if (same && h.running && !h.ready) unready.emplace_back(job.id, std::move(h));
  }
  if (current < in.desired) {
    // Missing replicas: how many ended on their own lately.
    store::JobFilter ended;
    ended.tenant = service.tenant;
    ended.service = service.name;
    ended.states = {model::JobState::kFailed, model::JobState::kSucceeded};
    ended.with_runs = false;
    ended.limit = 32;
    auto jobs = store_.ListJobs(ended);
    if (!jobs) return std::unexpected(jobs.error());
    for (const auto& job : *jobs) {
      if (job.cancel_requested || !job.finished_at_ms) continue;
      if (*job.finished_at_ms < now - sched::kCrashWindowMs) continue;
      ++in.recent_crashes;
      in.last_crash_ms = std::max(in.last_crash_ms, *job.finished_at_ms);
    }
  }
  const sched::ReplicaPlan plan = sched::PlanReplicas(in);

  ServiceRound round;
  round.revision = service.revision;
  round.desired = in.desired;
  round.phase = plan.phase;
  round.backoff_until_ms = plan.backoff_until_ms;
  round.recent_crashes = in.recent_crashes;
  round.at_ms = now;
  if (!unready.empty()) {
    // The longest waiting first: what holds the rollout or the scale-up.
    std::sort(unready.begin(), unready.end(), [](const auto& a, const auto& b) {
      return a.second.not_ready_since_ms < b.second.not_ready_since_ms;
    });
    const auto& [job_id, h] = unready.front();
    round.waiting =
        fmt::format("replica job {} of revision {} not ready for {}{}{}", job_id, service.revision,
                    FormatDurationMs(std::max<TimeMs>(now - h.not_ready_since_ms, 0)),
                    h.probe_detail.empty() ? "" : ": " + h.probe_detail,
                    unready.size() > 1 ? fmt::format(" (and {} more)", unready.size() - 1) : "");
    if (plan.phase == sched::ReplicaPhase::kRolloutPaused) {
      round.waiting += fmt::format(
          "; the rollout is paused past its {} progress deadline and the old revision keeps "
          "serving: fix the new revision (berth svc apply) or roll back (berth svc rollback)",
          FormatDurationMs(in.progress_deadline_ms));
    }
  }
  Status failed = Ok();
  for (const auto& stop : plan.stop) {
    const std::string why =
        stop.cause == sched::ReplicaStopCause::kReplaced
            ? fmt::format("berth: service {} replaced it with revision {}", key, service.revision)
            : fmt::format("berth: service {} scaled to {}", key, in.desired);
    if (auto st = StopReplica(service.tenant, service.name, stop.job_id,
                              sched::ReplicaStopCauseName(stop.cause), why, now);
        !st) {
      if (failed) failed = st;
    }
  }
  const model::JobSpec spec = ReplicaSpec(service);
  for (std::uint32_t i = 0; i < plan.create; ++i) {
    auto ids =
        controller_.Submit(spec, service.updated_by, [&](const std::vector<std::int64_t>& made) {
          const json after{{"revision", service.revision},
                           {"job", made.empty() ? json(nullptr) : json(made.front())}};
          return std::optional<store::AuditEntry>(
              ReplicaRecord(service.tenant, service.name, "service.replica.start", after, now));
        });
    if (!ids) {
      // Refused as a job would be (a pending limit, quota, a queue gone):
      // said in the service's status, tried again next round.
      round.refused = ids.error().message;
      spdlog::warn("service {}: replica refused: {}", key, ids.error().message);
      break;
    }
  }
  std::lock_guard lock(rounds_mu_);
  rounds_[key] = std::move(round);
  return failed;
}

void ServiceController::Start(std::chrono::milliseconds interval) {
  thread_ = std::thread([this, interval] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      woken_ = false;
      lock.unlock();
      if (auto st = Reconcile(); !st) {
        spdlog::error("services: reconcile failed (retried): {}", st.error().message);
      }
      lock.lock();
      cv_.wait_for(lock, interval, [this] { return stop_ || woken_; });
    }
  });
}

void ServiceController::Wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void ServiceController::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace berth::server
