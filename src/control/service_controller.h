// berthd's service controller: runs each stored inference service as jobs
// owned by it (docs/services.md, "Replicas"). Every round (2 s, and at once
// after a change to a service) it reads the services and their live
// replicas, asks sched::PlanReplicas what to stop and create, and does it
// through the Controller, the one writer of jobs: a replica is submitted
// like any job (admission, quota, placement, metering and audit of its
// tenant) and stopped like any job.
//
// Replicas are jobs whose spec names their service (model::ServiceOwner).
// Only this controller sets it, and the API refuses to cancel a replica
// (scale or delete the service instead). A replica whose service is gone
// (deleted, or deleted while berthd was down) is stopped.
//
// The controller keeps nothing that a restart loses but its last round's
// findings for `berth svc show`: the store holds the services and the
// replicas, and a round rebuilds everything from them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "control/service_routes.h"
#include "gateway/gateway.h"
#include "meter/alerting.h"
#include "model/job.h"
#include "model/telemetry.h"
#include "sched/autoscale.h"
#include "sched/replica_plan.h"
#include "sched/session.h"
#include "store/store.h"
#include "store/traffic_store.h"

namespace berth::server {

class Controller;

// A scale from zero, measured: from the round that saw a request held at
// the gateway to the round whose gateway sync put a ready replica in the
// route (the request then goes through).
struct ColdStart {
  std::int64_t job_id = 0;  // the replica that took the held requests
  std::int64_t duration_ms = 0;
  TimeMs at_ms = 0;  // when the replica joined the route
};

// How a service kept its SLO over the last hour (kSloWindowMs), from the
// gateway's request log, one window per round that saw requests.
struct SloAttainment {
  std::int64_t latency_p95_ms = 0;     // the spec's target; 0: none
  std::uint32_t availability_ppm = 0;  // the spec's target
  std::int64_t windows = 0;            // rounds that saw requests
  std::int64_t windows_met = 0;        // of them, p95 within the target (all, without one)
  std::int64_t requests = 0;
  std::int64_t errors = 0;  // answered 5xx (the gateway's own 503s included)
};
inline constexpr std::int64_t kSloWindowMs = 3'600'000;

// What the last round found for one service.
struct ServiceRound {
  std::int64_t revision = 0;
  std::uint32_t desired = 0;
  sched::ReplicaPhase phase = sched::ReplicaPhase::kSteady;
  std::optional<TimeMs> backoff_until_ms{};
  std::uint32_t recent_crashes = 0;
  // Why the last replica it tried to create was refused ("" when none was):
  // the admission or quota refusal, as a job's submission gets it.
  std::string refused{};
  // What the rollout or scaling waits for, in words ("" when nothing):
  // the new revision's replicas not ready yet, with their probe's outcome.
  std::string waiting{};
  TimeMs at_ms = 0;
  // With the gateway: the autoscaler's decision and its reason (absent for a
  // service whose bounds leave nothing to decide), the gateway's counters
  // for the route, the replicas in the route and being drained.
  std::optional<sched::AutoscaleReason> autoscale{};
  std::optional<gateway::RouteStats> traffic{};
  // The requests its log showed since the round before (latency, codes).
  std::optional<gateway::RouteLatency> latency{};
  std::uint32_t routed = 0;
  std::uint32_t draining = 0;
  std::optional<TimeMs> cold_start_since_ms{};  // a scale from zero under way
  std::optional<ColdStart> last_cold_start{};
  std::optional<SloAttainment> slo{};  // with the gateway
  // A session's limits as they stand (kind session only).
  std::optional<sched::SessionVerdict> session{};
  // A canary step under way (docs/services.md, "Canary steps"), and how
  // many steps the rollout has.
  std::optional<sched::ReplicaPlan::Canary> canary{};
  std::uint32_t canary_steps = 0;
};

// The newest GPU readings berthd has (TelemetryStore::Latest): what a
// session's idleness is judged on besides its requests.
using LatestTelemetry = std::function<std::vector<model::GpuSample>()>;
// A reading older than this says nothing about a session now.
inline constexpr std::int64_t kSessionTelemetryFreshMs = 120'000;

// Where one live replica stands (its job and current run): what the plan,
// the status and the metrics count.
struct ReplicaHealth {
  bool stopping = false;  // asked to stop (scaled down, replaced, deleted)
  bool running = false;   // its job runs (placed, process started)
  // Running and passing its readiness probe; a replica whose spec has no
  // readiness probe is ready once running.
  bool ready = false;
  // Running but not ready: since when (see sched::ReplicaView).
  TimeMs not_ready_since_ms = 0;
  std::string probe_detail{};  // the last probe's outcome, from its agent
  std::string node{};
  std::uint32_t port = 0;
};

// A service's live replicas, counted once for the status and /metrics.
struct ReplicaCounts {
  std::uint32_t ready = 0;      // ready, of the current spec
  std::uint32_t not_ready = 0;  // running, not (yet) passing readiness
  std::uint32_t running = 0;    // running, any revision, not stopping
  std::uint32_t starting = 0;   // not running yet (pending, placed, starting)
  std::uint32_t stopping = 0;
};

// A replica leaves the gateway's route, finishes the requests it has, and
// is stopped once none is left or after this long.
inline constexpr std::int64_t kReplicaDrainTimeoutMs = 60'000;
// How often the request counts kept by hour are written.
inline constexpr std::int64_t kTrafficWriteIntervalMs = 60'000;
// How often the loop looks for requests held at a service scaled to zero.
inline constexpr std::chrono::milliseconds kHeldPollInterval{200};

class ServiceController {
 public:
  ServiceController(store::Store& store, Controller& controller, const Clock& clock)
      : store_(store), controller_(controller), clock_(clock) {}
  ~ServiceController();
  ServiceController(const ServiceController&) = delete;
  ServiceController& operator=(const ServiceController&) = delete;

