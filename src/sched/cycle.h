// One scheduling cycle of CoreScheduler (internal). The cycle owns the
// working cluster and quota book; its parts live in one file each:
// core_scheduler.cc (order and admission), evict.cc (reclaim and
// preemption), explain.cc (reasons for jobs left waiting).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sched/placement.h"
#include "sched/plan.h"
#include "sched/quota.h"
#include "sched/snapshot.h"

namespace berth::sched {

// A pending job resolved against the policy.
struct JobCtx {
  const PendingJob* job = nullptr;
  std::string path;  // "tenant/queue"
  std::optional<std::size_t> leaf;
  std::int32_t priority = 0;
  bool preemptible = true;
  JobShape shape;
  std::int64_t requested_mgpu = 0;  // whole gang
};

// The priority value and effective preemptibility of a job.
std::int32_t PriorityValue(const model::Policy& policy, model::Priority p);
bool EffectivePreemptible(const model::Policy& policy, const model::QueuePolicy* queue,
                          model::Priority p, const std::optional<bool>& requested);

class Cycle {
 public:
  explicit Cycle(const Snapshot& s);
  Plan Run();

 private:
  enum class Outcome { kPlaced, kWaiting, kRefused };

  JobCtx Resolve(const PendingJob& job) const;
  Outcome Decide(const JobCtx& ctx, model::Reason& why);
  void Commit(const JobCtx& ctx, std::vector<ReplicaPlacement> replicas, const Usage& delta,
              const std::vector<std::size_t>& victims, EvictionCause cause);

  // evict.cc: places `ctx` by evicting running jobs chosen by `cause`.
  bool PlaceWithVictims(const JobCtx& ctx, EvictionCause cause);
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
                                      Relief* relief = nullptr) const;
  // Says in `r` whether reclaim or preemption could help a waiting job.
  void AddRelief(bool may_reclaim, model::Reason& r) const;
  bool Attempt(const JobCtx& ctx, const std::vector<std::size_t>& victims,
               std::vector<ReplicaPlacement>& out, Usage& delta);
  std::int64_t WorkLostMs(const RunningJob& r) const;

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
  std::vector<Usage> running_usage_;
  std::map<std::size_t, std::vector<std::size_t>> running_by_leaf_;  // for preemption
  Plan plan_;
  Relief relief_[2];  // by EvictionCause, for the job Decide() is deciding
  // ExplainNoFit answers by ExplainKey, with the Cluster::StateId they hold
  // for: every queue's waiting head is explained against every node, and
  // once the cluster is full most heads share a shape and a state.
  std::map<std::string, std::pair<std::uint64_t, model::Reason>, std::less<>> explained_;
};

}  // namespace berth::sched
