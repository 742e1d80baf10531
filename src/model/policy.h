// The scheduling policy: pools, priority classes, tenants' hierarchical
// queues and their quotas. Policy is data: versioned YAML that platform
// admins apply, diff and roll back, and that every scheduling decision
// records by version. Parsed and validated here; no I/O.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace berth::model {

// What a quota counts. GPUs may be counted by model ("gpus/H100-80GB") or
// over any model ("gpus"). Fractional GPUs count in milli-GPUs.
enum class ResourceKind { kGpus, kGpuMemory, kCpu, kMemory };

struct ResourceKey {
  ResourceKind kind = ResourceKind::kGpus;
  std::string gpu_model;  // only for kGpus; empty: any model
  auto operator<=>(const ResourceKey&) const = default;
};

// "gpus", "gpus/H100-80GB", "gpu_memory", "cpu", "memory".
std::string ResourceKeyName(const ResourceKey& key);
std::optional<ResourceKey> ParseResourceKey(std::string_view name);

// One quota amount as the policy YAML writes it ("16", "0.5" GPUs; "500m"
// or "4" CPUs; "80Gi" bytes), in the unit below; errors name `field`.
Result<std::int64_t> ParseQuotaAmount(ResourceKind kind, std::string_view text,
                                      const std::string& field);
// The inverse: how the policy YAML writes `v` of `kind`.
std::string FormatQuotaAmount(ResourceKind kind, std::int64_t v);

// Amounts are exact integers in the unit of the resource: milli-GPUs for
// kGpus (1000 = one whole GPU), bytes for kGpuMemory and kMemory, millicores
// for kCpu.
struct Quota {
  std::int64_t guaranteed = 0;
  // How far above `guaranteed` the queue may borrow idle capacity; nullopt:
  // no limit beyond the cluster itself.
  std::optional<std::int64_t> borrow_limit;
  // Share of idle capacity relative to other borrowers (weighted fairness).
  std::int64_t weight = 1;
  // Part of `guaranteed` never lent to other queues, even while idle.
  std::int64_t lending_limit = 0;
};

// What happens to a submission that would take the queue over its quota.
enum class OverQuota { kBorrow, kWait, kReject };

// The operator's cap on how many attempts a failing job gets (`retry:
// {max_attempts: N}`, docs/policy.md "Retries"), at the policy's top level or
// on a queue: a job's attempts are the fewer of its own retry.max_attempts
// and the cap; 1 turns retries off. Unset: no cap (the job's block decides).
struct RetryCap {
  std::optional<std::uint32_t> max_attempts;
  bool operator==(const RetryCap&) const = default;
};

struct QueuePolicy {
  std::string path;                // "vision/training": tenant first, then nested names
  std::string tenant;              // first element of path
  std::string parent;              // "" for a tenant's top-level queue
  std::string kind = "training";   // training | inference | interactive
  std::vector<std::string> pools;  // empty: every pool
  std::map<ResourceKey, Quota> quota;
  OverQuota over_quota = OverQuota::kBorrow;
  // Jobs in this queue may be preempted unless they say otherwise.
  bool preemptible_by_default = true;
  // kind interactive only: the longest a session of this queue lives,
  // whatever its spec asks (docs/services.md, "Interactive sessions");
  // nullopt: the spec's session.max_lifetime alone.
  std::optional<std::int64_t> max_session_lifetime_ms{};
  // Caps the attempts of jobs in this queue and its children (a child's own
  // wins), over the policy's top-level cap.
  RetryCap retry{};
};

struct Pool {
  std::string name;
  std::map<std::string, std::string> selector;  // node labels, all must match
  // Whole GPUs of the pool kept for inference (`inference_headroom: {gpus:
  // N}`, docs/policy.md): jobs that are not inference replicas may use the
  // pool's last N GPUs only if they are preemptible, and an inference
  // replica that cannot be placed reclaims them (docs/scheduling.md,
  // "Inference headroom"). 0: none.
  std::int64_t inference_headroom_gpus = 0;
  bool operator==(const Pool&) const = default;
};
// The most GPUs a pool's inference headroom may keep.
inline constexpr std::int64_t kMaxInferenceHeadroomGpus = 1'000'000;

