// One scheduling cycle of CoreScheduler (internal). The cycle owns the
// working cluster and quota book; its parts live in one file each:
// core_scheduler.cc (order and admission), evict.cc (reclaim and
// preemption), explain.cc (reasons for jobs left waiting), backfill.cc
// (estimated starts, reservations and backfill).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sched/core_scheduler.h"
#include "sched/placement.h"
#include "sched/plan.h"
#include "sched/quota.h"
#include "sched/running_memo.h"
#include "sched/snapshot.h"

namespace berth::sched {

// Job ids per node, each node's in the order added, all in one pool: a
// cycle files every running job without a max runtime under its node
// (20,000 at 10,000 nodes), where a vector per node was an allocation per
// node per cycle.
class IdsByNode {
 public:
  explicit IdsByNode(std::size_t nodes = 0) : head_(nodes, kEnd), tail_(nodes, kEnd) {}
  void Add(std::size_t node, std::int64_t id) {
    const auto at = static_cast<std::uint32_t>(pool_.size());
    pool_.push_back({id, kEnd});
    if (tail_[node] == kEnd) {
      head_[node] = at;
    } else {
      pool_[tail_[node]].next = at;
    }
    tail_[node] = at;
  }
  void Reserve(std::size_t ids) { pool_.reserve(ids); }
  // Removes every `id` filed under `node`.
  void Erase(std::size_t node, std::int64_t id) {
    std::uint32_t prev = kEnd;
    for (std::uint32_t at = head_[node]; at != kEnd;) {
      const std::uint32_t next = pool_[at].next;
      if (pool_[at].id == id) {
        (prev == kEnd ? head_[node] : pool_[prev].next) = next;
        if (tail_[node] == at) tail_[node] = prev;
      } else {
        prev = at;
      }
      at = next;
    }
  }
  template <typename Fn>
  void ForEach(std::size_t node, Fn&& fn) const {
    for (std::uint32_t at = head_[node]; at != kEnd; at = pool_[at].next) fn(pool_[at].id);
  }

 private:
  static constexpr std::uint32_t kEnd = UINT32_MAX;
  struct Entry {
    std::int64_t id = 0;
    std::uint32_t next = kEnd;
  };
  std::vector<std::uint32_t> head_;
  std::vector<std::uint32_t> tail_;
  std::vector<Entry> pool_;
};

// A pending job resolved against the policy.
struct JobCtx {
  const PendingJob* job = nullptr;
  std::string path;  // "tenant/queue"
  std::optional<std::size_t> leaf;
  std::int32_t priority = 0;
  bool preemptible = true;
  JobShape shape;
  std::int64_t requested_mgpu = 0;  // whole gang
  // A replica of an inference service in a queue of kind inference: it may
  // use and reclaim pools' inference headroom (docs/scheduling.md).
  bool inference = false;
  // Kept out of a pool's inference headroom (shape.headroom_full): the first
  // such pool, for its reason.
  std::string headroom_pool;
};

// The priority value and effective preemptibility of a job.
std::int32_t PriorityValue(const model::Policy& policy, model::Priority p);
bool EffectivePreemptible(const model::Policy& policy, const model::QueuePolicy* queue,
                          model::Priority p, const std::optional<bool>& requested);

// When a waiting job could start: replaying the releases of running jobs
// (at their max runtime) until the gang fits.
struct Eta {
  bool known = false;
  TimeMs start_ms = 0;
  std::vector<ReplicaPlacement> replicas;  // where it fits then
  model::EtaUnknown unknown = model::EtaUnknown::kCapacity;
  std::int64_t blocked_by = 0;  // kBlockedByUnlimited: the lowest blocking job id
  std::int64_t blockers = 0;
  // Known: what it stands on (a predicted end among those it waits for
  // makes it kPredicted), and the last running job whose end it waits for
  // (0: none, GPUs a reservation holds come free then) with that end.
  // A predicted estimate never reserves GPUs (DecideHead).
  model::EtaBasis basis = model::EtaBasis::kDeclared;
  std::int64_t after_job = 0;
  TimeMs after_ms = 0;
  bool after_overrun = false;  // that job ran past its prediction (ExpectedEndOf)
};

// Whether a running job's GPUs have an expected time to come back: a
// declared max runtime, or a predicted run time.
inline bool EndKnown(const RunningJob& r) {
  return r.max_runtime_ms > 0 || r.predicted.known();
}

class Cycle {
 public:
  Cycle(const Snapshot& s, const CoreOptions& options);
  Plan Run();

