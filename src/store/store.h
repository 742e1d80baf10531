// Durable state of the control plane. Every method that changes state returns
// only after the change is durable (committed and synced), so anything the
// API acknowledges survives kill -9. Each mutation is one transaction and
// appends the job events it causes, which make up the job's timeline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/admission.h"
#include "model/alert_kind.h"
#include "model/job.h"
#include "model/job_record.h"
#include "model/node.h"
#include "model/policy.h"
#include "model/reason.h"
#include "model/service.h"
#include "model/tenant_scope.h"
#include "store/audit_entry.h"
#include "store/change_feed.h"

namespace berth::store {

// GPU time of one finished run, for decayed fair-share usage.
struct RunUsage {
  std::string tenant;
  std::string queue;
  std::int64_t mgpu = 0;  // whole GPUs x 1000, or the run's slice
  TimeMs started_ms = 0;
  TimeMs finished_ms = 0;
};

// The lifecycle's records live in the model (model/job_record.h), where the
// control layer's transitions work on them; the store persists them.
using model::JobEvent;
using model::JobRecord;
using model::RunExit;
using model::RunLost;
using model::RunRecord;
// The pending queue a scheduling pass reads (JobStore::SharedPendingJobs).
using PendingQueue = std::vector<std::shared_ptr<const JobRecord>>;

struct JobFilter {
  std::vector<model::JobState> states;  // empty: any
  std::string tenant;                   // empty: any
  std::string queue;                    // empty: any
  std::size_t limit = 1000;
  // Keyset paging: only jobs listed after this one in the list's order
  // (newest first), that is with a smaller id. Stable while jobs are added:
  // new jobs get larger ids and never shift a later page.
  std::optional<std::int64_t> after_id{};
  // Whether to load each job's runs (one query for the whole page); a
  // summary needs none.
  bool with_runs = true;
  // Only the jobs of tenants in this scope (the request's tenant scope,
  // model/tenant_scope.h), filtered in the query before `limit`.
  model::TenantScope tenants = model::TenantScope::All();
  // Only the elements of this job array.
  std::optional<std::int64_t> array_id{};
  // Only the replicas of this service (its name; with `tenant`, its tenant).
  std::string service{};
  // Only services' replicas, of any service.
  bool replicas_only = false;
};

// Group commit, since the store opened: transactions that stored
// submissions, and the submissions (single jobs or whole arrays) in them.
struct CommitStats {
  std::uint64_t commits = 0;
  std::uint64_t submissions = 0;
};

using model::PendingCount;

// What cancelling an array did: elements cancelled before they started,
// and elements asked to stop (they end Cancelled once their runs stop).
struct ArrayCancel {
  std::string tenant;
  std::size_t cancelled = 0;
  std::size_t stopping = 0;
};

// An admin's (or Berth's own) hold on a node or one GPU: nothing new is
// placed there. A drained node's jobs are also stopped and queued again.
struct Cordon {
  model::CordonKind kind = model::CordonKind::kCordon;  // kDrain: nodes only
  std::string reason;
  std::string by;          // who; "berth" for an automatic cordon
  bool automatic = false;  // Berth cordoned it (a GPU hardware error)
  TimeMs at_ms = 0;
};

struct NodeRecord {
  model::NodeInfo info;
  model::NodeState state = model::NodeState::kNotReady;
  TimeMs state_changed_ms = 0;
  std::optional<Cordon> cordon{};                 // the node's own
  std::map<std::uint32_t, Cordon> gpu_cordons{};  // by GPU index
};

// Something an operator should look at, open until resolved: by Berth when
// its condition clears (resolved_by "berth"), by an admin, or for a GPU
// hardware error by uncordoning the GPU. `rule` and `subject` identify what
// it is about: at most one alert per (rule, subject) is open at a time.
struct Alert {
  std::int64_t id = 0;
  // Stored as their names; a name this version does not know reads as kUnknown.
  model::AlertKind kind = model::AlertKind::kUnknown;
  model::AlertSeverity severity = model::AlertSeverity::kWarning;
  std::string node;
  std::optional<std::uint32_t> gpu;
  std::string message;
  TimeMs raised_ms = 0;
  std::optional<TimeMs> resolved_ms;
  std::string resolved_by;
  std::string rule;     // the alert rule that raised it; "" before rules existed
  std::string subject;  // node, "node/gpu", queue path, run id, "tenant/month/percent"
  // The sinks its raise and resolve are delivered to (names in the rules).
  std::vector<std::string> sinks{};
};

// Whether RaiseAlertOnce refuses when an alert with the same (rule, subject)
// is open (kOpen), or when one was ever raised (kEver: budget thresholds,
// once per month).
enum class AlertDedupe { kOpen, kEver };

// Which alerts FindAlerts returns: the newest `limit` matches, oldest first
// (a page of GET /v1/alerts; the next page is the alerts before its first).
struct AlertFilter {
  bool open_only = false;
  std::optional<model::AlertKind> kind;  // none: any
  // Keyset paging backwards: only alerts with id < before_id.
  std::optional<std::int64_t> before_id;
  std::size_t limit = std::numeric_limits<std::size_t>::max();
};

// One delivery of an alert event to one sink, kept in an outbox until it is
// delivered or given up on.
struct AlertDelivery {
  std::int64_t id = 0;
  std::int64_t alert_id = 0;
  std::string sink;
  std::string event;  // "raised" or "resolved"
  std::int32_t attempts = 0;
  TimeMs next_attempt_ms = 0;
  std::string last_error;
  std::optional<TimeMs> delivered_ms;
  bool failed = false;  // given up after the last attempt
  TimeMs created_ms = 0;
};

// One applied version of the alert rules (model/alert_rules.h).
struct AlertRulesVersion {
  std::int64_t version = 0;
  std::string yaml;
  TimeMs applied_ms = 0;
  std::string applied_by;
  std::string comment;
};

struct NodeEvent {
  TimeMs time_ms = 0;
  std::string event;
  std::string message;
};

// One version of the scheduling policy. Versions are append-only: applying
// or rolling back always adds a version, and the newest is the active one.
struct PolicyVersion {
  std::int64_t version = 0;
  std::string yaml;        // the text as applied, verbatim (comments kept)
  std::string normalized;  // model::PolicyToYaml of the parsed text: what diffs compare
  TimeMs applied_ms = 0;
  std::string applied_by;
  std::string comment;
  // Set on versions made by a rollback: the version that was active when the
  // rollback was asked for, and the older version whose text it restores.
  std::optional<std::int64_t> rolled_back_from;
  std::optional<std::int64_t> restores;
  // Parsed, with policy.version == version. Left default (version 0) by
  // ListPolicyVersions, which does not parse.
  model::Policy policy;
};

// A tenant's request for a different quota on one of its queues, decided by
// a platform admin. Approving it is a policy change: a new policy version
// made from the active one with this queue's quota for `resource` set to
// the requested values, so `berth policy rollback` undoes it.
enum class QuotaRequestState { kPending, kApproved, kRejected, kWithdrawn };
std::string_view QuotaRequestStateName(QuotaRequestState state);
std::optional<QuotaRequestState> ParseQuotaRequestState(std::string_view name);

struct QuotaRequest {
  std::int64_t id = 0;
  std::string tenant;    // the first element of `queue`
  std::string queue;     // the queue's policy path: "vision/training"
  std::string resource;  // a quota key (model::ResourceKeyName): "gpus", "gpus/H100-80GB", "cpu"
  // The values asked for, in the policy's units for `resource` (milli-GPUs,
  // millicores, bytes); nullopt: leave that field of the quota as it is.
  std::optional<std::int64_t> guaranteed;
  std::optional<std::int64_t> borrow_limit;
  std::optional<std::int64_t> weight;
  std::optional<std::int64_t> lending_limit;
  std::string reason;
  QuotaRequestState state = QuotaRequestState::kPending;
  std::string filed_by;
  TimeMs filed_ms = 0;
  std::string decided_by;  // who approved, rejected or withdrew it; "" while pending
  std::optional<TimeMs> decided_ms;
  std::string decision_comment;
  // The policy version the approval made; nullopt unless Approved.
  std::optional<std::int64_t> policy_version;
};

struct QuotaRequestFilter {
  std::optional<QuotaRequestState> state;  // none: any
  std::string tenant;                      // empty: any
  std::size_t limit = 1000;
  // Keyset paging (newest first): only requests with id < before_id.
  std::optional<std::int64_t> before_id;
  // Only the requests of tenants in this scope (the request's tenant scope,
  // model/tenant_scope.h), filtered in the query before `limit`.
  model::TenantScope tenants = model::TenantScope::All();
};

using model::UnknownQueueMessage;

// One write transaction over jobs and runs. The control layer's lifecycle
// (control/lifecycle.h) loads the records it decides on through it, applies
// the transitions (control/transitions.h) and writes what they made of
// them; JobStore::UpdateJobs commits all of it, or none. A backend only
// loads and persists here: it decides nothing.
class JobTransaction {
 public:
  virtual ~JobTransaction() = default;
  // The job with every run of every attempt (no timeline); nullopt when no
  // job has this id.
  [[nodiscard]] virtual Result<std::optional<JobRecord>> Load(std::int64_t id) = 0;
  // The id of the job that run `run_id` belongs to; nullopt when no run has
  // this id.
  [[nodiscard]] virtual Result<std::optional<std::int64_t>> JobOfRun(const std::string& run_id) = 0;
  // Jobs with a Starting or Running run on `node`, by id.
  [[nodiscard]] virtual Result<std::vector<std::int64_t>> ActiveJobsOn(const std::string& node) = 0;
  // The elements of array `array_id`, by id; empty when there is no such
  // array.
  [[nodiscard]] virtual Result<std::vector<std::int64_t>> ArrayElements(std::int64_t array_id) = 0;
  // Writes the job as a transition left it: every lifecycle field of
  // update.job, its events appended to the timeline, and each run in
  // update.job.runs that is new or differs from the run Load returned.
  [[nodiscard]] virtual Status Write(const model::JobUpdate& update) = 0;
  // Sets a Pending job's reason; nothing when the job is no longer Pending
  // or its reason is already this one.
  [[nodiscard]] virtual Status SetPendingReason(std::int64_t id, const model::Reason& reason) = 0;
  // Commits `record` with this transaction (store/audit_chain.h): the
  // change and the audit record of it are durable together or not at all.
  virtual void Record(AuditEntry record) = 0;
};

// The body of one job transaction: Ok commits what it wrote, an error rolls
// all of it back and is returned.
using JobTransactionBody = std::function<Status(JobTransaction&)>;

// Builds the policy an approved quota request makes (control::ApproveQuota):
// the active policy, its version, and the request.
using QuotaApproval = std::function<Result<model::Policy>(
    const model::Policy& active, std::int64_t version, const QuotaRequest& request)>;

// --- policy: tenants, queues, versions and quota requests ---
class PolicyStore {
 public:
  virtual ~PolicyStore() = default;