  // One round over every service at the clock's time (tests call it with a
  // ManualClock).
  [[nodiscard]] Status Reconcile();
  // Rounds every `interval` on a thread of its own, and at each Wake().
  void Start(std::chrono::milliseconds interval);
  void Stop();
  void Wake();

  std::optional<ServiceRound> LastRound(const std::string& tenant, const std::string& name) const;

  // Routes every service through `gateway` (owned by berthd, outliving
  // this controller's thread) from the next round on; its frontend is
  // reached at `public_url` ("http://127.0.0.1:8480"); it asks berthd's API
  // at `api` whether a caller may call a service (service_routes.h,
  // RouteOf). Call before Start.
  // Without a gateway, replicas are reached on their nodes' ports only and
  // a service keeps its minimum replicas.
  void SetGateway(gateway::Gateway* gateway, std::string public_url, GatewayApi api);
  // Judges sessions' idleness on these GPU readings too (without: on
  // requests alone). Call before Start.
  void SetTelemetry(LatestTelemetry latest) { telemetry_ = std::move(latest); }
  // Keeps each service's requests by hour in `traffic` (store/
  // traffic_store.h; owned by berthd, outliving this controller): added up
  // each round, written once a minute and when the controller stops. Call
  // before Start.
  void SetTrafficStore(store::ServiceTrafficStore* traffic) { traffic_ = traffic; }
  // What one round's request log adds to a service's hour: the window's
  // counts and histogram, and one SLO window (`met`: its p95 kept the
  // target) when it had requests.
  static store::ServiceTraffic TrafficOf(const std::string& tenant, const std::string& name,
                                         const gateway::RouteLatency& window, bool met, TimeMs now);
  // Writes the request counts kept since the last write (a round calls it
  // once a minute, Stop at the end).
  [[nodiscard]] Status FlushTraffic(TimeMs now);
  // Each service's SLO figures over the last `window_ms` (at most
  // kSloWindowMs) before `now`, for the alert engine's service_slo rules;
  // services without a window with requests are absent. Safe from any
  // thread.
  std::vector<server::ServiceSloFigures> SloFigures(TimeMs now, std::int64_t window_ms) const;
  // Where a service is reached through the gateway; "" without one.
  std::string Endpoint(const std::string& tenant, const std::string& name) const;
  // The gateway as callers see it (GET /v1/services, "gateway"): the URL
  // its frontend is reached at and whether it serves, as the last round's
  // sync found it (true from a successful start until a sync fails).
  // nullopt without a gateway. Safe from any thread.
  struct GatewayView {
    std::string url;
    bool up = false;
  };
  std::optional<GatewayView> GatewayState() const;
  // Per service, every request the gateway logged since berthd started
  // (cumulative latency buckets and status counts, for /metrics); empty
  // without a gateway. Safe from any thread.
  Result<std::vector<gateway::RouteLatencyHistogram>> LatencyHistograms() const;