struct PriorityClass {
  std::string name;
  std::int32_t value = 0;  // higher runs first and may preempt lower
  bool preemptible = true;
};

// EASY-style backfill: a queue head that waits for GPUs reserves the ones
// it will get when running jobs reach their max runtime; later jobs may use
// reserved GPUs only if they end (now + max runtime) before that start.
struct Backfill {
  bool enabled = true;
  // Reservations per cycle, in fair-share order of the waiting heads; heads
  // past the cap get an estimated start but no reservation. Each one costs a
  // replay of the releases, so this bounds the cycle's extra work.
  std::int64_t max_reservations = 32;
  bool operator==(const Backfill&) const = default;
};
inline constexpr std::int64_t kMaxReservations = 1000;

// Moving running jobs to make room for a gang that fits nowhere as the GPUs
// lie: a waiting job may have up to `max_moves` preemptible running jobs that
// checkpoint (their spec has a checkpoint block) stopped and started again
// elsewhere in the same plan. Jobs that do not checkpoint are never moved.
struct Consolidation {
  bool enabled = true;
  std::int64_t max_moves = 4;  // per waiting job; 0 turns moving off too
  // Waiting jobs tried per cycle, in the order they are decided: each try
  // may cost a walk of the nodes, so this bounds the cycle's extra work.
  std::int64_t max_jobs_per_cycle = 8;
  bool operator==(const Consolidation&) const = default;
};
inline constexpr std::int64_t kMaxMoves = 64;
inline constexpr std::int64_t kMaxConsolidationJobsPerCycle = 1000;

// Who a tenant's runs execute as on every node (docs/security.md): a user
// each node resolves through NSS (its uid, primary and supplementary groups,
// as slurmd does for the submitting user), or numeric ids. A tenant without
// one gets DerivedUid(tenant) as uid and gid. Root only with allow_root.
struct RunAs {
  std::string user;                  // resolved on the node; empty: numeric
  std::optional<std::uint32_t> uid;  // set: numeric ids, no lookup
  std::uint32_t gid = 0;             // numeric only; defaults to uid
  std::vector<std::uint32_t> groups{};
  bool allow_root = false;
  bool operator==(const RunAs&) const = default;
};

// A directory tree a tenant's jobs may use: their working directories,
// checkpoints and mounts must lie under one (docs/security.md). Read-only
// grants serve mounts marked read_only only.
struct StorageGrant {
  std::string path;  // absolute, normal ("/data/vision"); "/" grants everything
  bool writable = true;
  bool operator==(const StorageGrant&) const = default;
};
inline constexpr std::size_t kMaxStorageGrants = 64;

// The network a tenant's containers (jobs with `image`) get: their own
// network namespace on podman's network (private, the default), only a
// loopback device (none), or the node's own (host: what gangs across nodes
// need for NCCL; a platform admin's choice). Plain processes always share
// the node's network, as under Slurm.
enum class ContainerNetwork { kPrivate, kNone, kHost };
std::string_view ContainerNetworkName(ContainerNetwork n);  // "private", "none", "host"

// Bounds on what a tenant's members may create (docs/security.md), so no
// member can exhaust the store, the scheduler or berthd's disk for the
// others. Each is unset unless the policy sets it: at the top level for
// every tenant, under tenants.<name>.limits for one (which wins). Unset
// everywhere: the default below. Only a platform admin changes them.
struct Limits {
  std::optional<std::int64_t> pending_jobs;             // queued jobs of the tenant, all members
  std::optional<std::int64_t> pending_jobs_per_member;  // queued jobs one identity submitted
  std::optional<std::int64_t> spec_bytes;               // one submission's spec, as stored (JSON)
  std::optional<std::int64_t> replicas_per_job;
  std::optional<std::int64_t> log_bytes_per_run;    // kept per run (head and tail past it)
  std::optional<std::int64_t> tokens_per_identity;  // live API tokens of one member
  bool operator==(const Limits&) const = default;
};