  // --- tenants and queues, answered from the active policy ---
  // `queue` may name a nested queue ("training/nlp"); the queue's path in the
  // policy is "<tenant>/<queue>".
  [[nodiscard]] virtual Result<bool> QueueExists(const std::string& tenant,
                                                 const std::string& queue) = 0;

  // --- scheduling policy (versioned; a fresh database has version 1, the
  // default policy) ---
  // Parses and validates `yaml_text` (model::ParsePolicy errors pass through
  // with their field path) and makes it the new active version. Refused,
  // changing nothing, when the new policy drops a queue that still holds
  // Pending, Scheduled or Running jobs. Returns the new version number.
  [[nodiscard]] virtual Result<std::int64_t> ApplyPolicy(const std::string& yaml_text,
                                                         const std::string& by,
                                                         const std::string& comment,
                                                         TimeMs now) = 0;
  // ApplyPolicy, refused with FailedPrecondition (409) naming the version that landed
  // in between unless `base` is still the active version, checked in the
  // same transaction (nullopt: no check). `audit`, when set, makes the
  // record of the apply from the new version number, committed with it (as
  // every `audit` parameter below: store/audit_entry.h).
  [[nodiscard]] virtual Result<std::int64_t> ApplyPolicyOnBase(
      const std::string& yaml_text, const std::string& by, const std::string& comment,
      std::optional<std::int64_t> base, TimeMs now, const AuditOf<std::int64_t>& audit = {}) = 0;
  // Everything ApplyPolicy checks, guard included, without applying: the
  // version `yaml_text` would become. Changes nothing.
  [[nodiscard]] virtual Result<PolicyVersion> PreviewPolicy(const std::string& yaml_text,
                                                            const std::string& by, TimeMs now) = 0;
  [[nodiscard]] virtual Result<PolicyVersion> ActivePolicy() = 0;
  // Every version, oldest first, without the parsed policy.
  [[nodiscard]] virtual Result<std::vector<PolicyVersion>> ListPolicyVersions() = 0;
  [[nodiscard]] virtual Result<PolicyVersion> GetPolicyVersion(std::int64_t version) = 0;
  // Applies the text of `to_version` again, as a new version (history is
  // never rewritten). The same guard as ApplyPolicy applies. `comment` empty:
  // "rollback to vN".
  [[nodiscard]] virtual Result<std::int64_t> RollbackPolicy(
      std::int64_t to_version, const std::string& by, const std::string& comment, TimeMs now,
      const AuditOf<std::int64_t>& audit = {}) = 0;

