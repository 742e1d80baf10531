// Reasons are data: a code plus the numbers behind it. The scheduler and the
// control loop produce them; the API renders them into words at the edge, so
// a script can act on `code` and `counts` while a person reads the message.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace berth::model {

enum class ReasonCode {
  kNone,
  kQueued,         // not looked at yet: submitted after the last cycle
  kNoNodes,        // the cluster has no nodes registered
  kBehindInQueue,  // FIFO: an earlier job in the same queue is waiting
  kNoNodeFits,     // every node was rejected; counts say why, per cause
  kScheduled,      // placed; waiting for the agents to start it
  kRunning,
  kSucceeded,
  kFailedExitCode,  // a replica exited non-zero or by a signal
  kFailedToStart,   // command not found, bad working directory
  kMaxRuntimeExceeded,
  kCancelled,
  kRunLost,  // the agent no longer knows the run (its state was lost)
  // From the scheduling core. Pending reasons carry the queue's numbers
  // (kQueue* keys) and the job's place in its queue (position, ahead_*).
  kQueueUnknown,  // the job's tenant/queue is not in the policy; detail: the path
  kOverQuota,     // past guaranteed + borrow_limit, or borrowing not allowed; detail: queue
  kNotPreemptibleOverGuarantee,  // non-preemptible jobs run only within guarantee
  kFragmented,                   // enough free GPUs in total, not where the job can use them
  kPreempted,                    // evicted for a higher-priority job of the same queue
  kReclaimed,                    // evicted so a queue below its guarantee gets it back
  kWaitingForEvictions,  // placed once the jobs evicted for it have stopped; counts.evictions
  kMoved,  // stopped to restart elsewhere so a gang fits (consolidation); counts: by_job
  // A replica's GPU reported a hardware error (Xid, ECC, fell off the bus);
  // Berth cordoned the GPU and stopped the gang. detail: node, GPU and error.
  kGpuFailed,
  // A failed attempt its retry policy names: it waits out the backoff, then
  // is placed again. counts: failures, max_attempts, backoff_s;
  // detail: "<failure class>: <what failed>".
  kRetrying,
  // Stopped because its node is being drained, and queued again; detail: node.
  kDrained,
  // A low-priority job of a tenant over its enforced monthly budget waits
  // (docs/metering.md). counts: kBudgetUsed, kBudgetLimit (micro-GPU-hours or
  // micro-units of money); detail: "<month> <unit>" ("2026-11 GPU-hours",
  // "2026-11 USD").
  kOverBudget,
  // A service replica failed its liveness probe and its agent stopped it;
  // its service replaces it. counts: replica; detail: the probe's outcome.
  kLivenessFailed,
  // Evicted so an inference replica gets the GPUs of a pool's inference
  // headroom (policy pools[].inference_headroom) that this preemptible job
  // was using. counts: by_job (the replica), work_lost_ms; detail:
  // "<service> <pool>" ("ml/coder default").
  kHeadroomReclaimed,
};
inline constexpr ReasonCode kLastReasonCode = ReasonCode::kHeadroomReclaimed;
inline constexpr std::string_view kBudgetUsed = "budget_used_micros";
inline constexpr std::string_view kBudgetLimit = "budget_limit_micros";

std::string_view ReasonCodeName(ReasonCode code);

