// The control loop: the one writer of scheduling state. Each pass it checks
// node leases, builds a snapshot, asks the scheduler for a plan, applies the
// plan in one store transaction, and sends start and stop orders to agents.
// The agent stream and the REST API call in here; nothing else writes jobs.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/agent_session.h"
#include "control/forecaster.h"
#include "control/outputs.h"
#include "control/pki.h"
#include "control/runtime_feed.h"
#include "meter/metering.h"
#include "model/fencing.h"
#include "model/telemetry.h"
#include "model/usage_ledger.h"
#include "sched/scheduler.h"
#include "store/store.h"

namespace berth::server {

class ServerMetrics;  // metrics.h
class AlertRouter;    // alerting.h
class JobTokenKey;    // job_token.h

// What each run is given to reach the API as itself (docs/jobs.md,
// "Checkpoints"): BERTH_JOB_TOKEN made with `key`, BERTH_API_URL and, when
// the API's certificate is from berthd's own CA, BERTH_CA_PEM.
struct JobApiAccess {
  const JobTokenKey* key = nullptr;
  std::string api_url;
  std::string ca_pem;
};

struct ControllerOptions {
  std::filesystem::path log_dir;         // <data-dir>/logs
  TimeMs lease_ms = 10'000;              // a node is NotReady this long after its last heartbeat
  TimeMs heartbeat_interval_ms = 1'000;  // told to agents at registration
  TimeMs tick_ms = 200;                  // a pass runs at least this often
  // Passes are paced: the next one starts no sooner than the last one took,
  // capped at this, after it ended. An idle berthd passes at once on a wake
  // (its last pass was long ago); under a stream of submissions a pass over
  // a deep queue leaves the store to them at least half the time.
  TimeMs max_pass_gap_ms = 1'000;
  TimeMs stop_grace_ms = 10'000;  // SIGTERM -> SIGKILL for cancel and gang stops
  // A NotReady node's runs are declared lost this long after its lease
  // lapsed (the agent may just be restarting); their gangs then stop and
  // follow their retry policies. Never sooner than the node's agent has
  // fenced them (model/fencing.h): each run waits at least the agent's fence
  // grace, two of its stop graces and a margin after the lease.
  TimeMs node_lost_grace_ms = 60'000;
  // The longest berth-agent --fence-grace in the cluster.
  TimeMs agent_fence_grace_ms = model::kDefaultFenceGraceMs;
  // Each run's log past this keeps its head and latest output (run_log.h);
  // 0: unlimited.
  std::uint64_t log_limit_bytes = std::uint64_t{64} << 20;
  // "Would run now if" hints are shown only once a second cycle with the
  // change placed the job (sched/hints.h). A pass checks at most this many,
  // and fewer on a large snapshot: hint_check_jobs / (pending + running
  // jobs), at least one. 0: no checks, so no hints are shown.
  std::size_t hint_checks_per_pass = 8;
  std::size_t hint_check_jobs = 40'000;
  // Forecasts of waiting jobs' starts (forecaster.h): how often, and how
  // many scheduler runs each may make.
  ForecasterOptions forecast{};
};

// A node as the API shows it: stored inventory plus live lease state.
// What became of the GPU samples agents streamed (OnTelemetry), since start.
struct TelemetryCounts {
  std::uint64_t accepted = 0;              // handed to the sink
  std::uint64_t dropped_unknown_gpu = 0;   // a GPU index the node never registered
  std::uint64_t dropped_inactive_run = 0;  // a run id not active on the node
  std::uint64_t dropped_no_sink = 0;       // valid, but no sink was set
};

struct NodeStatus {
  store::NodeRecord record;
  bool connected = false;
  TimeMs last_heartbeat_ms = 0;
};

class Controller {
 public:
  Controller(store::Store& store, const sched::Scheduler& scheduler, const Clock& clock,
             ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Loads nodes from the store (each gets a fresh lease) and starts the loop.
  Status Start();
  void Stop();
  void Wake();
  // Budgets (docs/metering.md): each pass, at most once a second, raises
  // budget alerts and keeps new low-priority jobs of tenants over an
  // enforced budget waiting (OverBudget). Null: no budgets. Set before Start().
  void set_meter(Meter* meter) { meter_ = meter; }
  // Where GPU hardware alerts are raised (under the first enabled gpu_health
  // rule); null: straight into the store as critical. Set before Start().
  void set_alerts(AlertRouter* alerts) { alerts_ = alerts; }
  // Where passes, placements, evictions and job outcomes are counted for
  // GET /metrics; null: nowhere. Set before Start().
  void set_metrics(ServerMetrics* metrics) { metrics_ = metrics; }
  // Job tokens for every run dispatched from now on; unset: runs get none.
  void set_job_api(JobApiAccess access) { job_api_ = std::move(access); }
  // Where valid GPU samples go (the telemetry store); unset: they are
  // dropped. Called on the agent streams' threads, once per GpuTelemetry
  // message: concurrently for different nodes, so it must be thread-safe.
  // Set before Start().
  using TelemetrySink = std::function<void(std::span<const model::GpuSample>)>;
  void set_telemetry_sink(TelemetrySink sink) { telemetry_sink_ = std::move(sink); }
  TelemetryCounts telemetry_counts() const;

  // --- REST API side ---
  // The job's id, or an array's element ids in index order (the first is
  // the array's id). Each `audit`, when set, makes the request's audit
  // record, committed in the change's own transaction (store/audit_entry.h).
  [[nodiscard]] Result<std::vector<std::int64_t>> Submit(
      const model::JobSpec& spec, std::string_view submitted_by = {},
      const store::AuditOf<std::vector<std::int64_t>>& audit = {});
  [[nodiscard]] Result<store::JobRecord> Cancel(
      std::int64_t job_id, const std::string& by,
      const store::AuditOf<store::JobRecord, store::JobRecord>& audit = {});
  [[nodiscard]] Result<store::ArrayCancel> CancelArray(
      std::int64_t array_id, const std::string& by,
      const store::AuditOf<store::ArrayCancel>& audit = {});
  [[nodiscard]] Result<std::vector<NodeStatus>> Nodes();
  // Cordons a node or one GPU (nothing new is placed there); `drain` also
  // stops the node's jobs, which are queued again. Recorded as node events.
  // `audit`: the record, committed with the cordon.
  [[nodiscard]] Status Cordon(const std::string& node, std::optional<std::uint32_t> gpu, bool drain,
                              const std::string& reason, const std::string& by,
                              const store::AuditOf<>& audit = {});
  // Lifts a cordon or drain; for a GPU, also resolves its alerts. Returns
  // whether there was one.
  [[nodiscard]] Result<bool> Uncordon(const std::string& node, std::optional<std::uint32_t> gpu,
                                      const std::string& by, const store::AuditOf<>& audit = {});
  // Removes a node from the inventory and revokes its certificates
  // (store::NodeStore::RemoveNode; refused while it has active runs), in
  // one transaction with `audit`'s record; then ends its agent's stream.
  // Held against registrations, so a registration racing the removal
  // either finishes first (and is cut) or is refused.
  [[nodiscard]] Status RemoveNode(const std::string& node, const std::string& by,
                                  const store::AuditOf<>& audit = {});
  std::filesystem::path LogPath(std::int64_t job_id, const std::string& run_id) const;
  // The size a run's log of `tenant` is kept to (run_log.h): the policy's
  // log_bytes_per_run where it sets one, else --log-limit (0: no limit).
  // Writers and readers of a log ask the same.
  std::uint64_t LogLimitFor(std::string_view tenant);

  // --- scheduling policy ---
  // The active policy, cached with its version and re-read after every
  // change made through ApplyPolicy or RollbackPolicy. Each pass schedules
  // under one version and records it on what it places.
  [[nodiscard]] Result<std::shared_ptr<const store::PolicyVersion>> ActivePolicy();
  // The latest forecast's word on a waiting job (forecaster.h); none before
  // the first forecast, or when it foresaw no start. Any thread.
  std::optional<JobForecast> ForecastOf(std::int64_t job_id) const {
    return forecaster_->Of(job_id);
  }
  // Blocks until the forecast in hand, if any, is made (tests).
  void DrainForecasts() { forecaster_->Drain(); }
  // Store::ApplyPolicy / Store::RollbackPolicy, then a pass under the new
  // policy. Return the new version.
  // Each `audit`, when set, makes the change's audit record, committed
  // with it (store/audit_entry.h).
  [[nodiscard]] Result<std::int64_t> ApplyPolicy(const std::string& yaml, const std::string& by,
                                                 const std::string& comment,
                                                 std::optional<std::int64_t> base = std::nullopt,
                                                 const store::AuditOf<std::int64_t>& audit = {});
  // Store::PreviewPolicy: what ApplyPolicy would do, changing nothing.
  [[nodiscard]] Result<store::PolicyVersion> PreviewPolicy(const std::string& yaml,
                                                           const std::string& by);
  [[nodiscard]] Result<std::int64_t> RollbackPolicy(std::int64_t to_version, const std::string& by,
                                                    const std::string& comment,
                                                    const store::AuditOf<std::int64_t>& audit = {});

  // Store::ApproveQuotaRequest (a new policy version), then a pass under it.
  [[nodiscard]] Result<store::QuotaRequest> ApproveQuotaRequest(
      std::int64_t id, const std::string& by, const std::string& comment,
      const store::AuditOf<store::QuotaRequest, store::QuotaRequest>& audit = {});

  // --- agent stream side (called from the stream's reader thread) ---
  // `cert_not_before_ms`: the notBefore of the client certificate the
  // stream authenticated with (none: a plain or in-process agent). A
  // certificate revoked by the node's removal is refused (PermissionDenied,
  // naming the revocation) before anything is recorded.
  [[nodiscard]] Status OnRegister(const berth::v1::Register& reg,
                                  const std::shared_ptr<AgentSession>& session,
                                  std::optional<TimeMs> cert_not_before_ms = std::nullopt);
  // PermissionDenied, naming the removal, when `node`'s certificate issued
  // at `not_before_ms` is revoked (model::NodeCertRevoked).
  [[nodiscard]] Status CheckNodeCert(const std::string& node, TimeMs not_before_ms);
  // What signs renewed node certificates: the data dir's CA and
  // --node-cert-ttl. Unset (berthd trusts another CA for agents): renewals
  // are refused, FailedPrecondition. Set before Start().
  struct NodeCertSigner {
    pki::Credentials ca;
    TimeMs ttl_ms = pki::kDefaultNodeCertTtlMs;
  };
  void set_node_cert_signer(NodeCertSigner signer) { signer_ = std::move(signer); }
  // A node's renewal (agent.proto RenewCertificate): signs `csr_pem` for
  // `node`, the stream's authenticated node, whose certificate was issued at
  // `presented_not_before_ms`; PermissionDenied for a CSR of another name,
  // a removed node or a revoked certificate. Audited (node.cert.renew,
  // actor node/<name>, from `peer`) with the node event it records.
  [[nodiscard]] Result<std::string> RenewNodeCert(const std::string& node,
                                                  TimeMs presented_not_before_ms,
                                                  const std::string& csr_pem,
                                                  const std::string& peer);
  void OnHeartbeat(const std::string& node);
  void OnDisconnect(const std::shared_ptr<AgentSession>& session);
  [[nodiscard]] Status OnRunStarted(const std::string& node, const berth::v1::RunStarted& msg);
  [[nodiscard]] Status OnRunExited(const std::string& node, const berth::v1::RunExited& msg);
  [[nodiscard]] Status OnLogChunk(const std::string& node, const berth::v1::LogChunk& msg);
  // The node a run was placed on, or nullopt for a run berthd does not know:
  // the agent stream refuses a report about another node's run.
  [[nodiscard]] Result<std::optional<std::string>> NodeOfRun(const std::string& run_id);
  // The last `bytes` of a run's log as berthd holds it.
  std::string LogTail(const store::JobRecord& job, const std::string& run_id, std::size_t bytes);
  // How much of a failed run's log its failure class is read from.
  static constexpr std::size_t kFailureTailBytes = 64 * 1024;
  [[nodiscard]] Status OnRunCheckpoint(const std::string& node,
                                       const berth::v1::RunCheckpoint& msg);
  // A service replica's probes changed their verdict: recorded on the run
  // (RecordRunHealth), then the listener (the service controller's Wake) is
  // called, so a rollout waiting for readiness moves on at once.
  [[nodiscard]] Status OnRunHealth(const std::string& node, const berth::v1::RunHealth& msg);
  // An event on a job's timeline that changes nothing else (the service
  // controller's measured cold starts).
  [[nodiscard]] Status AddJobEvent(std::int64_t job_id, const std::string& event,
                                   const std::string& message);
  // Set once, before agents connect.
  void SetRunHealthListener(std::function<void()> listener) {
    on_run_health_ = std::move(listener);
  }
  // A GPU's health changed: an unhealthy GPU is cordoned (that GPU only),
  // its runs are stopped for the retry policy, and an alert is raised.
  [[nodiscard]] Status OnGpuHealth(const std::string& node, const berth::v1::GpuHealthChanged& msg);
  // The node's agent found podman appear on, or leave, its search path: the
  // node's container_runtime follows (a node event), and the scheduler sees
  // it next cycle. Only ever the stream's own `node`; a word other than
  // "podman" or "" is refused (InvalidArgument) and closes the stream.
  [[nodiscard]] Status OnContainerRuntime(const std::string& node,
                                          const berth::v1::ContainerRuntimeChanged& msg);
  // A node's GPU readings (best effort, never acknowledged). `node` is the
  // stream's authenticated node, never anything in the message. Samples of
  // GPUs the node did not register, or naming a run that is not active on
  // the node, are dropped and counted; the rest go to the sink. Never fails:
  // a bad sample must not close the stream.
  void OnTelemetry(const std::string& node, const berth::v1::GpuTelemetry& msg);

  // A run's outputs, asked of the node that holds them (outputs.h):
  // Unavailable, naming the node, when its agent is not connected.
  [[nodiscard]] Result<berth::v1::OutputReply> AskOutputs(const std::string& node,
                                                          berth::v1::OutputRequest req);
  void OnOutputReply(const std::string& node, berth::v1::OutputReply reply) {
    outputs_.OnReply(node, std::move(reply));
  }

  // Runs one pass now, on the caller's thread (tests use it with a ManualClock).
  Status RunPass();

 private:
  struct LiveNode {
    std::shared_ptr<AgentSession> session;
    TimeMs last_heartbeat_ms = 0;
    bool ready = false;
    std::set<std::string> start_sent;  // orders sent on the current session
    std::set<std::string> stop_sent;
    std::set<std::uint32_t> gpus;  // indices registered on the current session
    // Whether the agent registered since this berthd started, and the runs
    // it reported then. The agent reports every run it holds when it
    // registers and can get a new one only through a StartRun on that
    // session, so once registered, a run in neither `reported` nor
    // `start_sent` is not on the agent: if its stop was requested before
    // its start order went out, Dispatch settles it as never started.
    bool registered = false;
    std::set<std::string> reported;
  };

  void Loop();
  Status CheckLeases(TimeMs now);
  // Runs on NotReady nodes exit as lost once model::PresumeGoneAfterMs has
  // passed since the node's last heartbeat: by then its agent has stopped
  // them if it is alive. Returns whether any did.
  Result<bool> DeclareLostRuns(TimeMs now, const std::vector<store::RunRecord>& active);
  // Sends start and stop orders; settles, without asking the agent, a run
  // stopped before its start order reached the agent (see LiveNode).
  Status Dispatch(const std::vector<store::RunRecord>& active,
                  const std::vector<store::NodeRecord>& nodes);
  // Fills a failed exit's failure class from its log tail (berthd holds the
  // whole log by the time the exit arrives).
  void ClassifyExit(store::RunExit& exit, std::int64_t job_id);
  void HoldPlacementsBehindEvictions(sched::Plan& plan);
  // Consolidations whose moved jobs have all stopped: their planned
  // placements are applied as planned (what is still valid of them). Returns
  // whether anything was placed.
  Result<bool> ApplyHeldMoves(const std::vector<store::RunRecord>& active,
                              const std::vector<store::NodeRecord>& nodes,
                              const std::map<std::string, bool>& ready,
                              const store::PendingQueue& pending, std::int64_t policy_version,
                              TimeMs now);
  // After a restart: which pending jobs wait for victims still stopping, from
  // the victims' runs (stopped for preemption or reclaim) and their reasons.
  Status RecoverEvictions(const std::vector<store::RunRecord>& active);
  // Brings the usage ledger up to `now`: folds runs that ended since the
  // last call and remembers the active ones.
  Status ObserveRuns(TimeMs now, std::int64_t half_life_ms,
                     const std::vector<store::RunRecord>& active);
  Result<model::JobSpec> SpecOf(std::int64_t job_id);
  Status ReloadPolicy();
  // control::MarkRunExited under the active policy (its retry cap).
  Result<model::JobRecord> MarkRunExitedUnderPolicy(const model::RunExit& exit, TimeMs now);
  // A queue (or an ancestor) with over_quota: reject refuses a job that,
  // with the queue's pending and running jobs, would pass its guarantee;
  // FailedPrecondition with the numbers, before anything is stored.
  Status CheckRejectQuota(const model::Policy& policy, const model::JobSpec& spec);
  // `gang`: every run of the run's attempt; `nodes`: where they are (for
  // MASTER_ADDR).
  berth::v1::StartRun StartOrder(const store::RunRecord& run, const model::JobSpec& spec,
                                 const std::vector<store::RunRecord>& gang,
                                 const std::vector<store::NodeRecord>& nodes,
                                 const model::Policy& policy) const;

  store::Store& store_;
  Meter* meter_ = nullptr;
  AlertRouter* alerts_ = nullptr;
  ServerMetrics* metrics_ = nullptr;
  JobApiAccess job_api_;
  TelemetrySink telemetry_sink_;
  mutable std::mutex telemetry_mu_;  // guards telemetry_counts_
  TelemetryCounts telemetry_counts_;
  // Counts `job`'s outcome if the change made at `now` finished it (an
  // exit recorded again finds it finished earlier and counts nothing).
  void CountOutcome(const store::JobRecord& job, TimeMs now);
  // Counts a pass's placements (with each job's queue wait) and evictions.
  void CountPass(const sched::Plan& plan, const store::PendingQueue& schedulable, double seconds,
                 TimeMs now);
  // Checks the plan's "would run now if" hints by running the cycle again
  // (sched/hints.h), within the pass's budget; drops the rest unless shown
  // before, then the decisions that now equal what is stored.
  void VerifyHints(sched::Plan& plan, const sched::Snapshot& snap,
                   const std::unordered_map<std::int64_t, const model::Reason*>& stored_reason);
  // Tenants over an enforced budget -> the reason their low-priority jobs
  // wait with, as of over_budget_at_ms (pass thread only).
  std::map<std::string, model::Reason> over_budget_;
  // Finished jobs' run times for the snapshot's predictions; refreshed and
  // read only by RunPass (under pass_mu_).
  RuntimeFeed runtime_feed_;
  TimeMs over_budget_at_ms_ = -1;
  std::function<void()> on_run_health_;
  const sched::Scheduler& scheduler_;
  const Clock& clock_;
  ControllerOptions options_;
  std::unique_ptr<Forecaster> forecaster_;
  // The stop grace a run's StartRun carries (its checkpoint grace, else
  // stop_grace_ms).
  TimeMs RunGraceMs(const model::JobSpec& spec) const;
  model::FenceTiming Fencing() const;

  std::optional<NodeCertSigner> signer_;
  // Registrations and removals, one at a time: taken before pass_mu_ and mu_.
  std::mutex membership_mu_;
  std::mutex pass_mu_;  // one pass at a time
  // Jobs placed behind evictions -> the evicted jobs they wait for. Guarded
  // by pass_mu_. Lost on restart: a pass may then pick victims afresh.
  std::map<std::int64_t, std::vector<std::int64_t>> awaiting_evictions_;
  bool evictions_recovered_ = false;  // awaiting_evictions_ rebuilt after a start
  // Consolidations in flight, by the job they make room for: its placement
  // and the moved jobs' new ones, applied together once every moved job has
  // stopped; until then no other job is placed on those GPUs. Guarded by
  // pass_mu_. Lost on restart: the job still waits for the moved jobs to
  // stop (RecoverEvictions), then all of them are placed afresh.
  struct HeldMove {
    std::vector<std::int64_t> movers;
    std::vector<sched::Placement> placements;  // the job's first
  };
  std::map<std::int64_t, HeldMove> held_moves_;
  // Decayed usage for fair share (pass thread only): the ledger, whether it
  // has been built from history, and the runs active at the last pass, so
  // that a run is folded in once when it is seen to have ended.
  model::UsageLedger ledger_;
  bool ledger_built_ = false;
  std::map<std::string, model::UsageInterval> ledger_active_;

  std::mutex log_mu_;  // one log writer at a time: a trim must not race a chunk
  std::mutex mu_;      // guards everything below
  std::condition_variable cv_;
  bool wake_ = false;
  bool stopping_ = false;
  TimeMs next_pass_ms_ = 0;  // paced: no pass starts before this (Loop only)
  std::map<std::string, LiveNode> live_;
  OutputBroker outputs_;                                // has its own lock
  std::map<std::int64_t, model::JobSpec> spec_cache_;   // specs never change
  std::shared_ptr<const store::PolicyVersion> policy_;  // null until first read
  std::thread thread_;
};

}  // namespace berth::server