  // --- quota requests (decided into policy versions) ---
  // Files a Pending request. Refused, storing nothing, when the queue is not
  // in the active policy (field "queue"), the resource is no quota key
  // (field "resource"), no value is asked for, or the reason is empty.
  // Returns the stored request (id, tenant and times filled in).
  [[nodiscard]] virtual Result<QuotaRequest> FileQuotaRequest(
      const QuotaRequest& request, const std::string& by, TimeMs now,
      const AuditOf<QuotaRequest>& audit = {}) = 0;
  // Newest first.
  [[nodiscard]] virtual Result<std::vector<QuotaRequest>> ListQuotaRequests(
      const QuotaRequestFilter& filter) = 0;
  [[nodiscard]] virtual Result<QuotaRequest> GetQuotaRequest(std::int64_t id) = 0;
  // One transaction: the policy `approve` makes of the active one becomes a
  // new policy version (applied_by `by`, comment "quota request #N:
  // <reason>"), validated and guarded as ApplyPolicy does, and the request
  // becomes Approved with that version. A policy the change would make
  // invalid is refused with the validator's error and nothing changes. A
  // request that is not Pending: FailedPrecondition naming its state.
  // Callers use control::ApproveQuotaRequest, which passes the rule.
  // `audit` makes its record from the request before and after.
  [[nodiscard]] virtual Result<QuotaRequest> ApproveQuotaRequest(
      std::int64_t id, const std::string& by, const std::string& comment,
      const QuotaApproval& approve, TimeMs now,
      const AuditOf<QuotaRequest, QuotaRequest>& audit = {}) = 0;
  // Rejected (an admin's no) or Withdrawn (the filer's); the policy is not
  // touched. Not Pending: FailedPrecondition naming its state.
  [[nodiscard]] virtual Result<QuotaRequest> RejectQuotaRequest(
      std::int64_t id, const std::string& by, const std::string& comment, TimeMs now,
      const AuditOf<QuotaRequest, QuotaRequest>& audit = {}) = 0;
  [[nodiscard]] virtual Result<QuotaRequest> WithdrawQuotaRequest(
      std::int64_t id, const std::string& by, TimeMs now,
      const AuditOf<QuotaRequest, QuotaRequest>& audit = {}) = 0;
};

// --- jobs and runs: submissions, reads, and the lifecycle's transactions ---
class JobStore {
 public:
  virtual ~JobStore() = default;