// The defaults, and the bounds any setting must lie in.
inline constexpr std::int64_t kDefaultPendingJobs = 1'000'000;
inline constexpr std::int64_t kDefaultPendingJobsPerMember = 250'000;
inline constexpr std::int64_t kDefaultSpecBytes = std::int64_t{1} << 20;
inline constexpr std::int64_t kDefaultLogBytesPerRun = std::int64_t{64} << 20;
inline constexpr std::int64_t kDefaultTokensPerIdentity = 20;
inline constexpr std::int64_t kMaxPendingJobsLimit = 100'000'000;
inline constexpr std::int64_t kMaxSpecBytesLimit = std::int64_t{64} << 20;
inline constexpr std::int64_t kMinLogBytesPerRun = 4096;
inline constexpr std::int64_t kMaxLogBytesPerRun = std::int64_t{1} << 40;
inline constexpr std::int64_t kMaxTokensPerIdentity = 10'000;

// One limit as it applies to a tenant: its value and the policy setting it
// came from ("tenants.vision.limits.pending_jobs", "limits.pending_jobs", or
// "" for the built-in default), for refusals that say who can raise it.
struct EffectiveLimit {
  std::int64_t value = 0;
  std::string name;     // "pending_jobs"
  std::string tenant;   // whose limit it is
  std::string setting;  // "" for the default
  // Where it is set and who can raise it, for a refusal: "set by
  // tenants.vision.limits.pending_jobs in the policy; a platform admin can
  // raise it".
  std::string Describe() const;
};

struct TenantPolicy {
  std::optional<RunAs> run_as{};
  std::vector<StorageGrant> storage{};
  ContainerNetwork container_network = ContainerNetwork::kPrivate;
  Limits limits{};
  bool operator==(const TenantPolicy&) const = default;
};

// Derived run identities live in [kDerivedUidBase, kDerivedUidBase +
// kDerivedUidSpan): far above the ranges distributions, LDAP and systemd
// hand out (systemd leaves 0x70000000..0x7FFFFFFF unused), so a derived uid
// owns nothing on a node but its runs' files; and below 2^31, because
// podman (and other tools that parse ids as signed 32-bit numbers) refuses
// larger ones: a container run could not take such an identity.
inline constexpr std::uint32_t kDerivedUidBase = 2'000'000'000U;
inline constexpr std::uint32_t kDerivedUidSpan = 1'000'000U;

// The uid (and gid) a tenant's runs get when the policy names none: stable
// across policy versions and berthd restarts, since it depends only on the
// name (FNV-1a). ParsePolicy refuses a policy in which two tenants'
// identities coincide.
std::uint32_t DerivedUid(std::string_view tenant);

// reclaim_grace: its default (chosen on the ITP traces, docs/evaluation.md
// "Reclaim that does not waste"), and its bound (a guarantee is never held
// back longer than this).
inline constexpr std::int64_t kDefaultReclaimGraceMs = std::int64_t{6} * 3'600'000;
inline constexpr std::int64_t kMaxReclaimGraceMs = std::int64_t{24} * 3'600'000;
// short_first_max_wait: within a leaf queue, jobs of equal priority go
// shortest predicted GPU time first (docs/scheduling.md "Shortest predicted
// first"), except that a job waiting longer than this goes back to submit
// order, ahead of every job that has not; 0 turns short-first off. The
// default (7 days) was chosen on the ITP traces (docs/evaluation.md "Run-time
// estimates"): 24h gave back most of the gain (waits there run to days), 3d
// half of it, and past 7d nothing changed.
inline constexpr std::int64_t kDefaultShortFirstMaxWaitMs = std::int64_t{7} * 24 * 3'600'000;

