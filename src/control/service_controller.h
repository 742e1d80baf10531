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

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "model/job.h"
#include "sched/replica_plan.h"
#include "store/store.h"

namespace berth::server {

class Controller;

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
};

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

  // How many replicas a service wants. Until the gateway feeds the
  // autoscaler its signals, the spec's minimum.
  static std::uint32_t DesiredReplicas(const model::ServiceSpec& spec);
  // The job a replica of `service`'s current revision is.
  static model::JobSpec ReplicaSpec(const store::ServiceRecord& service);
  // Whether `replica` runs what the service's current revision would start:
  // its job spec is ReplicaSpec's but for the revision that made it. A
  // revision that changes only what is not in a replica (its bounds, its
  // autoscaling, its SLO) keeps the replicas it has, as Kubernetes keeps a
  // Deployment's pods when only its replica count changes.
  static bool RunsCurrentSpec(const store::ServiceRecord& service, const model::JobSpec& replica);
  // `job` must have been read with its runs.
  static ReplicaHealth HealthOf(const store::JobRecord& job);
  static ReplicaCounts CountReplicas(const store::ServiceRecord& service,
                                     const std::vector<const store::JobRecord*>& replicas);

 private:
  Status ReconcileOne(const store::ServiceRecord& service,
                      const std::vector<store::JobRecord>& replicas, TimeMs now);
  Status StopReplica(const std::string& tenant, const std::string& name, std::int64_t job_id,
                     std::string_view cause, const std::string& why, TimeMs now);

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
};

}  // namespace berth::server