  // The tenant a job belongs to (cheap: no runs or timeline); NotFound as
  // GetJob says it.
  [[nodiscard]] virtual Result<std::string> JobTenant(std::int64_t id) = 0;
  // `submitted_by`: the identity that submitted it ("" when unknown). A
  // spec with an `array` stores all its elements, as CreateJobs does, and
  // returns the first one's id (the array's id).
  [[nodiscard]] virtual Result<std::int64_t> CreateJob(const model::JobSpec& spec, TimeMs now,
                                                       std::string_view submitted_by = {}) = 0;
  // Stores the job a spec stands for, or every element of its `array`, all
  // or none; returns their ids in index order (contiguous; the first is
  // the array's id, in each element's spec.array_element). Submissions made
  // concurrently may share one transaction and one sync (group commit):
  // each returns only once durable, and one's refusal leaves the others
  // unaffected. `audit`, when set, makes the submission's audit record
  // from the ids, inside the transaction that stores them (it must not call
  // the store): the jobs and their record are durable together or not at
  // all; a refused submission makes none.
  [[nodiscard]] virtual Result<std::vector<std::int64_t>> CreateJobs(
      const model::JobSpec& spec, TimeMs now, std::string_view submitted_by,
      const AuditOf<std::vector<std::int64_t>>& audit = {}) = 0;
  virtual CommitStats commit_stats() = 0;
  // Jobs waiting in the queue (state pending) of `tenant`, and of those the
  // ones `submitted_by` submitted: what the pending-job limits count.
  [[nodiscard]] virtual Result<PendingCount> PendingCounts(const std::string& tenant,
                                                           std::string_view submitted_by) = 0;
  [[nodiscard]] virtual Result<JobRecord> GetJob(std::int64_t id) = 0;
  [[nodiscard]] virtual Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;
  // Jobs the scheduler should look at: Pending, oldest first.
  [[nodiscard]] virtual Result<std::vector<JobRecord>> PendingJobs() = 0;
  // The same queue as shared, immutable records: what a scheduling pass
  // reads, so a pass over a deep queue copies pointers, not jobs. A job
  // that changes is a new record; one a caller holds never moves. This
  // default copies PendingJobs() once.
  [[nodiscard]] virtual Result<PendingQueue> SharedPendingJobs() {
    auto jobs = PendingJobs();
    if (!jobs) return std::unexpected(jobs.error());
    PendingQueue out;
    out.reserve(jobs->size());
    for (auto& j : *jobs) out.push_back(std::make_shared<const JobRecord>(std::move(j)));
    return out;
  }
  // Runs in Starting or Running state, on any node, with their job ids.
  [[nodiscard]] virtual Result<std::vector<RunRecord>> ActiveRuns() = 0;

