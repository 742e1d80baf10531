// The agent's probes of its service replicas (docs/services.md, "Probes"):
// Kubernetes-style readiness and liveness checks run on the replica's node,
// so that what decides whether a replica gets requests is as close to it as
// possible and keeps working while berthd is away.
//
//  - readiness: the replica is ready after `success_threshold` passes in a
//    row, not ready after `failure_threshold` failures in a row. It starts
//    unknown; its first verdict is reported either way.
//  - liveness: checked once the replica has been ready (readiness is the
//    start-up gate, so a model that takes minutes to load is not killed
//    while loading); `failure_threshold` failures in a row and the agent
//    stops the run (reason "liveness"), which its service replaces.
//
// An http probe GETs its path on 127.0.0.1 at the replica's node port (2xx
// and 3xx pass); a tcp probe connects to the replica's node port when it
// names the service's port, else to that port of the node; a command probe
// runs as the replica does — its identity, cgroup, working directory and
// environment, or `podman exec` in its container — through berth-shim
// --probe, and passes on exit 0. Every probe ends within its timeout.
//
// Threads: one of its own runs the due probes in turn; the agent's worker
// hands it the replicas (SetTargets) and takes its verdicts (TakeChanges).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "model/service.h"

namespace berth::agent {

// A run to probe, as the runner knows it.
struct ProbeTarget {
  std::string run_id;
  std::uint32_t node_port = 0;     // where the replica serves on this node
  std::uint32_t service_port = 0;  // the spec's port
  std::filesystem::path run_dir;   // for command probes (berth-shim --probe)
  model::Probe readiness{};
  model::Probe liveness{};
  std::int64_t started_at_ms = 0;
};

struct ProbeResult {
  bool ok = false;
  std::string detail;  // "HTTP 200", "connection refused", "timed out after 1s"...
};

// Consecutive passes and failures against a probe's thresholds.
class ProbeCounter {
 public:
  explicit ProbeCounter(const model::Probe& probe) : probe_(probe) {}
  // Counts one result; returns the verdict when this result changed it
  // (the first verdict counts as a change).
  std::optional<bool> Observe(bool ok);
  std::optional<bool> verdict() const { return verdict_; }

 private:
  model::Probe probe_;
  std::uint32_t passes_ = 0;
  std::uint32_t failures_ = 0;
  std::optional<bool> verdict_;
};

// What a replica's probes decided, for the agent to report (RunHealth).
struct HealthChange {
  std::string run_id;
  bool ready = false;
  bool liveness_failed = false;
  std::string detail;
  TimeMs at_ms = 0;
};

// Runs one probe once, against `target`; blocks at most probe.timeout_ms
// (plus process start for command probes).
using ProbeFn = std::function<ProbeResult(const model::Probe&, const ProbeTarget&)>;

// The probe as Berth runs it: http, tcp, or the command through `shim`.
ProbeResult RunProbe(const model::Probe& probe, const ProbeTarget& target,
                     const std::filesystem::path& shim);

class Prober {
 public:
  Prober(const Clock& clock, ProbeFn probe);
  ~Prober();
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  // Starts the probing thread; without it, RunDue() probes on the caller's.
  void Start();
  void Stop();

  // The runs to probe now: new ones start unknown, gone ones are forgotten.
  // A run whose liveness failed is not probed again.
  void SetTargets(std::vector<ProbeTarget> targets);
  // Verdicts that changed since the last call, oldest first.
  std::vector<HealthChange> TakeChanges();
  // The readiness verdict of a run; nullopt: none yet, or not probed.
  std::optional<bool> Ready(const std::string& run_id) const;

  // Runs every probe due at the clock's now, in turn. Returns when the next
  // one is due (0: nothing to probe).
  TimeMs RunDue();

 private:
  struct Watch {
    ProbeTarget target;
    ProbeCounter readiness;
    ProbeCounter liveness;
    TimeMs next_readiness_ms = 0;
    TimeMs next_liveness_ms = 0;
    bool was_ready = false;
    bool dead = false;  // liveness failed: left alone until the run ends
  };

  const Clock& clock_;
  ProbeFn probe_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Watch> watches_;  // guarded by mu_
  std::vector<HealthChange> changes_;     // guarded by mu_
  bool stop_ = false;
  bool woken_ = false;
  std::thread thread_;
};

}  // namespace berth::agent