  // How many replicas a service wants without the autoscaler: its minimum.
  static std::uint32_t DesiredReplicas(const model::ServiceSpec& spec);
  // Whether the autoscaler has anything to decide: room between min and
  // max, or scale to zero.
  static bool Autoscales(const model::ServiceSpec& spec);
  // The job a replica of `service`'s current revision is (non-preemptible:
  // the kind of the minimum's replicas; ReplicaPreemptible says which kind a
  // new replica is).
  static model::JobSpec ReplicaSpec(const store::ServiceRecord& service);
  // Whether a new replica is preemptible (docs/services.md, "Replicas"): the
  // minimum's replicas are not, those above it are. `guaranteed` counts the
  // service's live (not stopping) non-preemptible replicas of its current
  // revision.
  static bool ReplicaPreemptible(const model::ServiceSpec& spec, std::uint32_t guaranteed);
  // Whether `replica` runs what the service's current revision would start:
  // its job spec is ReplicaSpec's but for the revision that made it. A
  // revision that changes only what is not in a replica (its bounds, its
  // autoscaling, its SLO) keeps the replicas it has, as Kubernetes keeps a
  // Deployment's pods when only its replica count changes. Whether the
  // replica is preemptible (above the minimum) is no difference.
  static bool RunsCurrentSpec(const store::ServiceRecord& service, const model::JobSpec& replica);
  // `job` must have been read with its runs.
  static ReplicaHealth HealthOf(const store::JobRecord& job);
  // A session's limits under `policy`: its spec's, its lifetime cut to its
  // queue's max_session_lifetime when that is shorter.
  static model::SessionLimits SessionLimitsOf(const model::ServiceSpec& spec,
                                              const model::Policy& policy);
  static ReplicaCounts CountReplicas(const store::ServiceRecord& service,
                                     const std::vector<const store::JobRecord*>& replicas);

 private:
  // What the controller remembers of a service between rounds (lost on a
  // restart, and rebuilt: the autoscaler starts from no data).
  struct Signals {
    std::deque<sched::AutoscaleSample> samples;
    sched::AutoscaleState state;
    RouteCounters counters;
    std::optional<TimeMs> cold_start_since_ms;
    std::optional<ColdStart> last_cold_start;
    // The canary step last seen (revision, step) and since when all its
    // replicas have been ready (0: not all). Lost on a restart: a step's
    // pause then counts again, which delays a step, never hastens one.
    std::int64_t canary_revision = 0;
    std::uint32_t canary_step = 0;
    TimeMs canary_ready_since_ms = 0;
  };
  // A service's last hour of request-log windows, one per round that saw
  // requests: time, requests, 5xx, p95 met; with the spec's targets. Read by
  // the alert engine's thread too (SloFigures), so guarded by slo_mu_.
  struct SloWindow {
    TimeMs at_ms = 0;
    std::int64_t requests = 0;
    std::int64_t errors = 0;
    bool met = false;
  };
  struct SloSeries {
    std::string tenant;
    std::string name;
    std::int64_t latency_p95_ms = 0;
    std::uint32_t availability_ppm = 0;
    std::deque<SloWindow> windows;
  };
  // What a round saw of a session's activity (lost on a restart: the idle
  // window then starts again, so a restart never culls early).
  struct SessionSeen {
    bool running = false;
    TimeMs running_since_ms = 0;
    std::optional<std::int64_t> requests{};  // the route's requests and holds so far
    TimeMs last_request_ms = 0;
    TimeMs last_gpu_busy_ms = 0;
  };
  // A replica leaving the route before it is stopped.
  struct Drain {
    std::string tenant;
    std::string name;
    TimeMs since_ms = 0;
    std::string cause;
    std::string why;
  };