// Keys of `counts` for kNoNodeFits: how many nodes each cause rejected.
inline constexpr std::string_view kCauseNotReady = "node_not_ready";
inline constexpr std::string_view kCauseCordoned = "node_cordoned";  // or draining
inline constexpr std::string_view kCauseTaint = "untolerated_taint";
inline constexpr std::string_view kCauseGpuModel = "gpu_model_mismatch";
inline constexpr std::string_view kCauseGpuMemory = "gpu_memory_too_small";
inline constexpr std::string_view kCauseTooFewGpus = "too_few_free_gpus";
// The node has fewer GPUs of the requested kind, free or not, than one
// replica asks for: it could never take one.
inline constexpr std::string_view kCauseTooFewGpusInTotal = "too_few_gpus_in_total";
inline constexpr std::string_view kCauseCpu = "too_little_free_cpu";
inline constexpr std::string_view kCauseMemory = "too_little_free_memory";
inline constexpr std::string_view kCauseSelector = "node_selector_mismatch";
inline constexpr std::string_view kCausePool = "outside_pool";
inline constexpr std::string_view kCauseUnhealthy = "gpus_unhealthy";
inline constexpr std::string_view kCauseTopology = "topology";  // no NVLink island / node fits
// The node is in a pool whose inference headroom the job may not take: it is
// neither preemptible nor an inference replica, and the pool has no GPUs left
// outside its headroom for it. With it, detail may be "headroom_pool=NAME"
// (the first such pool; a "would run" phrase names it).
inline constexpr std::string_view kCauseInferenceHeadroom = "inference_headroom";
// The job has an image (it runs in a container) and the node's agent reports
// no container runtime (NodeInfo::container_runtime is not "podman"): only
// a node whose agent found podman runs it.
inline constexpr std::string_view kCauseNoContainerRuntime = "no_container_runtime";
// kNoNodeFits of a job with an image: how many of the nodes report no
// container runtime, whatever else rules them out (absent when none). The
// reason's detail is then "image=IMAGE", unless a "would run now if" hint
// holds it.
inline constexpr std::string_view kNodesWithoutContainerRuntime = "nodes_without_container_runtime";
inline constexpr std::string_view kImageDetailPrefix = "image=";
// For kNoNodeFits of a gang: how many replicas had room before one did not.
inline constexpr std::string_view kCauseGang = "gang_does_not_fit";