  // Runs `body` in one write transaction (JobTransaction): everything it
  // writes is durable when this returns Ok, and nothing of it when `body`
  // (or the commit) fails, whose error is returned. The control layer's
  // lifecycle (control/lifecycle.h) is its caller: cancel, plan, run
  // started and exited, stops, GPU failure, drain.
  [[nodiscard]] virtual Status UpdateJobs(const JobTransactionBody& body) = 0;
  [[nodiscard]] virtual Result<std::optional<RunRecord>> GetRun(const std::string& run_id) = 0;
  // A run reported a checkpoint at `at` (unix ms). Older reports than the
  // one stored change nothing; an exited run keeps its last one.
  [[nodiscard]] virtual Status RecordCheckpoint(const std::string& run_id, TimeMs at) = 0;
  // Runs that started and finished at or after `since`, oldest first.
  [[nodiscard]] virtual Result<std::vector<RunUsage>> FinishedRunsSince(TimeMs since) = 0;
  // Jobs submitted in [since, until), oldest first (by submit time, then
  // id), each with every run of every attempt (no timeline): the job history
  // that `berth history export` and policy preview replay. With
  // `max_jobs`, at most that many (the oldest): a caller that asks for its
  // cap plus one learns the window holds more; 0 reads every one.
  [[nodiscard]] virtual Result<std::vector<JobRecord>> JobsSubmittedBetween(
      TimeMs since, TimeMs until, std::size_t max_jobs = 0) = 0;
  // The jobs a report of the window [from, to) may need: submitted before
  // `to` and not finished before `from` (still waiting at `from`, or with a
  // run in the window), oldest first, each with its runs. At most
  // `max_rows` jobs: a caller that asks for its cap plus one learns the
  // window holds more than the cap.
  // Only jobs of tenants in `scope` are read (and counted against
  // `max_rows`).
  [[nodiscard]] virtual Result<std::vector<JobRecord>> JobsForWindow(
      TimeMs from, TimeMs to, const model::TenantScope& scope, std::size_t max_rows) = 0;

  // Where committed changes are announced (store/change_feed.h): the job
  // lifecycle's writes (control/lifecycle.cc), and through the same store
  // the controller's node and alert changes. Null: nobody watches. Set
  // once, before the store is shared.
  void set_change_feed(ChangeFeed* feed) { feed_ = feed; }
  ChangeFeed* change_feed() const { return feed_; }

 private:
  ChangeFeed* feed_ = nullptr;
};

// --- nodes, their cordons and GPU health ---
class NodeStore {
 public:
  virtual ~NodeStore() = default;

