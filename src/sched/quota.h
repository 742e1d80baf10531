// Quota: what each queue uses (its own jobs and its descendants'), what it
// is guaranteed and may borrow, the admission check a placement must pass,
// and the fair-share key that orders queues (weighted dominant-resource
// fairness over borrowed capacity, plus decayed historical usage).
// Integer arithmetic only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/policy.h"
#include "sched/placement.h"

namespace berth::sched {

// Amounts per resource key in the policy's units (milli-GPUs, bytes, millicores).
using Usage = std::map<model::ResourceKey, std::int64_t>;

// What a placed (or running) job counts against quota: GPUs overall and per
// model, their memory, CPU and RAM.
Usage UsageOf(const Cluster& cluster, const model::Resources& per_replica,
              const std::vector<ReplicaPlacement>& replicas);
// UsageOf summed over many jobs without a map update per job: the same keys
// and the same sums as adding each job's UsageOf. The cycle sums every
// running job of a queue this way (30,000 jobs a cycle at 10,000 nodes).
// What one job adds to a UsageSum, kept in a few integers: jobs whose GPUs
// count under at most one model of the cluster (Footprint says which).
struct UsageFootprint {
  std::int64_t mgpu = 0;
  std::int64_t gpu_bytes = 0;
  std::int64_t cpu = 0;
  std::int64_t memory = 0;
  std::int64_t model_mgpu = 0;  // counted under `model`
  std::int32_t model = -1;      // the cluster's model id; -1: none
  bool any_gpu = false;
  bool any_replica = false;
};

class UsageSum {
 public:
  // Adds a job whose replicas[k] is on node nodes[k] (nullopt: none of that
  // name). Only replicas with GPUs are looked up, so theirs are the only
  // entries that must be right.
  void Add(const Cluster& cluster, const model::Resources& per_replica,
           const std::vector<ReplicaPlacement>& replicas,
           const std::vector<std::optional<std::size_t>>& nodes);
  // Adds a footprint taken from `cluster` (or one with the same layout).
  void Add(const Cluster& cluster, const UsageFootprint& f);
  // This sum as a footprint; nullopt when it counts GPUs under more than one
  // model, or under a model named only by a job (its GPU not found).
  std::optional<UsageFootprint> Footprint() const;
  // Adds the sums into `into`.
  void Into(std::map<model::ResourceKey, std::int64_t>& into) const;

 private:
  bool any_gpu_ = false;
  bool any_replica_ = false;
  std::int64_t mgpu_ = 0;
  std::int64_t gpu_bytes_ = 0;
  std::int64_t cpu_ = 0;
  std::int64_t memory_ = 0;
  const Cluster* cluster_ = nullptr;  // whose model ids by_model_ counts
  // Per GPU model: by the cluster's model id for GPUs found on their node,
  // by name (never empty; a handful at most) for the model a job asked for
  // when its GPU is not found.
  std::vector<std::optional<std::int64_t>> by_model_;
  std::vector<std::pair<std::string, std::int64_t>> named_;
};
inline const model::ResourceKey kGpusKey{model::ResourceKind::kGpus, ""};

// Why a placement was refused by quota, with the numbers for the reason.
struct QuotaRefusal {
  bool not_preemptible = false;  // else: over the borrow limit or borrowing not allowed
  std::string queue;             // the queue whose quota refused
  model::ResourceKey key;
  std::int64_t requested = 0;
  std::int64_t used = 0;
  std::int64_t guaranteed = 0;
  std::optional<std::int64_t> borrow_limit;
  std::int64_t borrowable_now = 0;
};

class QuotaBook {
 public:
  // Counts every running job (in a queue the policy knows) as used.
  QuotaBook(const model::Policy& policy, const Cluster& cluster,
            const std::vector<RunningJob>& running,
            const std::map<std::string, std::int64_t>& decayed_usage);
  // Counts no running job yet: the caller adds them with AddRunning, which
  // may sum the usage of many jobs of one queue first (the same book: the
  // counts are sums).
  QuotaBook(const model::Policy& policy, const Cluster& cluster,
            const std::map<std::string, std::int64_t>& decayed_usage);
  // What running jobs of queue `leaf` (nullopt: a queue the policy does not
  // know) hold: counted as used, and their CPU and RAM as capacity (the
  // snapshot's free CPU and RAM exclude them).
  void AddRunning(std::optional<std::size_t> leaf, const Usage& usage);