// Queue-level numbers, in milli-GPUs (1000 = one GPU). kQueueBorrowLimit is
// absent when the queue may borrow without limit.
inline constexpr std::string_view kQueueRequested = "requested_mgpu";
inline constexpr std::string_view kQueueUsed = "queue_used_mgpu";
inline constexpr std::string_view kQueueGuaranteed = "queue_guaranteed_mgpu";
inline constexpr std::string_view kQueueBorrowLimit = "queue_borrow_limit_mgpu";
inline constexpr std::string_view kQueueBorrowable = "borrowable_now_mgpu";
// Order: 1-based position among the queue's waiting jobs, and what is ahead.
inline constexpr std::string_view kPosition = "position";
inline constexpr std::string_view kAheadJobs = "ahead_jobs";
inline constexpr std::string_view kAheadGpus = "ahead_gpus";
// kFragmented: free GPUs on usable nodes, GPUs the gang needs, largest block.
inline constexpr std::string_view kFreeGpus = "free_gpus";
inline constexpr std::string_view kNeededGpus = "needed_gpus";
inline constexpr std::string_view kLargestFree = "largest_free_on_a_node";
// "Would run now if": one change that suffices, when cheap to find.
inline constexpr std::string_view kWouldFitGpusPerReplica = "would_run_with_gpus_per_replica";
// kPreempted / kReclaimed: who caused it (detail: that job's queue).
inline constexpr std::string_view kByJob = "by_job";
inline constexpr std::string_view kWorkLostMs = "work_lost_ms";
// Whether eviction could help a job waiting for capacity (kNoNodeFits,
// kFragmented). Present only when the scheduler looked: the jobs of other
// queues holding lent GPUs it could reclaim, or 1 under
// kReclaimNotBelowGuarantee when its queue is not below its guarantee and may
// not reclaim; the lower-priority jobs of its own queue it could preempt;
// and, of the jobs it could otherwise evict, how many are still within the
// policy's min_runtime and when the first of them leaves it. Evicting every
// candidate did not free enough, or the job would be running.
inline constexpr std::string_view kReclaimNotBelowGuarantee = "reclaim_not_below_guarantee";
inline constexpr std::string_view kReclaimCandidates = "reclaim_candidates";
inline constexpr std::string_view kPreemptCandidates = "preempt_candidates";
inline constexpr std::string_view kEvictableAfterMinRuntime = "evictable_after_min_runtime";
inline constexpr std::string_view kMinRuntimeEndsInMs = "min_runtime_ends_in_ms";
// Reclaim grace (policy reclaim_grace, docs/scheduling.md "Reclaim grace"): the
// job could run now by reclaiming lent GPUs, and waits instead for their
// borrowers to end or checkpoint. kReclaimSinceMs: when it first needed the
// reclaim (absolute; the next cycle's snapshot carries it back in
// PendingJob::reclaim_since_ms); kReclaimAtMs: when the guarantee wins
// (absolute), kReclaimInMs the same from the cycle's now. The reclaim it
// would make now: kReclaimVictims borrower jobs, the lowest id
// kReclaimFirstVictim, the most work any one of them would lose
// (kReclaimWorkLostMs) and the GPU time all of them would lose together
// (kReclaimLostMgpuMs, milli-GPU-ms).
inline constexpr std::string_view kReclaimSinceMs = "reclaim_since_ms";
inline constexpr std::string_view kReclaimAtMs = "reclaim_at_ms";
inline constexpr std::string_view kReclaimInMs = "reclaim_in_ms";
inline constexpr std::string_view kReclaimVictims = "reclaim_victims";
inline constexpr std::string_view kReclaimFirstVictim = "reclaim_first_victim";
inline constexpr std::string_view kReclaimWorkLostMs = "reclaim_work_lost_ms";
inline constexpr std::string_view kReclaimLostMgpuMs = "reclaim_lost_mgpu_ms";
// Consolidation (policy `consolidation`): running jobs that checkpoint and
// could be moved off the nodes the job may use, and the policy's cap on moves
// per job; present only when the scheduler tried to make room by moving.
inline constexpr std::string_view kMoveCandidates = "move_candidates";
inline constexpr std::string_view kMaxMovesKey = "max_moves";
// Estimated start of a waiting queue head (backfill, docs/scheduling.md).
// Known: kEtaMs is absolute (ms since the epoch), kEtaInMs the same from the
// cycle's now, and kEtaReserved is 1 when GPUs are reserved for it (backfill
// never delays it) or 0 for an estimate past the cycle's reservation cap.
inline constexpr std::string_view kEtaMs = "eta_ms";
inline constexpr std::string_view kEtaInMs = "eta_in_ms";
inline constexpr std::string_view kEtaReserved = "eta_reserved";
// Unknown: kEtaUnknown says why (an EtaUnknown value); for kBlockedByUnlimited
// kEtaBlockedBy names one job without a max runtime on GPUs it needs (the
// lowest id) and kEtaBlockers how many such jobs there are.
inline constexpr std::string_view kEtaUnknown = "eta_unknown";
inline constexpr std::string_view kEtaBlockedBy = "eta_blocked_by";
inline constexpr std::string_view kEtaBlockers = "eta_blockers";
enum class EtaUnknown : std::int64_t {
  kBlockedByUnlimited = 1,  // it needs GPUs held by a job with no max runtime
  kCapacity = 2,            // it does not fit even when every running job has ended
  kQuota = 3,               // its queue's quota holds it back, not the GPUs
  kInfeasible = 4,          // no node could ever take it
};
// What a known estimated start stands on (an EtaBasis value), and the
// running job whose end (at its declared max runtime or its predicted end)
// is the last it waits for: kEtaAfterJob, with that job's end in kEtaAfterMs.
inline constexpr std::string_view kEtaBasis = "eta_basis";
inline constexpr std::string_view kEtaAfterJob = "eta_after_job";
inline constexpr std::string_view kEtaAfterMs = "eta_after_ms";
// 1 when that job has already run past its predicted run time, and its end
// is the fallback: as long again as it has run so far.
inline constexpr std::string_view kEtaAfterOverrun = "eta_after_overrun";
enum class EtaBasis : std::int64_t {
  kDeclared = 1,   // every end it waits for is a declared max runtime
  kPredicted = 2,  // at least one is a predicted end (sched/runtime_estimate.h)
  kGrace = 3,      // its reclaim grace ends then, and the reclaim places it
};
// The job's own predicted run time (sched/runtime_estimate.h), when it has
// one: the prediction in ms, its basis (a RuntimeBasis value: 1 user+name,
// 2 user+shape, 3 tenant+shape, 4 shape) and how many finished runs it
// stands on. Absent when the job declares a max runtime (which wins) or
// nothing is known.
inline constexpr std::string_view kPredictedRuntimeMs = "predicted_runtime_ms";
inline constexpr std::string_view kPredictedBasis = "predicted_basis";
inline constexpr std::string_view kPredictedSamples = "predicted_samples";
// Behind a waiting head: the head's estimated start, absolute and from now.
inline constexpr std::string_view kNotBeforeMs = "not_before_ms";
inline constexpr std::string_view kNotBeforeInMs = "not_before_in_ms";
// Free GPUs the job may not use now because they are reserved for jobs that
// start before it would end (set a max runtime that ends by then to use them).
inline constexpr std::string_view kReservedFreeGpus = "reserved_free_gpus";
// GPU sharing. Node causes for a slice (resources.gpu_share): the node has
// GPUs of the model but none in sharing mode; its sharing GPUs have too
// little memory or share left. For a whole-GPU replica: GPUs are free of
// whole-GPU jobs but hold slices, so they are not free.
inline constexpr std::string_view kCauseNotSharing = "gpu_not_in_sharing_mode";
inline constexpr std::string_view kCauseSharedFull = "too_little_room_on_shared_gpus";
inline constexpr std::string_view kCauseHeldBySlices = "gpus_held_by_slices";
// kNoNodeFits of a slice: what one replica asks for (one of them is set).
inline constexpr std::string_view kSliceMgpu = "slice_mgpu";
inline constexpr std::string_view kSliceBytes = "slice_bytes";