 private:
  enum class Outcome { kPlaced, kWaiting, kRefused };

  // The constructor's one pass over the running jobs (core_scheduler.cc):
  // what it carries from job to job, and each job's queue as it looks it up.
  struct RunningPass;
  struct RunningQueue;
  // Takes the snapshot's memo when no other cycle holds it, and says whether
  // its entries were resolved on this cluster's layout.
  void OpenMemo(RunningPass& pass);
  // Files running job `i`: its queue (and its place in running_by_leaf_),
  // what it uses against quota (from the memo or resolved anew), its nodes
  // where needed, its priority value and its preemptibility.
  void FileRunning(RunningPass& pass, std::size_t i);
  // The job's queue: the last job's when it is the same, else looked up
  // once per (tenant, queue).
  RunningQueue& QueueOf(RunningPass& pass, const RunningJob& r);
  // The memo's entry for the job under its run key, or nullptr.
  static const RunningMemo::Entry* MemoEntry(RunningPass& pass, const RunningJob& r);
  // Resolves running job `i` without the memo: the nodes of its replicas,
  // what it uses, and its memo entry for the next cycle when `memoable`.
  void ResolveRunning(RunningPass& pass, RunningQueue& q, std::size_t i, bool memoable);
  // PriorityValue and EffectivePreemptible of a running job (not preemptible
  // outside a known queue), each looked up once per distinct value.
  std::int32_t RunningPriority(RunningPass& pass, const RunningJob& r) const;
  bool RunningPreemptible(RunningQueue& q, const RunningJob& r) const;
  // Gives the memo this cycle's entries, in id order, and the cluster layout
  // they hold for.
  void SaveMemo(RunningPass& pass);

  // Run's steps. A leaf queue's waiting jobs in order, and how far the pass
  // has got through them.
  struct Queued {
    const PendingJob* job;
    std::int32_t priority;
    std::int64_t rank;  // ShortFirstRank
  };
  // A job's place among its queue's jobs of equal priority (lower first):
  // -1 once it has waited past policy.short_first_max_wait_ms, else its
  // predicted GPU time (declared max runtime, else prediction, times its
  // GPUs), INT64_MAX with neither; 0 for every job with short-first off
  // (and, set by OpenLeaves, in a queue where no waiting job has a
  // prediction).
  std::int64_t ShortFirstRank(const PendingJob& job) const;
  struct Leaf {
    std::vector<Queued> jobs;
    std::size_t next = 0;
    std::int64_t waiting = 0;  // jobs ahead still waiting
    std::int64_t waiting_gpus = 0;
  };
  // The leaves with waiting jobs, each sorted; a job of an unknown queue is
  // explained at once.
  std::vector<std::pair<std::size_t, Leaf>> OpenLeaves();
  // Decides the leaf's next job; when it waits for capacity, explains the
  // jobs behind it (ExplainBehind) and offers them to backfill.
  void DecideHead(std::size_t leaf, Leaf& l);
  // `told`: the start the head was told (not before which they start);
  // `eta`: the one its reservation, if `reserved`, holds GPUs from.
  void ExplainBehind(std::size_t leaf, Leaf& l, const JobCtx& head, const Eta& told, const Eta& eta,
                     bool reserved);
  // A job that stays pending, with its place in its queue's line.
  void Finish(Leaf& l, const JobCtx& c, model::Reason why);
  void SortPendingById();
  // Carries each waiting job's PendingJob::reclaim_since_ms into its reason.
  void KeepReclaimSince();