  // Index of a queue by path; nullopt if the policy has none.
  std::optional<std::size_t> Find(std::string_view path) const;
  const model::QueuePolicy& queue(std::size_t q) const { return *queues_[q].policy; }
  std::size_t size() const { return queues_.size(); }
  // The queue and its ancestors, leaf first.
  std::vector<std::size_t> Chain(std::size_t q) const;
  // Pools a queue may use: its own, else its nearest ancestor's; empty: all.
  const std::vector<std::string>& Pools(std::size_t q) const;
  // The path of the queue whose `pools` Pools(q) returns: q's own or its
  // nearest ancestor's that lists some ("" when none does).
  std::string PoolsOwner(std::size_t q) const;

  void Add(std::size_t leaf, const Usage& delta);
  void Remove(std::size_t leaf, const Usage& delta);
  std::int64_t Used(std::size_t q, const model::ResourceKey& key) const;
  std::int64_t Guaranteed(std::size_t q, const model::ResourceKey& key) const;

  // Admission of `delta` into `leaf`: within guarantee at every level always
  // passes; above it the job must be preemptible, the queue must borrow, stay
  // within borrow_limit, and leave other tenants' unlent guarantee free.
  std::optional<QuotaRefusal> Check(std::size_t leaf, const Usage& delta, bool preemptible) const;
  // True when `gpus_mgpu` more GPUs keep the leaf and every ancestor that
  // declares a GPU quota within guarantee (and at least one declares it).
  bool WithinGuarantee(std::size_t leaf, std::int64_t gpus_mgpu) const;
  // True when queue `q` uses more GPUs than it is guaranteed.
  bool Borrowing(std::size_t q) const;
  // The first queue from `leaf` up that declares a GPU quota and uses more
  // than it guarantees (queue, used, guaranteed filled in); nullopt when
  // every declared guarantee covers what is used.
  std::optional<QuotaRefusal> OverGuarantee(std::size_t leaf) const;
  // The numbers a pending job's reason shows for its leaf queue.
  QuotaRefusal Numbers(std::size_t leaf, std::int64_t requested_mgpu) const;

  // Ordering key among siblings: lower goes first. Queues below their GPU
  // guarantee come before those at or above it; then the weighted dominant
  // share of borrowed capacity plus decayed usage, in parts per million.
  // Cached until the queue's usage changes.
  std::pair<int, std::int64_t> FairKey(std::size_t q) const;
  // Queues whose usage changed since the last call (with repeats).
  std::vector<std::size_t> TakeChanged();

 private:
  struct Entry {
    const model::QueuePolicy* policy = nullptr;
    std::optional<std::size_t> parent;
    Usage used;
    std::int64_t decayed = 0;  // milli-GPU-seconds, own and descendants'
  };
  std::int64_t Capacity(const model::ResourceKey& key) const;
  std::int64_t TotalUsed(const model::ResourceKey& key) const;
  std::int64_t UnlentElsewhere(std::size_t leaf, const model::ResourceKey& key) const;
  std::int64_t Headroom(std::size_t leaf, const model::ResourceKey& key) const;
  // Idle capacity of `key` the leaf could borrow now: capacity less what is
  // used and what other tenants keep from lending; never negative.
  std::int64_t FreeToBorrow(std::size_t leaf, const model::ResourceKey& key) const;

  std::vector<Entry> queues_;
  std::map<std::string, std::size_t, std::less<>> index_;
  Usage capacity_;  // healthy GPUs of ready nodes (and their memory), CPU, RAM
  Usage total_used_;
  std::int64_t half_life_s_ = 3600;
  mutable std::vector<std::optional<std::pair<int, std::int64_t>>> fair_cache_;
  // Top-level queues with a lending_limit, per resource (usually none).
  std::map<model::ResourceKey, std::vector<std::size_t>> lenders_;
  std::vector<std::size_t> changed_;
};

}  // namespace berth::sched
