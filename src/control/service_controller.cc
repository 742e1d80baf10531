#include "control/service_controller.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
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

bool ServiceController::Autoscales(const model::ServiceSpec& spec) {
  return spec.replicas.max > spec.replicas.min ||
         (spec.autoscaling.scale_to_zero.enabled && spec.replicas.min == 0);
}

void ServiceController::SetGateway(gateway::Gateway* gateway, std::string public_url,
                                   GatewayApi api) {
  gateway_ = gateway;
  gateway_url_ = std::move(public_url);
  api_ = std::move(api);
  gateway_up_.store(gateway != nullptr);
}

std::optional<ServiceController::GatewayView> ServiceController::GatewayState() const {
  if (gateway_ == nullptr) return std::nullopt;
  return GatewayView{gateway_url_, gateway_up_.load()};
}

std::string ServiceController::Endpoint(const std::string& tenant, const std::string& name) const {
  if (gateway_ == nullptr) return {};
  gateway::Route r;
  r.tenant = tenant;
  r.service = name;
  return gateway_url_ + gateway::RoutePrefix(r);
}

std::vector<server::ServiceSloFigures> ServiceController::SloFigures(TimeMs now,
                                                                     std::int64_t window_ms) const {
  std::vector<server::ServiceSloFigures> out;
  std::lock_guard lock(slo_mu_);
  for (const auto& [key, series] : slo_) {
    server::ServiceSloFigures f;
    f.tenant = series.tenant;
    f.service = series.name;
    f.latency_p95_ms = series.latency_p95_ms;
    f.availability_ppm = series.availability_ppm;
    for (const auto& w : series.windows) {
      if (w.at_ms <= now - window_ms || w.at_ms > now) continue;
      ++f.windows;
      f.windows_missed += w.met ? 0 : 1;
      f.requests += w.requests;
      f.errors += w.errors;
    }
    if (f.windows > 0) out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<gateway::RouteLatencyHistogram>> ServiceController::LatencyHistograms() const {
  if (gateway_ == nullptr) return std::vector<gateway::RouteLatencyHistogram>{};
  return gateway_->LatencyHistograms();
}

std::map<std::string, gateway::RouteStats> ServiceController::GatewayStats() {
  std::map<std::string, gateway::RouteStats> out;
  if (gateway_ == nullptr) return out;
  auto stats = gateway_->Stats();
  if (!stats) {
    spdlog::warn("gateway: cannot read its counters (retried next round): {}",
                 stats.error().message);
    return out;
  }
  for (auto& r : *stats) {
    std::string key = ServiceKey(r.tenant, r.service);
    out.emplace(std::move(key), std::move(r));
  }
  return out;
}

std::map<std::string, gateway::RouteLatency> ServiceController::GatewayLatency() {
  std::map<std::string, gateway::RouteLatency> out;
  if (gateway_ == nullptr) return out;
  auto latency = gateway_->TakeLatency();
  if (!latency) {
    spdlog::warn("gateway: cannot read its request log: {}", latency.error().message);
    return out;
  }
  for (auto& r : *latency) {
    std::string key = ServiceKey(r.tenant, r.service);
    out.emplace(std::move(key), std::move(r));
  }
  return out;
}

Result<std::map<std::string, RouteNode>> ServiceController::RouteNodes() {
  std::map<std::string, RouteNode> out;
  if (gateway_ == nullptr) return out;
  auto nodes = store_.ListNodes();
  if (!nodes) return std::unexpected(nodes.error());
  for (const auto& n : *nodes) {
    out[n.info.name] = {n.info.address, n.state == model::NodeState::kReady};
  }
  return out;
}

void ServiceController::SyncGateway(const std::vector<gateway::Route>& routes) {
  if (gateway_ == nullptr) return;
  auto report = gateway_->Sync(routes);
  gateway_up_.store(report.has_value());
  if (!report) {
    spdlog::error("gateway: sync failed (retried next round): {}", report.error().message);
    return;
  }
  if (report->restarted) spdlog::warn("gateway: HAProxy was gone and was started again");
  for (const auto& r : report->routes_added) spdlog::info("gateway: route {} added", r);
  for (const auto& r : report->routes_removed) spdlog::info("gateway: route {} removed", r);
  for (const auto& r : report->added) spdlog::info("gateway: {} joined", r);
  for (const auto& r : report->enabled) spdlog::info("gateway: {} takes requests again", r);
  for (const auto& r : report->drained) spdlog::info("gateway: {} draining", r);
  for (const auto& r : report->removed) spdlog::info("gateway: {} removed", r);
}

Status ServiceController::StopDrained(const std::map<std::string, gateway::RouteStats>& stats,
                                      TimeMs now) {
  Status failed = Ok();
  for (auto it = draining_.begin(); it != draining_.end();) {
    const std::int64_t job_id = it->first;
    const Drain& d = it->second;
    bool idle = true;
    if (auto route = stats.find(ServiceKey(d.tenant, d.name)); route != stats.end()) {
      const std::string id = ReplicaServerId(job_id);
      for (const auto& server : route->second.servers) {
        if (server.id != id) continue;
        // Still taking new requests (the sync has not reached it yet), or
        // finishing some: wait.
        idle = server.state != gateway::ServerState::kReady && server.current == 0 &&
               server.queued == 0;
      }
    }
    const bool expired = now - d.since_ms >= kReplicaDrainTimeoutMs;
    if (!idle && !expired) {
      ++it;
      continue;
    }
    const std::string why =
        expired ? d.why + " (after draining for " + FormatDurationMs(kReplicaDrainTimeoutMs) + ")"
                : d.why;
    if (auto st = StopReplica(d.tenant, d.name, job_id, d.cause, why, now); !st) {
      if (failed) failed = st;
      ++it;
      continue;
    }
    spdlog::info("service {}/{}: replica job {} drained and stopped ({})", d.tenant, d.name, job_id,
                 d.cause);
    it = draining_.erase(it);
  }
  return failed;
}

bool ServiceController::HeldAtZero() {
  if (gateway_ == nullptr || !watch_zero_.load()) return false;
  auto stats = gateway_->Stats();
  if (!stats) return false;
  for (const auto& r : *stats) {
    if (r.held_now > 0 && at_zero_.contains(ServiceKey(r.tenant, r.service))) return true;
  }
  return false;
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
  // The minimum's replicas are not taken by training's preemption; the
  // controller makes those above it preemptible (ReplicaPreemptible).
  j.preemptible = false;
  j.service = model::ServiceOwner{service.name, service.revision, s.port};
  // Its agent probes it (agent/prober.h); a replica changes with its
  // revision's probes only when something else of its spec changes too.
  j.service->readiness = s.readiness;
  j.service->liveness = s.liveness;
  return j;
}

bool ServiceController::ReplicaPreemptible(const model::ServiceSpec& spec,
                                           std::uint32_t guaranteed) {
  return guaranteed >= spec.replicas.min;
}

bool ServiceController::RunsCurrentSpec(const store::ServiceRecord& service,
                                        const model::JobSpec& replica) {
  if (!replica.service) return false;
  if (replica.service->revision == service.revision) return true;
  model::JobSpec current = ReplicaSpec(service);
  model::JobSpec other = replica;
  current.service.reset();
  other.service.reset();
  current.preemptible = other.preemptible;  // above the minimum or not: the same spec
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

model::SessionLimits ServiceController::SessionLimitsOf(const model::ServiceSpec& spec,
                                                        const model::Policy& policy) {
  model::SessionLimits limits = spec.session;
  const model::QueuePolicy* queue = policy.FindQueue(spec.tenant + "/" + spec.queue);
  if (queue != nullptr && queue->max_session_lifetime_ms) {
    limits.max_lifetime_ms = std::min(limits.max_lifetime_ms, *queue->max_session_lifetime_ms);
  }
  return limits;
}

Result<bool> ServiceController::EndSessionIfDone(
    const store::ServiceRecord& service, const model::SessionLimits& limits,
    const std::vector<store::JobRecord>& replicas, const gateway::RouteStats* stats,
    std::optional<std::vector<model::GpuSample>>& latest, TimeMs now) {
  const std::string key = ServiceKey(service.tenant, service.name);
  SessionSeen& seen = sessions_[key];
  // Its running replica's current run: what its GPU readings name.
  std::string run_id;
  for (const auto& job : replicas) {
    if (job.cancel_requested || job.state != model::JobState::kRunning) continue;
    for (const auto& r : job.runs) {
      if (r.state == model::RunState::kRunning) run_id = r.run_id;
    }
  }
  const bool running = !run_id.empty();
  if (running && !seen.running) seen.running_since_ms = now;
  seen.running = running;
  if (stats != nullptr) {
    const std::int64_t requests = stats->total + stats->held_total;
    if (seen.requests && requests != *seen.requests) seen.last_request_ms = now;
    seen.requests = requests;
  }
  if (running && telemetry_) {
    if (!latest) latest = telemetry_();
    for (const auto& sample : *latest) {
      if (sample.at_ms < now - kSessionTelemetryFreshMs) continue;
      if (sample.util_pct < limits.idle_gpu_util_pct) continue;
      if (std::find(sample.run_ids.begin(), sample.run_ids.end(), run_id) == sample.run_ids.end()) {
        continue;
      }
      seen.last_gpu_busy_ms = std::max(seen.last_gpu_busy_ms, std::min(sample.at_ms, now));
    }
  }
  sched::SessionActivity activity;
  activity.started_ms = service.created_ms;
  activity.running = running;
  activity.running_since_ms = seen.running_since_ms;
  activity.last_request_ms = seen.last_request_ms;
  activity.last_gpu_busy_ms = seen.last_gpu_busy_ms;
  const bool capped = limits.max_lifetime_ms < service.spec.session.max_lifetime_ms;
  sched::SessionVerdict verdict = sched::JudgeSession(
      limits, activity, now,
      capped ? "its queue's max_session_lifetime in the policy" : "session.max_lifetime");
  if (verdict.end == sched::SessionEnd::kNone) {
    session_verdicts_[key] = std::move(verdict);
    return false;
  }
  const std::string cause(sched::SessionEndName(verdict.end));
  for (const auto& job : replicas) {
    if (job.cancel_requested) continue;
    BERTH_RETURN_IF_ERROR(StopReplica(service.tenant, service.name, job.id, cause,
                                      fmt::format("berth: {}", verdict.reason), now));
  }
  auto gone = store_.DeleteService(
      service.tenant, service.name, "berth", now, [&](const store::ServiceRecord& was) {
        return std::optional<store::AuditEntry>(ReplicaRecord(service.tenant, service.name,
                                                              "session.end",
                                                              json{{"revision", was.revision},
                                                                   {"cause", cause},
                                                                   {"reason", verdict.reason},
                                                                   {"started_ms", was.created_ms},
                                                                   {"started_by", was.created_by}},
                                                              now));
      });
  // Deleted meanwhile (berth session stop): its replica is stopped all the same.
  if (!gone && gone.error().code != Code::kNotFound) return std::unexpected(gone.error());
  spdlog::info("session {} ended: {}", key, verdict.reason);
  sessions_.erase(key);
  return true;
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

  // Replicas being drained that have ended on their own meanwhile.
  std::erase_if(draining_, [&](const auto& entry) {
    const auto it = by_service.find(ServiceKey(entry.second.tenant, entry.second.name));
    return it == by_service.end() ||
           std::none_of(it->second.begin(), it->second.end(), [&](const store::JobRecord& j) {
             return j.id == entry.first && !j.cancel_requested;
           });
  });
  const std::map<std::string, gateway::RouteStats> stats = GatewayStats();
  const std::map<std::string, gateway::RouteLatency> latency = GatewayLatency();
  auto nodes = RouteNodes();
  if (!nodes) return std::unexpected(nodes.error());
  std::vector<gateway::Route> routes;
  std::set<std::string> at_zero;

  std::map<std::string, ServiceRound> seen;
  std::map<std::string, Signals> signals;
  std::optional<std::vector<model::GpuSample>> latest_gpus;  // read once, when a session needs it
  std::optional<std::shared_ptr<const store::PolicyVersion>> policy;  // likewise
  std::set<std::string> sessions;
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
      const auto route_stats = stats.find(key);
      const auto route_latency = latency.find(key);
      if (service.spec.kind == model::ServiceKind::kSession) {
        sessions.insert(key);
        if (!policy) {
          auto active = controller_.ActivePolicy();
          if (!active) return std::unexpected(active.error());
          policy = std::move(*active);
        }
        auto ended = EndSessionIfDone(
            service, SessionLimitsOf(service.spec, (*policy)->policy), mine,
            route_stats == stats.end() ? nullptr : &route_stats->second, latest_gpus, now);
        if (!ended && failed) failed = std::unexpected(ended.error());
        if (ended && *ended) {
          // Its replica is stopping and its route leaves the gateway below.
          if (it != by_service.end()) by_service.erase(it);
          continue;
        }
      }
      if (auto st = ReconcileOne(
              service, mine, now, route_stats == stats.end() ? nullptr : &route_stats->second,
              route_latency == latency.end() ? nullptr : &route_latency->second, *nodes, routes);
          !st && failed) {
        failed = st;
      }
      if (auto sig = signals_.find(key); sig != signals_.end()) {
        signals.emplace(key, std::move(sig->second));
      }
      // Scaled to zero (the autoscaler wants none): a held request is what
      // changes that, looked for between rounds.
      if (auto r = next_rounds_.find(key); gateway_ != nullptr && r != next_rounds_.end() &&
                                           r->second.desired == 0 &&
                                           service.spec.autoscaling.scale_to_zero.enabled) {
        at_zero.insert(key);
      }
      if (it != by_service.end()) by_service.erase(it);
      if (auto r = next_rounds_.find(key); r != next_rounds_.end()) {
        seen[key] = std::move(r->second);
      } else {
        // The round failed for it: its last findings stand.
        std::lock_guard lock(rounds_mu_);
        if (auto old = rounds_.find(key); old != rounds_.end()) seen[key] = old->second;
      }
    }
    if (page->size() < filter.limit) break;
    filter.before_id = page->back().id;
  }
  next_rounds_.clear();
  session_verdicts_.clear();
  {
    // Services deleted since: their SLO windows go with them.
    std::lock_guard lock(slo_mu_);
    std::erase_if(slo_, [&](const auto& entry) { return !seen.contains(entry.first); });
  }
  std::erase_if(sessions_, [&](const auto& entry) { return !sessions.contains(entry.first); });
  signals_ = std::move(signals);  // services deleted since: forgotten
  watch_zero_.store(!at_zero.empty());
  at_zero_ = std::move(at_zero);
  if (gateway_ != nullptr) {
    SyncGateway(routes);
    if (!draining_.empty()) {
      // Drained at once when no request was in flight: stopped this round.
      if (auto st = StopDrained(GatewayStats(), now); !st && failed) failed = st;
    }
  }
  // What is still draining once the idle ones have been stopped.
  for (auto& [key, round] : seen) round.draining = 0;
  for (const auto& [job_id, d] : draining_) {
    if (auto r = seen.find(ServiceKey(d.tenant, d.name)); r != seen.end()) ++r->second.draining;
  }
  {
    std::lock_guard lock(rounds_mu_);
    rounds_ = std::move(seen);
  }
  // Replicas whose service is gone (its route left the gateway above).
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
  bool due = false;
  {
    std::lock_guard lock(traffic_mu_);
    due = now - traffic_written_ms_ >= kTrafficWriteIntervalMs;
  }
  if (due) {
    if (auto st = FlushTraffic(now); !st) {
      spdlog::warn("services: request counts not written (retried next minute): {}",
                   st.error().message);
    }
  }
  return failed;
}

Result<store::RolloutProgress> ServiceController::CanaryProgress(
    const store::ServiceRecord& service, const std::vector<store::JobRecord>& replicas,
    TimeMs now) {
  auto recorded = store_.GetRolloutProgress(service.tenant, service.name);
  if (!recorded) return std::unexpected(recorded.error());
  if (*recorded && (*recorded)->revision == service.revision) return **recorded;
  // This revision's rollout starts: at its first step, unless
  //  - the replicas of the revision whose rollout was under way run this
  //    revision's spec too (a scale, a change of its SLO): it goes on where
  //    it was;
  //  - replicas of an older revision already run it (a rollback to what
  //    still serves): the steps are skipped.
  store::RolloutProgress next{service.revision, 0, now, "berth"};
  bool carried = false;
  bool serving = false;
  for (const auto& job : replicas) {
    if (job.cancel_requested || !job.spec.service || !RunsCurrentSpec(service, job.spec)) continue;
    const std::int64_t revision = job.spec.service->revision;
    if (*recorded && revision == (*recorded)->revision) {
      carried = true;
    } else if (revision != service.revision) {
      serving = true;
    }
  }
  if (carried) {
    next.step = (*recorded)->step;
    next.since_ms = (*recorded)->since_ms;
  } else if (serving) {
    next.step = static_cast<std::uint32_t>(service.spec.rollout.canary.size());
  }
  return store_.SetRolloutProgress(service.tenant, service.name, *recorded, next);
}

store::ServiceTraffic ServiceController::TrafficOf(const std::string& tenant,
                                                   const std::string& name,
                                                   const gateway::RouteLatency& window, bool met,
                                                   TimeMs now) {
  store::ServiceTraffic t;
  t.tenant = tenant;
  t.service = name;
  t.hour_ms = now - now % store::kTrafficHourMs;
  t.requests = window.requests;
  t.responses_2xx = window.responses_2xx;
  t.responses_4xx = window.responses_4xx;
  t.responses_5xx = window.responses_5xx;
  t.held = window.held;
  t.latency_sum_ms = window.sum_ms;
  t.latency_min_ms = window.min_ms;
  t.latency_max_ms = window.max_ms;
  for (const auto& [b, n] : window.buckets) t.latency_buckets[b] += n;
  if (window.requests > 0) {
    t.slo_windows = 1;
    t.slo_windows_met = met ? 1 : 0;
  }
  return t;
}

void ServiceController::KeepTraffic(store::ServiceTraffic t) {
  // traffic_mu_ held.
  std::string key = fmt::format("{}/{}/{}", t.tenant, t.service, t.hour_ms);
  if (auto [it, fresh] = traffic_pending_.try_emplace(std::move(key), t); !fresh) {
    it->second.Add(t);
  }
}

Status ServiceController::FlushTraffic(TimeMs now) {
  if (traffic_ == nullptr) return Ok();
  std::vector<store::ServiceTraffic> rows;
  {
    std::lock_guard lock(traffic_mu_);
    traffic_written_ms_ = now;
    if (traffic_pending_.empty()) return Ok();
    for (auto& [key, t] : traffic_pending_) rows.push_back(std::move(t));
    traffic_pending_.clear();
  }
  if (auto st = traffic_->Add(rows, now); !st) {
    // Kept for the next write: counts are added, so nothing is counted twice.
    std::lock_guard lock(traffic_mu_);
    for (auto& t : rows) KeepTraffic(std::move(t));
    return st;
  }
  return Ok();
}

Status ServiceController::ReconcileOne(const store::ServiceRecord& service,
                                       const std::vector<store::JobRecord>& replicas, TimeMs now,
                                       const gateway::RouteStats* stats,
                                       const gateway::RouteLatency* latency,
                                       const std::map<std::string, RouteNode>& nodes,
                                       std::vector<gateway::Route>& routes) {
  const std::string key = ServiceKey(service.tenant, service.name);
  const model::ServiceSpec& spec = service.spec;
  sched::ReplicaPlanInput in;
  in.revision = service.revision;
  in.desired = DesiredReplicas(spec);
  in.rollout = spec.rollout;
  in.now_ms = now;
  std::uint32_t current = 0;
  std::uint32_t guaranteed = 0;  // live non-preemptible replicas of the current revision
  std::uint32_t ready = 0;
  std::uint32_t starting = 0;
  // The current revision's replicas running but not ready, for the status.
  std::vector<std::pair<std::int64_t, ReplicaHealth>> unready;
  // Every live replica, for the gateway's route.
  std::vector<RoutedReplica> routed;
  std::set<std::int64_t> current_ids;  // those that run the current spec
  for (const auto& job : replicas) {
    ReplicaHealth h = HealthOf(job);
    const bool draining = draining_.contains(job.id);
    routed.push_back({job.id, h.node, h.port, h.ready, job.cancel_requested || draining});
    if (job.cancel_requested || draining) continue;  // stopping already
    // A replica that runs the current spec counts as the current revision's.
    const bool same = RunsCurrentSpec(service, job.spec);
    const std::int64_t revision = same ? service.revision : job.spec.service->revision;
    const bool preemptible = job.spec.preemptible.value_or(false);
    in.replicas.push_back({job.id, revision, h.ready, h.not_ready_since_ms, preemptible});
    if (same) {
      ++current;
      current_ids.insert(job.id);
    }
    if (same && !preemptible) ++guaranteed;
    if (h.ready) {
      ++ready;
    } else {
      ++starting;
    }
    if (same && h.running && !h.ready) unready.emplace_back(job.id, std::move(h));
  }

  // The autoscaler, on what the gateway counted.
  Signals& sig = signals_[key];
  std::optional<sched::AutoscaleReason> autoscale;
  std::string unmeasured;
  if (gateway_ != nullptr && Autoscales(spec)) {
    const model::Autoscaling& as = spec.autoscaling;
    if (stats != nullptr) {
      sched::AutoscaleSample sample = SampleOf(*stats, latency, as.signal, sig.counters, now);
      bool measured = true;
      if (as.signal == model::AutoscaleSignal::kMetric) {
        // Read from the replicas themselves; with none ready, 0 (a held
        // request still scales from zero).
        const MetricScrape m = ScrapeMetric(as.metric, routed, nodes);
        if (m.value_milli) {
          sample.value_milli = *m.value_milli;
        } else if (m.replicas > 0) {
          measured = false;  // no replica answered: no sample, rather than a false 0
        }
        if (m.answered < m.replicas) {
          unmeasured = fmt::format("metric {}: {} of {} ready replicas answered; {}", as.metric,
                                   m.answered, m.replicas, m.error);
        }
      }
      if (measured) sig.samples.push_back(sample);
      const std::int64_t keep = std::max(as.stable_window_ms, as.panic_window_ms);
      while (!sig.samples.empty() && sig.samples.front().time_ms <= now - keep) {
        sig.samples.pop_front();
      }
    }
    const std::vector<sched::AutoscaleSample> window(sig.samples.begin(), sig.samples.end());
    sched::AutoscaleInput ai;
    ai.spec = as;
    ai.replicas = spec.replicas;
    ai.now_ms = now;
    ai.ready = ready;
    ai.starting = starting;
    ai.samples = window;
    ai.state = sig.state;
    sched::AutoscaleDecision d = sched::Decide(ai);
    sig.state = std::move(d.state);
    in.desired = d.desired;
    if (d.reason.code == sched::AutoscaleCode::kScaleFromZero && !sig.cold_start_since_ms) {
      sig.cold_start_since_ms = now;
    }
    autoscale = d.reason;
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
  // A rollout with canary steps runs them first.
  const auto steps = static_cast<std::uint32_t>(spec.rollout.canary.size());
  std::optional<store::RolloutProgress> progress;
  const bool rolling = std::any_of(in.replicas.begin(), in.replicas.end(),
                                   [&](const auto& r) { return r.revision != service.revision; });
  if (steps > 0 && rolling) {
    auto p = CanaryProgress(service, replicas, now);
    if (!p) return std::unexpected(p.error());
    progress = *p;
    if (p->step < steps) {
      if (sig.canary_revision != p->revision || sig.canary_step != p->step) {
        sig.canary_revision = p->revision;
        sig.canary_step = p->step;
        sig.canary_ready_since_ms = 0;
      }
      in.canary = sched::ReplicaPlanInput::CanaryAt{p->step, sig.canary_ready_since_ms};
    }
  }
  const sched::ReplicaPlan plan = sched::PlanReplicas(in);
  Status failed = Ok();
  if (plan.canary) {
    const sched::ReplicaPlan::Canary& c = *plan.canary;
    if (!c.ready) {
      sig.canary_ready_since_ms = 0;
    } else if (sig.canary_ready_since_ms == 0) {
      sig.canary_ready_since_ms = now;
    }
    if (c.advance && progress) {
      const store::RolloutProgress next{service.revision, c.step + 1, now, "berth"};
      const std::int64_t pause_ms = spec.rollout.canary[c.step].pause_ms;
      auto moved = store_.SetRolloutProgress(
          service.tenant, service.name, progress, next, [&](const store::RolloutProgress& p) {
            return std::optional<store::AuditEntry>(
                ReplicaRecord(service.tenant, service.name, "service.rollout.step",
                              json{{"revision", p.revision},
                                   {"step_ended", p.step},
                                   {"steps", steps},
                                   {"cause", fmt::format("step {} ready for its pause of {}",
                                                         c.step + 1, FormatDurationMs(pause_ms))}},
                              now));
          });
      if (moved) {
        spdlog::info("service {}: canary step {} of {} done after its pause of {}", key, c.step + 1,
                     steps, FormatDurationMs(pause_ms));
        Wake();  // the next step at once, not a round later
      } else if (moved.error().code != Code::kFailedPrecondition) {
        failed = std::unexpected(moved.error());
      }
    }
  }

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
  if (plan.canary) {
    const sched::ReplicaPlan::Canary& c = *plan.canary;
    std::string text = fmt::format(
        "canary step {} of {}: {}% of the requests to revision {} on {} {}", c.step + 1, steps,
        c.weight_pct, service.revision, c.replicas, c.replicas == 1 ? "replica" : "replicas");
    const std::string then =
        c.step + 1 < steps ? "the next step" : "the rolling update of the rest";
    if (!c.ready) {
      text += " once ready";
    } else if (c.awaiting_resume) {
      text += fmt::format("; {} waits for berth svc rollout resume {}", then, key);
    } else if (c.pause_ends_ms) {
      text += fmt::format("; {} in {}", then,
                          FormatDurationMs(std::max<TimeMs>(*c.pause_ends_ms - now, 0)));
    }
    round.waiting = round.waiting.empty() ? text : text + "; " + round.waiting;
    round.canary = c;
    round.canary_steps = steps;
  }
  if (!unmeasured.empty()) {
    round.waiting = round.waiting.empty() ? unmeasured : round.waiting + "; " + unmeasured;
  }
  round.autoscale = autoscale;
  if (auto v = session_verdicts_.find(key); v != session_verdicts_.end()) round.session = v->second;
  if (stats != nullptr) round.traffic = *stats;
  if (latency != nullptr) round.latency = *latency;
  if (gateway_ != nullptr) {
    // The SLO over the last hour: each round's window of requests.
    SloAttainment slo;
    slo.latency_p95_ms = spec.slo.latency_p95_ms;
    slo.availability_ppm = spec.slo.availability_ppm;
    std::lock_guard lock(slo_mu_);
    SloSeries& series = slo_[key];
    series.tenant = service.tenant;
    series.name = service.name;
    series.latency_p95_ms = spec.slo.latency_p95_ms;
    series.availability_ppm = spec.slo.availability_ppm;
    if (latency != nullptr && latency->requests > 0) {
      const bool met = spec.slo.latency_p95_ms <= 0 ||
                       latency->p95_ms <= static_cast<double>(spec.slo.latency_p95_ms);
      series.windows.push_back({now, latency->requests, latency->responses_5xx, met});
      if (traffic_ != nullptr) {
        store::ServiceTraffic t = TrafficOf(service.tenant, service.name, *latency, met, now);
        std::lock_guard traffic_lock(traffic_mu_);
        KeepTraffic(std::move(t));
      }
    }
    while (!series.windows.empty() && series.windows.front().at_ms <= now - kSloWindowMs) {
      series.windows.pop_front();
    }
    for (const auto& w : series.windows) {
      ++slo.windows;
      slo.windows_met += w.met ? 1 : 0;
      slo.requests += w.requests;
      slo.errors += w.errors;
    }
    round.slo = slo;
  }
  for (const auto& stop : plan.stop) {
    const std::string why =
        stop.cause == sched::ReplicaStopCause::kReplaced
            ? fmt::format("berth: service {} replaced it with revision {}", key, service.revision)
            : fmt::format("berth: service {} scaled to {}", key, in.desired);
    auto r = std::find_if(routed.begin(), routed.end(),
                          [&](const RoutedReplica& x) { return x.job_id == stop.job_id; });
    if (gateway_ != nullptr && r != routed.end() && r->ready) {
      // In the route: it leaves it first and finishes its requests; a later
      // pass stops it (StopDrained).
      draining_[stop.job_id] = {service.tenant, service.name, now,
                                std::string(sched::ReplicaStopCauseName(stop.cause)), why};
      r->stopping = true;
      continue;
    }
    if (auto st = StopReplica(service.tenant, service.name, stop.job_id,
                              sched::ReplicaStopCauseName(stop.cause), why, now);
        !st) {
      if (failed) failed = st;
    }
  }
  if (gateway_ != nullptr) {
    routes.push_back(RouteOf(service, routed, nodes, api_));
    if (plan.canary) {
      // The step's share of the requests to the new revision's servers.
      std::uint32_t n_current = 0;
      for (const auto& b : routes.back().backends) {
        n_current += current_ids.contains(ReplicaOfServer(b.id).value_or(0)) ? 1 : 0;
      }
      const auto n_old = static_cast<std::uint32_t>(routes.back().backends.size() - n_current);
      const auto [w_current, w_old] =
          sched::CanaryWeights(plan.canary->weight_pct, n_current, n_old);
      for (auto& b : routes.back().backends) {
        b.weight = current_ids.contains(ReplicaOfServer(b.id).value_or(0)) ? w_current : w_old;
      }
    }
    const gateway::Route& route = routes.back();
    round.routed = static_cast<std::uint32_t>(route.backends.size());
    round.draining = static_cast<std::uint32_t>(
        std::count_if(draining_.begin(), draining_.end(), [&](const auto& d) {
          return d.second.tenant == service.tenant && d.second.name == service.name;
        }));
    if (sig.cold_start_since_ms && !route.backends.empty()) {
      // The first replica joins the route with this round's sync: the held
      // requests go through.
      const std::int64_t job_id = ReplicaOfServer(route.backends.front().id).value_or(0);
      ColdStart cold{job_id, now - *sig.cold_start_since_ms, now};
      sig.last_cold_start = cold;
      sig.cold_start_since_ms.reset();
      spdlog::info("service {}: cold start of {} (replica job {} serves the held requests)", key,
                   FormatDurationMs(cold.duration_ms), job_id);
      if (job_id > 0) {
        (void)controller_.AddJobEvent(
            job_id, "ColdStart",
            fmt::format("service {} scaled from zero: this replica joined the gateway's route {} "
                        "after the first held request was seen",
                        key, FormatDurationMs(cold.duration_ms)));
      }
    }
    round.cold_start_since_ms = sig.cold_start_since_ms;
    round.last_cold_start = sig.last_cold_start;
  }
  // Stopped replicas no longer hold the minimum.
  for (const auto& stop : plan.stop) {
    auto it = std::find_if(replicas.begin(), replicas.end(),
                           [&](const store::JobRecord& j) { return j.id == stop.job_id; });
    if (it != replicas.end() && !it->spec.preemptible.value_or(false) &&
        RunsCurrentSpec(service, it->spec) && guaranteed > 0) {
      --guaranteed;
    }
  }
  model::JobSpec replica_spec = ReplicaSpec(service);
  for (std::uint32_t i = 0; i < plan.create; ++i) {
    // The minimum's replicas first, non-preemptible; those above it borrow
    // and are preemptible.
    replica_spec.preemptible = ReplicaPreemptible(spec, guaranteed);
    if (!*replica_spec.preemptible) ++guaranteed;
    auto ids = controller_.Submit(
        replica_spec, service.updated_by, [&](const std::vector<std::int64_t>& made) {
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
  // Published with the round's other findings once the gateway has them
  // (Reconcile): a status that shows a replica routed is true.
  next_rounds_[key] = std::move(round);
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
      // While a service sits at zero, look for held requests every
      // kHeldPollInterval: one starts a round (and a replica) at once.
      const auto next = std::chrono::steady_clock::now() + interval;
      while (!stop_ && !woken_ && std::chrono::steady_clock::now() < next) {
        const auto slice = watch_zero_.load() ? kHeldPollInterval : interval;
        cv_.wait_until(lock, std::min(next, std::chrono::steady_clock::now() + slice),
                       [this] { return stop_ || woken_; });
        if (stop_ || woken_ || !watch_zero_.load()) continue;
        lock.unlock();
        const bool held = HeldAtZero();
        lock.lock();
        if (held) break;
      }
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
  if (auto st = FlushTraffic(clock_.NowMs()); !st) {
    spdlog::warn("services: the last minute of request counts was not written: {}",
                 st.error().message);
  }
}

}  // namespace berth::server