  JobCtx Resolve(const PendingJob& job) const;
  // Inference headroom (policy pools[].inference_headroom). A job neither
  // preemptible nor an inference replica may not bring a pool's taken GPUs
  // past (usable GPUs - headroom): the nodes of a pool without room for its
  // whole gang are marked in shape.headroom_full (kept in headroom_masks_).
  // The mask is taken on the state when the job is resolved, so evictions
  // made for it do not widen it (conservative).
  void HeadroomMask(JobCtx& c) const;
  // Places an inference replica by evicting preemptible jobs that are not
  // inference replicas from the nodes of pools whose headroom such jobs
  // hold (MarkOccupiedHeadroom), at once, whatever their priority, quota or
  // the reclaim grace.
  bool PlaceByHeadroom(const JobCtx& ctx);
  // occupied_headroom_: the nodes of each pool whose jobs that are not
  // inference replicas hold more than (usable GPUs - headroom).
  void MarkOccupiedHeadroom();
  bool RunningInference(std::size_t i) const;
  // The first pool with headroom that holds one of running job i's nodes.
  std::string HeadroomPoolOf(std::size_t i) const;
  std::vector<const model::Pool*> headroom_pools_;  // pools with headroom > 0
  std::vector<char> in_headroom_pool_;              // [node] 1: in a pool with headroom
  mutable std::deque<std::vector<char>> headroom_masks_;
  std::vector<char> occupied_headroom_;  // [node], see MarkOccupiedHeadroom
  bool headroom_reclaim_ = false;        // PlaceByHeadroom is choosing victims
  Outcome Decide(const JobCtx& ctx, model::Reason& why);
  // Quota on the request, a placement on GPUs the job may use (not those
  // reserved for others unless it ends first), quota on the placement;
  // commits and returns true, else changes nothing and says why.
  bool PlaceNow(const JobCtx& ctx, std::optional<QuotaRefusal>& refusal,
                std::uint32_t& placed_before);
  void Commit(const JobCtx& ctx, std::vector<ReplicaPlacement> replicas, const Usage& delta,
              const std::vector<std::size_t>& victims, EvictionCause cause);

  // evict.cc: the reclaim a job found during its reclaim grace, rolled back
  // (the victims it would take now and where the job would run).
  struct GraceWait {
    bool waiting = false;
    TimeMs since = 0;  // first needed the reclaim
    TimeMs at = 0;     // the grace ends: the guarantee wins
    std::vector<std::size_t> victims;
    std::vector<ReplicaPlacement> replicas;
  };
  // evict.cc: places `ctx` by evicting running jobs chosen by `cause`. With
  // `saved_since` > 0, only jobs that checkpoint and have checkpointed at or
  // after it are candidates (and the cause's relief is left as it was). With
  // `trial`, a placement found is rolled back and described there.
  bool PlaceWithVictims(const JobCtx& ctx, EvictionCause cause, TimeMs saved_since = 0,
                        GraceWait* trial = nullptr);
  // Reclaim under the policy's reclaim_grace: after the grace as
  // PlaceWithVictims; during it, only borrowers that checkpointed since the
  // job began waiting, and otherwise the reclaim that would place it is kept
  // in grace_ and nothing is evicted.
  bool PlaceByReclaim(const JobCtx& ctx);
  GraceWait grace_;  // of the job Decide() is deciding
  // Says in `r` when the reclaim grace ends and what the reclaim would cost now.
  void AddGrace(model::Reason& r) const;
  // What eviction could do for the job being decided, per cause: how many
  // running jobs it could evict, and how many more it could once they have
  // run for the policy's min_runtime (and when the first of those will have).
  struct Relief {
    bool tried = false;
    std::int64_t candidates = 0;
    std::int64_t too_young = 0;
    TimeMs first_old_enough_ms = 0;
  };
  std::vector<std::size_t> Candidates(const JobCtx& ctx, EvictionCause cause,
                                      Relief* relief = nullptr, TimeMs saved_since = 0) const;
  // Says in `r` whether reclaim or preemption could help a waiting job.
  void AddRelief(bool may_reclaim, model::Reason& r) const;
  bool Attempt(const JobCtx& ctx, const std::vector<std::size_t>& victims,
               std::vector<ReplicaPlacement>& out, Usage& delta);
  std::int64_t WorkLostMs(const RunningJob& r) const;
  // WorkLostMs times the job's GPUs (milli-GPU-ms): what evicting it wastes.
  std::int64_t LostMgpuMs(std::size_t i) const;