  [[nodiscard]] virtual Status UpsertNode(const model::NodeInfo& info, TimeMs now) = 0;
  // Records the node's state, and a node event (one per report, also when
  // the state is unchanged: an agent's reconnection shows in the events).
  // NotFound for a node never registered.
  [[nodiscard]] virtual Status SetNodeState(const std::string& name, model::NodeState state,
                                            TimeMs now) = 0;
  [[nodiscard]] virtual Result<std::vector<NodeRecord>> ListNodes() = 0;
  [[nodiscard]] virtual Result<std::vector<NodeEvent>> NodeEvents(const std::string& node,
                                                                  std::size_t limit) = 0;
  // Cordons (or drains) a node, or one GPU when `gpu` is set. NotFound for
  // an unknown node or GPU; a second cordon replaces the first.
  // `audit`, when set, makes the record of the change, committed with it.
  [[nodiscard]] virtual Status SetCordon(const std::string& node, std::optional<std::uint32_t> gpu,
                                         const Cordon& cordon, TimeMs now,
                                         const AuditOf<>& audit = {}) = 0;
  // Lifts a cordon; resolves the GPU's open alerts. Returns whether there was one.
  [[nodiscard]] virtual Result<bool> Uncordon(const std::string& node,
                                              std::optional<std::uint32_t> gpu,
                                              const std::string& by, TimeMs now,
                                              const AuditOf<>& audit = {}) = 0;
  // Records a GPU's health as its agent reported it.
  [[nodiscard]] virtual Status SetGpuHealth(const std::string& node, std::uint32_t gpu,
                                            bool healthy, const std::string& detail,
                                            TimeMs now) = 0;
  // Records the node's container runtime as its running agent reported it
  // ("podman" or "", checked by the caller), with a node event when it
  // differs from what the node had. Returns whether it did; NotFound for a
  // node not in the inventory.
  [[nodiscard]] virtual Result<bool> SetContainerRuntime(const std::string& node,
                                                         const std::string& runtime,
                                                         TimeMs now) = 0;

  // --- removal and node certificates (docs/operations.md, "Removing a node") ---
  // Removes `node` from the inventory (its row and cordons; its events and
  // history stay) and revokes its certificates: the node name's revocation
  // time becomes `now` (control/pki.h RevokedBy). NotFound for an unknown
  // node; FailedPrecondition, naming them, while runs are Starting or
  // Running there. `audit` makes the record, committed with the removal.
  [[nodiscard]] virtual Status RemoveNode(const std::string& node, const std::string& by,
                                          TimeMs now, const AuditOf<>& audit = {}) = 0;
  // When `node`'s certificates were last revoked; nullopt: never. Survives
  // restarts, and a node added back later keeps it (older certificates
  // stay revoked).
  [[nodiscard]] virtual Result<std::optional<TimeMs>> NodeRevokedAt(const std::string& node) = 0;
  // Records that `node` got a new certificate expiring at `expires_ms` (a
  // node event), with `audit`'s record in the same transaction. Refused
  // (PermissionDenied) when the node is not in the inventory, or the
  // certificate it renews with (issued at `presented_not_before_ms`) is
  // revoked: checked in the transaction, so a removal cannot slip between.
  [[nodiscard]] virtual Status RecordNodeCertRenewal(const std::string& node,
                                                     TimeMs presented_not_before_ms,
                                                     TimeMs expires_ms, TimeMs now,
                                                     const AuditOf<>& audit = {}) = 0;
};

// --- alerts, their rules and deliveries ---
class AlertStore {
 public:
  virtual ~AlertStore() = default;

  // --- alerts (the one writer of the alerts table) ---
  // Inserts the alert and, in the same transaction, one "raised" delivery per
  // sink in alert.sinks.
  [[nodiscard]] virtual Result<std::int64_t> RaiseAlert(const Alert& alert) = 0;
  // RaiseAlert unless an alert of the same (rule, subject) is open (kOpen) or
  // exists (kEver): the new id, or nullopt when refused.
  [[nodiscard]] virtual Result<std::optional<std::int64_t>> RaiseAlertOnce(const Alert& alert,
                                                                           AlertDedupe dedupe) = 0;
  [[nodiscard]] virtual Result<std::vector<Alert>> FindAlerts(const AlertFilter& filter) = 0;
  // Every alert (or every open one), oldest first.
  [[nodiscard]] Result<std::vector<Alert>> ListAlerts(bool open_only) {
    AlertFilter filter;
    filter.open_only = open_only;
    return FindAlerts(filter);
  }
  [[nodiscard]] virtual Result<Alert> GetAlert(std::int64_t id) = 0;
  // Resolves an open alert and queues a "resolved" delivery per sink it was
  // raised to. Returns false when it was resolved already; NotFound when no
  // such alert.
  // `audit` makes the record of a resolve from the alert (as it was before
  // it), committed with it; none when it was resolved already.
  [[nodiscard]] virtual Result<bool> ResolveAlert(std::int64_t id, const std::string& by,
                                                  TimeMs now, const AuditOf<Alert>& audit = {}) = 0;