  // Where the rollout of `service` stands when its canary steps apply (it
  // has steps and replicas of an older revision run): read from the store,
  // and recorded there when this revision's rollout starts. Its step is the
  // steps' count when they are done or skipped.
  Result<store::RolloutProgress> CanaryProgress(const store::ServiceRecord& service,
                                                const std::vector<store::JobRecord>& replicas,
                                                TimeMs now);
  Status ReconcileOne(const store::ServiceRecord& service,
                      const std::vector<store::JobRecord>& replicas, TimeMs now,
                      const gateway::RouteStats* stats, const gateway::RouteLatency* latency,
                      const std::map<std::string, RouteNode>& nodes,
                      std::vector<gateway::Route>& routes);
  // The gateway's part of a round: its counters by "tenant/name" before,
  // the routes after. Errors are logged; a round goes on without them.
  std::map<std::string, gateway::RouteStats> GatewayStats();
  std::map<std::string, gateway::RouteLatency> GatewayLatency();
  Result<std::map<std::string, RouteNode>> RouteNodes();
  void SyncGateway(const std::vector<gateway::Route>& routes);
  // Stops the drained replicas that no request can reach any more (or
  // that drained for kReplicaDrainTimeoutMs); `stats` as GatewayStats.
  Status StopDrained(const std::map<std::string, gateway::RouteStats>& stats, TimeMs now);
  // Between rounds: whether a request waits at a service with no replica.
  bool HeldAtZero();
  Status StopReplica(const std::string& tenant, const std::string& name, std::int64_t job_id,
                     std::string_view cause, const std::string& why, TimeMs now);
  // A session's round before its replicas' (docs/services.md, "Interactive
  // sessions"): updates what was seen of it and judges it; a session past
  // its lifetime or idle window has its replica stopped with the reason and
  // is deleted (returns true). `latest` is this round's GPU readings, read
  // at most once per round.
  Result<bool> EndSessionIfDone(const store::ServiceRecord& service,
                                const model::SessionLimits& limits,
                                const std::vector<store::JobRecord>& replicas,
                                const gateway::RouteStats* stats,
                                std::optional<std::vector<model::GpuSample>>& latest, TimeMs now);

  store::Store& store_;
  Controller& controller_;
  const Clock& clock_;
  mutable std::mutex rounds_mu_;
  std::map<std::string, ServiceRound> rounds_;  // by "tenant/name"
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::thread thread_;
  // Only the round's thread (or a test's Reconcile) touches these.
  gateway::Gateway* gateway_ = nullptr;
  std::string gateway_url_;
  GatewayApi api_;                                   // as the gateway reaches it
  std::map<std::string, Signals> signals_;           // by "tenant/name"
  std::map<std::string, ServiceRound> next_rounds_;  // this round's, before it is published
  std::map<std::int64_t, Drain> draining_;           // by replica job id
  // Some service is at zero replicas and would scale from zero: the loop
  // looks for held requests between rounds.
  std::atomic<bool> watch_zero_{false};
  // Whether the last sync of the gateway succeeded (GatewayState); written
  // by the round's thread, read by the API's.
  std::atomic<bool> gateway_up_{false};
  std::set<std::string> at_zero_;  // "tenant/name" of services scaled to zero
  LatestTelemetry telemetry_;
  store::ServiceTrafficStore* traffic_ = nullptr;
  // Requests not yet written, by "tenant/name/hour"; guarded by traffic_mu_
  // (the round's thread adds, Stop flushes after it ends).
  std::mutex traffic_mu_;
  std::map<std::string, store::ServiceTraffic> traffic_pending_;
  // Adds `t` to its pending hour (traffic_mu_ held).
  void KeepTraffic(store::ServiceTraffic t);
  TimeMs traffic_written_ms_ = 0;
  mutable std::mutex slo_mu_;
  std::map<std::string, SloSeries> slo_;         // by "tenant/name"
  std::map<std::string, SessionSeen> sessions_;  // by "tenant/name"
  // Each session's verdict of this round, for its round's status.
  std::map<std::string, sched::SessionVerdict> session_verdicts_;
};

}  // namespace berth::server