  // consolidate.cc: places `ctx` by moving running jobs that checkpoint.
  bool PlaceByMoving(const JobCtx& ctx);
  // A node the job may use where moving jobs off would give one replica room.
  struct Room {
    std::uint32_t short_by = 0;
    std::size_t node = 0;
    std::vector<std::size_t> jobs;  // movable here, least disruptive first
  };
  // The rooms for one of `ctx`'s replicas, fewest GPUs short first (at most
  // kMaxRooms); counts the movable jobs in move_relief_.
  std::vector<Room> FindRooms(const JobCtx& ctx);
  struct Move {
    std::size_t running = 0;  // index in s_.running
    std::vector<ReplicaPlacement> replicas;
  };
  void CommitMoves(const JobCtx& ctx, std::vector<ReplicaPlacement> replicas,
                   std::vector<Move> moves);
  // Indexes the running jobs consolidation may move, per node (once).
  void FindMovable();
  // Whether running job `i` may move for `ctx` now (not evicted, not of a
  // higher priority, past the policy's min_runtime).
  bool MayMove(const JobCtx& ctx, std::size_t i) const;
  // A running job as a job to place again, resolved against the policy.
  const JobCtx& MoverCtx(std::size_t i);

  // backfill.cc
  static constexpr TimeMs kNever = INT64_MAX;
  // When the job would end if started now: now + max runtime, or kNever.
  TimeMs EndOf(const PendingJob& job) const;
  // As EndOf, or now + its predicted run time when it declares none (for
  // estimated starts only).
  TimeMs ExpectedEndOf(const PendingJob& job) const;
  // Marks taken (logged) the free GPUs reserved for other jobs that a job
  // ending at `end` may not use; UnhideReserved frees them again once a
  // placement has taken its GPUs. A rollback past the mark undoes both.
  void HideReserved(TimeMs end);
  void UnhideReserved();
  // ExplainNoFit as the job sees the cluster: without the free GPUs reserved
  // for others that it may not use (counted in kReservedFreeGpus).
  model::Reason ExplainWaiting(const JobCtx& ctx, std::uint32_t placed_before_failure);
  // The estimated start of a waiting job (cached by shape and state).
  Eta Estimate(const JobCtx& ctx);
  Eta Replay(const JobCtx& ctx);
  void FindBlockers(const JobCtx& ctx, Eta& eta);
  const std::vector<char>& UsableNodes(const JobCtx& ctx);
  // Holds the GPUs of `eta` for the job from its start to its end.
  void Reserve(const JobCtx& ctx, const Eta& eta);
  void AddEta(const Eta& eta, bool reserved, model::Reason& why) const;
  // The job's own predicted run time and its basis, when it declares no max
  // runtime and has one.
  static void AddPrediction(const PendingJob& job, model::Reason& why);
  // A job with an image that no node fits, and nodes without a container
  // runtime: its image in the reason's detail ("image=NAME"), unless a hint
  // holds the detail. Per job, after the shape's cached explanation.
  static void AddImage(const PendingJob& job, model::Reason& why);
  // Jobs behind reserved heads that end before their head starts, and jobs
  // behind any waiting head that run ahead of it (ahead.cc).
  void Backfill();
  // Where a job's GPUs are: (node, position in its gpus) per GPU.
  using GpuKey = std::pair<std::size_t, std::size_t>;
  std::vector<GpuKey> KeysOf(const std::vector<ReplicaPlacement>& replicas) const;
  // Releases GPUs (and the job's CPU and memory) in a replay, except GPUs
  // still held for a reservation at time `t`.
  void ReplayRelease(const model::Resources& res, const std::vector<ReplicaPlacement>& replicas,
                     TimeMs t);
  // Brings timeline_ up to date with the jobs placed so far.
  void ExtendTimeline();