// A reason that names another job (kByJob, kEtaBlockedBy,
// kReclaimFirstVictim, kEtaAfterJob) names it for whoever reads the job the reason is
// about, and a reader of one tenant must not learn another tenant's job ids.
// berthd marks each such reference whose job is another tenant's with the
// key plus kOtherTenantSuffix = 1 (MarkOtherTenantJob) when it stores a
// plan; HideOtherTenantsJobs drops the marked ids before the reason reaches a
// reader who cannot read every tenant's jobs, and the text then says "job of
// another tenant" (JobRefText). docs/security.md "Identities and roles".
inline constexpr std::string_view kOtherTenantSuffix = "_other_tenant";
inline constexpr std::array<std::string_view, 4> kJobRefKeys{kByJob, kEtaBlockedBy,
                                                             kReclaimFirstVictim, kEtaAfterJob};

struct Reason {
  ReasonCode code = ReasonCode::kNone;
  // Structured numbers: per-cause node counts, the job ahead, requested GPUs.
  std::map<std::string, std::int64_t, std::less<>> counts;
  // Free text only where the data is text (a start error, who cancelled, a
  // queue path, or a "would run now if" such as "gpu_model=A100-80GB").
  std::string detail;

  bool operator==(const Reason&) const = default;
};

// The languages a reason is rendered in.
enum class Lang { kEn, kZh };

// "en" / "zh".
std::string_view LangName(Lang lang);
// "en" or "zh" (also "en-US", "zh_CN.UTF-8": the language part decides);
// nullopt for anything else.
std::optional<Lang> ParseLang(std::string_view text);