  // --- alert rules (versioned; none applied: model::DefaultAlertRules) ---
  // Validates with model::ParseAlertRules (errors name the field) and appends
  // a version. Returns it.
  // With a `base`: refused (FailedPrecondition, field base_version) unless
  // `base` is still the newest version (0: none applied yet).
  // `audit` makes the record from the new version, committed with it.
  [[nodiscard]] virtual Result<std::int64_t> ApplyAlertRules(
      const std::string& yaml, const std::string& by, const std::string& comment, TimeMs now,
      std::optional<std::int64_t> base, const AuditOf<std::int64_t>& audit = {}) = 0;
  // The newest version; nullopt when none was ever applied.
  [[nodiscard]] virtual Result<std::optional<AlertRulesVersion>> ActiveAlertRules() = 0;

  // --- alert deliveries (the webhook outbox) ---
  // Undelivered, not given up, next_attempt_ms <= now; oldest first.
  [[nodiscard]] virtual Result<std::vector<AlertDelivery>> DueDeliveries(TimeMs now,
                                                                         std::size_t limit) = 0;
  // Records one attempt: delivered (error empty) or failed with `error`,
  // retried at `next_attempt_ms`, or given up when that is nullopt.
  // NotFound for an unknown delivery.
  [[nodiscard]] virtual Status RecordDeliveryAttempt(std::int64_t id, const std::string& error,
                                                     std::optional<TimeMs> next_attempt_ms,
                                                     TimeMs now) = 0;
  // The newest `limit` deliveries with id < before_id (none: any), newest
  // first.
  [[nodiscard]] virtual Result<std::vector<AlertDelivery>> ListDeliveries(
      std::size_t limit, std::optional<std::int64_t> before_id) = 0;
};

// --- inference services (docs/services.md) ---
// A service is owned by a tenant and named uniquely within it. Every change
// of its spec (an apply that changes it, a scale, a rollback) is a new
// revision, numbered 1, 2, 3, ...; the newest kServiceRevisionsKept are
// kept, so a rollback always has the one before.
inline constexpr std::size_t kServiceRevisionsKept = 10;

struct ServiceRevision {
  std::int64_t revision = 0;
  model::ServiceSpec spec;
  TimeMs created_ms = 0;
  std::string created_by;
  std::string change;  // "apply", "scale" or "rollback"
  // A rollback's revision: the revision whose spec it restores.
  std::optional<std::int64_t> restores{};
};

struct ServiceRecord {
  std::int64_t id = 0;  // the list's order and cursor; never reused
  std::string tenant;
  std::string name;
  std::int64_t revision = 0;  // the current revision; spec is its spec
  model::ServiceSpec spec;
  TimeMs created_ms = 0;
  std::string created_by;
  TimeMs updated_ms = 0;
  std::string updated_by;
  // The kept revisions, newest first (GetService only; lists leave it empty).
  std::vector<ServiceRevision> revisions{};
};

// Where a service's canary rollout stands (docs/services.md, "Canary
// steps"): the service controller moves it from step to step, `berth svc
// rollout resume` moves it on by hand. Kept apart from the revisions: a
// scale or a change that keeps the replicas as they are carries it over.
struct RolloutProgress {
  std::int64_t revision = 0;  // the revision whose rollout it is
  std::uint32_t step = 0;     // an index into its rollout.canary; its size: done
  TimeMs since_ms = 0;        // when it reached the step
  std::string by;             // "berth", or who resumed it
  bool operator==(const RolloutProgress&) const = default;
};

// What an apply did: a new service, a new revision, or nothing (the spec
// was the current one).
enum class ServiceApplied { kCreated, kRevised, kUnchanged };

struct ServiceApply {
  ServiceApplied applied = ServiceApplied::kCreated;
  ServiceRecord service;
};

struct ServiceFilter {
  std::string tenant;  // empty: any
  std::size_t limit = 1000;
  // Keyset paging, newest first: only services with id < before_id.
  std::optional<std::int64_t> before_id{};
  // Only the services of tenants in this scope (the request's tenant scope),
  // filtered in the query before `limit`.
  model::TenantScope tenants = model::TenantScope::All();
  // Only services or only sessions; nullopt: both.
  std::optional<model::ServiceKind> kind{};
};

// Checks a spec a change would make current (an apply's, or the one a
// rollback restores), inside the change's transaction: against the active
// policy its queue must be an inference queue. An error refuses the change.
using ServiceAdmission = std::function<Status(const model::ServiceSpec& spec)>;

class ServiceStore {
 public:
  virtual ~ServiceStore() = default;