  // ahead.cc: running ahead of a blocked head on what it could never use.
  // What a waiting head could never use, found once per head shape: nodes
  // it could never take a replica on, and nodes it could that also hold
  // GPUs it never could (another model, too little memory, whole cards for
  // a head that asks for a slice).
  struct HeadCapacity {
    bool any = false;               // some ready node or GPU the head could never use
    std::vector<char> strict;       // [node] 1: the head could never use the node
    std::vector<char> shared;       // [node] 1: strict, or a node with GPUs of both kinds
    std::vector<std::size_t> both;  // nodes with GPUs of both kinds, ascending
  };
  const HeadCapacity& CapacityOf(const JobCtx& head);
  // Places `ctx` now on capacity `head` could never use: its quota admits
  // it and still admits the head as before; commits and returns true, else
  // changes nothing.
  bool PlaceAhead(const JobCtx& ctx, const JobCtx& head, const HeadCapacity& cap);
  // What the job asks of its queue's quota before placement (GPUs of any
  // model, CPU, RAM, for every replica).
  static Usage RequestOf(const JobCtx& ctx);

  // explain.cc
  model::Reason ExplainNoFit(const JobCtx& ctx, std::uint32_t placed_before_failure);
  model::Reason ComputeNoFit(const JobCtx& ctx, std::uint32_t placed_before_failure);
  static model::Reason ExplainQuota(const QuotaRefusal& refusal);
  // `same` reuses numbers already computed for the same queue and state.
  void AddQueueNumbers(const JobCtx& ctx, model::Reason& r,
                       const QuotaRefusal* same = nullptr) const;
  void AddHints(const JobCtx& ctx, model::Reason& r);
  // What ExplainNoFit's answer depends on besides the cluster state.
  static std::string ExplainKey(const JobCtx& ctx, std::uint32_t placed_before_failure);

  const Snapshot& s_;
  Cluster cluster_;
  QuotaBook book_;
  std::vector<std::optional<std::size_t>> running_queue_;  // leaf of each running job
  std::vector<bool> evicted_;
  // What each running job counts against quota, computed when eviction or
  // consolidation first needs it: most cycles evict nothing, and building a
  // map per running job every cycle was most of a cycle at 10,000 jobs.
  std::vector<std::optional<Usage>> running_usage_;
  const Usage& RunningUsage(std::size_t i);
  std::vector<std::int32_t> running_priority_;  // PriorityValue of each running job
  std::vector<bool> running_preemptible_;       // EffectivePreemptible of each
  std::map<std::size_t, std::vector<std::size_t>> running_by_leaf_;  // for preemption
  Plan plan_;
  Relief relief_[2];    // by EvictionCause, for the job Decide() is deciding
  Relief move_relief_;  // consolidation, for the same job

  // Consolidation: running jobs that may be moved, by node, built on first use.
  bool movable_built_ = false;
  std::int64_t move_tries_ = 0;  // waiting jobs consolidation tried to place
  std::vector<std::vector<std::size_t>> movable_on_;
  std::vector<std::size_t> movable_nodes_;  // nodes with any, ascending
  std::deque<PendingJob> mover_jobs_;       // what movers_' contexts point at
  std::map<std::size_t, JobCtx> movers_;
  // ExplainNoFit answers by ExplainKey, with the Cluster::StateId they hold
  // for: every queue's waiting head is explained against every node, and
  // once the cluster is full most heads share a shape and a state.
  std::map<std::string, std::pair<std::uint64_t, model::Reason>, std::less<>> explained_;