// A reason's amounts in a person's units, as RenderReason writes them:
// GPUs from milli-GPUs ("6 GPUs", "1 GPU", "0.5 GPU"), CPU cores from
// millicores ("4 cores"), sizes ("80 GiB"), durations in their two largest
// units ("2h 15m", "45s"), and a clock time in UTC ("14:30 UTC", with the
// date when it falls on another day than `ref_ms`).
std::string FormatGpus(std::int64_t milli, Lang lang);
// Milli-GPU-milliseconds as GPU-hours with `decimals` decimals ("44.5").
std::string FormatGpuHours(std::int64_t mgpu_ms, int decimals);
std::string FormatCores(std::int64_t millis, Lang lang);
std::string FormatSize(std::uint64_t bytes);
std::string FormatDuration(std::int64_t ms, Lang lang);
std::string FormatClock(std::int64_t unix_ms, std::int64_t ref_ms, Lang lang);
// Why a waiting job's start is unknown (an EtaUnknown value), in words
// ("a job with no max runtime holds GPUs it needs"); `blocked_by` and
// `blockers` name that job and how many there are, when known.
std::string EtaUnknownText(std::int64_t kind, std::int64_t blocked_by, std::int64_t blockers,
                           Lang lang);

// Marks the reference under `key` (one of kJobRefKeys) as naming another
// tenant's job.
void MarkOtherTenantJob(Reason& reason, std::string_view key);
// Whether the reference under `key` names another tenant's job.
bool NamesOtherTenantJob(const Reason& reason, std::string_view key);
// Drops the ids of the marked references, keeping the marks; true when it
// dropped any.
bool HideOtherTenantsJobs(Reason& reason);
// "job 42", or "job of another tenant" for an id of 0 or less (hidden).
std::string JobRefText(std::int64_t id, Lang lang);

// English rendering for the CLI and API ("0/3 nodes fit: 2 too few free GPUs, ...").
std::string RenderReason(const Reason& reason);
// The verified "would run now if" change a reason carries (sched/hints.h
// keeps a hint only when a second scheduling run places the job with it), as
// a clause of its own: "it would run now with 2 GPUs per replica"; empty when
// it carries none. `berth why` leads with it: it is the smallest change known
// to work.
std::string WouldRunText(const Reason& reason, Lang lang);
// The node layer of a reason about something else (sched/layers.h): "; beyond
// that, 0/5 nodes could ever take a replica: tolerating the taint alone
// would open 3, changing the GPU model alone would open 1 (what rules the
// others out: 4 a NoSchedule taint ..., 2 no GPU of the requested model)".
// `ranked`: cause -> nodes it rules out, least change first (NodeLayer's
// `excluded`), listed in that order; `alone`: cause -> nodes it alone rules
// out, said for the causes where it is above 0.
std::string RenderNodeLayer(std::int64_t nodes, std::int64_t could_take,
                            const std::vector<std::pair<std::string, std::int64_t>>& ranked,
                            const std::map<std::string, std::int64_t, std::less<>>& alone,
                            Lang lang);
// A forecast's start for a waiting job (control/forecaster.h) as a clause of
// its own, counted from `now_ms`: "; forecast: starts in about 2h 10m,
// around 14:20 UTC (the scheduler run forward over predicted run times, with
// no new arrivals; made 40s ago)". `predicted`: it stands on a predicted end.
std::string RenderForecast(std::int64_t start_ms, std::int64_t made_at_ms, bool predicted,
                           std::int64_t now_ms, Lang lang);
// The same sentence in `lang`, with the same numbers ("0/3 个节点可以容纳需要
// 2 块 GPU 的副本：1 个未就绪，2 个空闲 GPU 不足").
std::string RenderReason(const Reason& reason, Lang lang);
// The same, with estimated starts counted from `now_ms` (the renderer's
// clock) instead of from the scheduling cycle that wrote the reason: a start
// "in about 2h" an hour ago reads "in about 1h" now.
std::string RenderReason(const Reason& reason, Lang lang, std::int64_t now_ms);

}  // namespace berth::model