  // Creates spec.name in spec.tenant (revision 1), or makes `spec` a new
  // revision when it differs from the current one; the same spec changes
  // nothing and returns the current revision (no audit record). A create is
  // refused (ResourceExhausted, field "name") when the tenant already has
  // `max_per_tenant` services. `admit` (when set) may refuse either. A
  // refusal commits nothing. `audit` makes the record from the result.
  [[nodiscard]] virtual Result<ServiceApply> ApplyService(
      const model::ServiceSpec& spec, const std::string& by, TimeMs now, std::size_t max_per_tenant,
      const ServiceAdmission& admit = {}, const AuditOf<ServiceApply>& audit = {}) = 0;
  // With its kept revisions. NotFound "service <tenant>/<name> not found".
  [[nodiscard]] virtual Result<ServiceRecord> GetService(const std::string& tenant,
                                                         const std::string& name) = 0;
  // Newest first (by id), without revisions.
  [[nodiscard]] virtual Result<std::vector<ServiceRecord>> ListServices(
      const ServiceFilter& filter) = 0;
  // A new revision with replicas {min, max}; InvalidArgument (field "min"
  // or "max") unless 0 <= min <= max, 1 <= max <= kMaxServiceReplicas.
  // Bounds equal to the current ones change nothing. `audit` gets the
  // service before and after.
  [[nodiscard]] virtual Result<ServiceRecord> ScaleService(
      const std::string& tenant, const std::string& name, model::ReplicaBounds bounds,
      const std::string& by, TimeMs now,
      const AuditOf<ServiceRecord, ServiceRecord>& audit = {}) = 0;
  // A new revision whose spec is the one of the revision before the current
  // one. FailedPrecondition (field "revision") when there is none.
  [[nodiscard]] virtual Result<ServiceRecord> RollbackService(
      const std::string& tenant, const std::string& name, const std::string& by, TimeMs now,
      const ServiceAdmission& admit = {},
      const AuditOf<ServiceRecord, ServiceRecord>& audit = {}) = 0;
  // The service's rollout progress; nullopt when none was recorded.
  // NotFound when the service is gone.
  [[nodiscard]] virtual Result<std::optional<RolloutProgress>> GetRolloutProgress(
      const std::string& tenant, const std::string& name) = 0;
  // Records `next` if the progress is still `expected` (nullopt: none
  // recorded); else FailedPrecondition (field "rollout"): another change
  // moved it first. NotFound when the service is gone. `audit` gets `next`.
  [[nodiscard]] virtual Result<RolloutProgress> SetRolloutProgress(
      const std::string& tenant, const std::string& name,
      const std::optional<RolloutProgress>& expected, const RolloutProgress& next,
      const AuditOf<RolloutProgress>& audit = {}) = 0;
  // Removes the service and its revisions; returns it as it was.
  [[nodiscard]] virtual Result<ServiceRecord> DeleteService(
      const std::string& tenant, const std::string& name, const std::string& by, TimeMs now,
      const AuditOf<ServiceRecord>& audit = {}) = 0;
};

// The control plane's durable state, every concern in one database (one
// backend: SqliteStore). Callers that need one concern take that interface;
// the lifecycle's writes go through control/lifecycle.h.
class Store : public PolicyStore,
              public JobStore,
              public NodeStore,
              public AlertStore,
              public ServiceStore {
 public:
  ~Store() override = default;
};

}  // namespace berth::store