  // Backfill. A reserved GPU is held from its job's start (`from`) to its
  // end (`until`, kNever without a max runtime); with several reservations
  // on one GPU, the earliest start and the latest end.
  struct Hold {
    TimeMs from = 0;
    TimeMs until = 0;
    std::int64_t unlimited_job = 0;  // a reserved job with no max runtime, if any
  };
  std::map<GpuKey, Hold> holds_;
  // Estimates only: the GPUs each head decided earlier in this cycle is
  // expected to take at its predicted start, until its predicted end (no
  // reservation: nothing is held for a prediction). A later head's estimate
  // replays them as taken, as the scheduler will then serve the heads in
  // about the order it decides them now; placement and backfill ignore it.
  std::map<GpuKey, TimeMs> expected_;
  std::size_t expected_heads_ = 0;  // heads added to expected_ (the estimates' cache key)
  // In one replay: expected GPUs whose running job's end has passed (freed
  // at the expecting head's end instead).
  std::vector<GpuKey> deferred_;
  void Expect(const JobCtx& ctx, const Eta& eta);
  std::vector<TimeMs> hold_starts_;  // distinct Hold::from, ascending
  std::vector<GpuKey> hidden_;       // what HideReserved took
  // Reserved GPUs holding slices that HideReserved filled, with their share.
  std::vector<std::pair<GpuKey, std::uint32_t>> hidden_shared_;
  // Jobs placed in this cycle: they count as started now.
  struct Started {
    TimeMs end = 0;             // ExpectedEndOf: declared, or predicted
    bool predicted = false;     // `end` is a prediction
    std::size_t placement = 0;  // in plan_.placements
    model::Resources resources;
    std::int64_t job = 0;
    std::vector<std::size_t> nodes;  // node indices of its replicas
  };
  std::vector<Started> started_;
  // Known releases in time order (kind 0: running job `index`, 1: started_
  // `index`), kept sorted across replays and extended as jobs are placed.
  struct TimedRelease {
    TimeMs t = 0;
    int kind = 0;
    std::size_t index = 0;
    auto operator<=>(const TimedRelease&) const = default;
  };
  std::vector<TimedRelease> timeline_, fresh_, merged_;
  bool timeline_built_ = false;
  std::size_t timed_started_ = 0;  // started_ entries in timeline_
  RunningJob scratch_;             // ReplayRelease's buffer
  // [running job] node indices of its replicas (each once, in replica
  // order); found when first needed for jobs without GPUs.
  mutable std::vector<std::optional<std::vector<std::size_t>>> running_nodes_;
  const std::vector<std::size_t>& RunningNodes(std::size_t i) const;
  // Node index by name (Cluster::Find).
  std::optional<std::size_t> NodeIndex(std::string_view name) const;
  // [node] ids of jobs without a max runtime holding GPUs there (ETA blockers).
  IdsByNode unlimited_on_;
  std::map<std::string, std::pair<std::uint64_t, Eta>, std::less<>> estimated_;
  std::map<std::string, std::vector<char>, std::less<>> usable_;
  // Jobs behind a reserved head that may backfill, tried after every head.
  // A candidate either backfills (it ends by its reserved head's start) or
  // may run ahead of its head on what the head could never use.
  struct Candidate {
    const PendingJob* job = nullptr;
    std::size_t pending = 0;    // its BehindInQueue decision in plan_.pending
    std::size_t block_end = 0;  // end of its queue's BehindInQueue decisions
    bool backfill = false;
    std::size_t head = 0;  // in heads_, when !backfill
  };
  std::vector<Candidate> candidates_;
  // Heads waiting for capacity with something they could never use, and
  // what that is (by ExplainKey of the head).
  std::deque<JobCtx> heads_;
  std::vector<const HeadCapacity*> head_capacity_of_;  // [heads_ index]
  std::map<std::string, HeadCapacity, std::less<>> head_capacity_;
  std::vector<bool> dropped_;  // [plan_.pending index]: replaced by a placement
};

}  // namespace berth::sched