struct Policy {
  std::int64_t version = 0;  // assigned by the store when applied
  std::vector<Pool> pools;
  std::vector<PriorityClass> priority_classes;  // defaults: low, normal, high, critical
  std::vector<QueuePolicy> queues;              // parents before children
  std::int64_t usage_half_life_ms = 3'600'000;  // decay of historical usage
  std::int64_t min_runtime_ms = 0;              // a job is not reclaimed before this
  // How long a job below its guarantee that could run only by reclaiming
  // lent GPUs waits for their borrowers to end or checkpoint instead
  // (docs/scheduling.md, "Reclaim grace"); counted from the first cycle it
  // needed the reclaim. After it, the guarantee wins as without one.
  std::int64_t reclaim_grace_ms = kDefaultReclaimGraceMs;
  std::int64_t short_first_max_wait_ms = kDefaultShortFirstMaxWaitMs;
  Backfill backfill{};
  Consolidation consolidation{};
  std::map<std::string, TenantPolicy> tenants{};  // by tenant name
  Limits limits{};                                // every tenant's, unless its own entry says
  RetryCap retry{};                               // every queue's, unless the queue says

  const QueuePolicy* FindQueue(std::string_view path) const;
  const Pool* FindPool(std::string_view name) const;
  const PriorityClass* FindPriorityClass(std::string_view name) const;
};

// What `tenant`'s runs execute as: the policy's run_as, else the derived
// numeric identity.
RunAs RunIdentityOf(const Policy& policy, std::string_view tenant);
// The network `tenant`'s containers get (private unless the policy says).
ContainerNetwork ContainerNetworkOf(const Policy& policy, std::string_view tenant);

// One of `tenant`'s limits: its own setting, else the policy's top-level
// one, else the default. `field` picks it (&Limits::pending_jobs).
EffectiveLimit LimitOf(const Policy& policy, std::string_view tenant,
                       std::optional<std::int64_t> Limits::*field);

// The retry cap that applies to jobs of queue `queue`, and where it is set.
struct AttemptCap {
  std::uint32_t max_attempts = 1;
  // The queue whose `retry` sets it (the job's own or an ancestor); empty:
  // the policy's top level.
  std::string queue;
};
// The cap on `queue`'s jobs: the queue's own retry setting, else its nearest
// ancestor's, else the top level's; nullopt when none is set.
std::optional<AttemptCap> AttemptCapOf(const Policy& policy, std::string_view queue);
// The attempts a job that asks for `asked` gets under `cap`.
std::uint32_t EffectiveMaxAttempts(std::uint32_t asked, const std::optional<AttemptCap>& cap);

struct JobSpec;  // model/job.h

// Refuses a job whose working_dir, checkpoint.dir, checkpoint.file or mounts
// lie outside its tenant's storage grants, naming the field, the path and
// the grants the tenant has.
Status CheckStorageGrants(const Policy& policy, const JobSpec& spec);

// Refuses a job over its tenant's spec_bytes or replicas_per_job limit,
// naming the limit, the job's figure and who can raise it. `spec_bytes`:
// the size of the spec as stored.
Status CheckSpecLimits(const Policy& policy, const JobSpec& spec, std::size_t spec_bytes);

// Limits documented in docs/scheduling.md.
inline constexpr std::size_t kMaxQueueDepth = 4;
inline constexpr std::int64_t kMaxWeight = 1000;

// The policy of a fresh install: tenant "default" with queue "default", no
// quota limits, the four default priority classes, one pool of every node.
Policy DefaultPolicy();

// Parses and validates a policy document. Unknown fields, duplicate names,
// children guaranteeing more than their parent, unknown pools or priority
// classes are errors naming the field path.
Result<Policy> ParsePolicy(std::string_view yaml);
std::string PolicyToYaml(const Policy& policy);

}  // namespace berth::model
