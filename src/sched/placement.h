// Placement: the scheduler's working copy of the cluster, the filters that
// say whether a node could ever take a replica (static) or can now
// (dynamic), the packing score, and a statement log so that any sequence of
// allocations and releases can be rolled back (KAI's Statement): gangs and
// evictions commit all together or not at all.
#pragma once

#include <bit>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/policy.h"
#include "sched/plan.h"
#include "sched/snapshot.h"

namespace berth::sched {

// StaticCause for a node outside JobShape::only_nodes. Internal to the
// cycle: no reason ever carries it (such shapes are only tried, never
// explained).
inline constexpr std::string_view kCauseHeadCapacity = "head_could_use";

// What placement needs to know about a job: its shape and its constraints.
struct JobShape {
  std::uint32_t replicas = 1;
  model::Resources resources;  // per replica
  std::map<std::string, std::string> node_selector;
  std::vector<model::Toleration> tolerations;
  // A node must match one of these pools' selectors; empty: any node.
  std::vector<const model::Pool*> pools;
  bool pool_forbidden = false;  // the job names a pool its queue may not use
  model::Topology topology;
  // It has an image: only nodes with a container runtime may take it.
  bool needs_container = false;
  // When set ([node] 0 or 1): only nodes marked 1 may take a replica. A job
  // running ahead of its queue's blocked head is confined this way to the
  // nodes where it cannot take what the head could use (Cycle::PlaceAhead).
  const std::vector<char>* only_nodes = nullptr;
  // When set ([node] 0 or 1): nodes marked 1 are in a pool whose inference
  // headroom the job may not take now (Cycle::HeadroomMask): it is neither
  // preemptible nor an inference replica. Unlike only_nodes this is no
  // "never": such a job waits, and the cause is explained.
  const std::vector<char>* headroom_full = nullptr;
};

// A set of node indices iterated in ascending order, as bits. Cluster keeps
// its nodes by free-GPU count in these: a std::set per count cost a node
// allocation per node every cycle (10,000 at 10,000 nodes) to build and as
// many to free, for what inserts, erases and walks in index order.
class NodeSet {
 public:
  explicit NodeSet(std::size_t nodes = 0) : words_((nodes + 63) / 64, 0) {}
  void insert(std::size_t n) {
    std::uint64_t& w = words_[n / 64];
    const std::uint64_t bit = std::uint64_t{1} << (n % 64);
    if ((w & bit) == 0) ++size_;
    w |= bit;
  }
  void erase(std::size_t n) {
    std::uint64_t& w = words_[n / 64];
    const std::uint64_t bit = std::uint64_t{1} << (n % 64);
    if ((w & bit) != 0) --size_;
    w &= ~bit;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Calls fn(n) for the nodes in both this set and `other` (of the same
  // size), in ascending index, until fn returns false; false if it did.
  template <typename Fn>
  bool ForEachAlsoIn(const NodeSet& other, Fn&& fn) const {
    for (std::size_t w = 0; w < words_.size(); ++w) {
      for (std::uint64_t bits = words_[w] & other.words_[w]; bits != 0; bits &= bits - 1) {
        if (!fn(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)))) return false;
      }
    }
    return true;
  }

  class iterator {
   public:
    iterator(const std::vector<std::uint64_t>* words, std::size_t word, std::uint64_t rest)
        : words_(words), word_(word), rest_(rest) {
      Settle();
    }
    std::size_t operator*() const {
      return word_ * 64 + static_cast<std::size_t>(std::countr_zero(rest_));
    }
    iterator& operator++() {
      rest_ &= rest_ - 1;
      Settle();
      return *this;
    }
    bool operator==(const iterator& o) const { return word_ == o.word_ && rest_ == o.rest_; }

   private:
    // Moves to the next word with a bit left, or to the end.
    void Settle() {
      while (rest_ == 0 && word_ + 1 < words_->size()) rest_ = (*words_)[++word_];
      if (rest_ == 0) word_ = words_->size();
    }
    const std::vector<std::uint64_t>* words_;
    std::size_t word_;
    std::uint64_t rest_;
  };
  iterator begin() const {
    if (size_ == 0) return end();
    return iterator(&words_, 0, words_[0]);
  }
  iterator end() const { return iterator(&words_, words_.size(), 0); }

 private:
  std::vector<std::uint64_t> words_;
  std::size_t size_ = 0;
};

// What a Cluster resolves a running job's replicas against: node names and
// positions, and each GPU's index, memory and model. Two cycles with equal
// layouts find every node at the same position and count every GPU alike.
struct ClusterLayout {
  std::vector<std::string> names;
  std::vector<std::size_t> first_gpu;
  std::vector<std::uint32_t> gpu_index;
  std::vector<std::uint64_t> gpu_memory;
  std::vector<std::size_t> gpu_model;
  std::vector<std::string> models;
};

class Cluster {
 public:
  // Works on `nodes` where they are, which must outlive the Cluster (a
  // cycle's snapshot does): a node is copied only when the cycle first
  // changes it. Copying 10,000 nodes every cycle was the largest part of a
  // cycle at that size.
  explicit Cluster(const std::vector<NodeView>& nodes);
  // Keeps `nodes` (a temporary: tests).
  explicit Cluster(std::vector<NodeView>&& nodes);
  // The name index and base_ point into the nodes: a copy would point into
  // the original.
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // The nodes, sorted by name, as this cycle has changed them.
  std::size_t size() const { return base_->size(); }
  bool empty() const { return base_->empty(); }
  const NodeView& Node(std::size_t n) const {
    return own_[n] != 0 ? copies_[own_[n] - 1] : (*base_)[n];
  }
  std::optional<std::size_t> Find(std::string_view name) const;
  // The most healthy GPUs any ready node has: a replica asking for more can
  // never run, whatever frees up.
  std::uint32_t MaxHealthyGpus() const { return max_healthy_; }

  // Why node `n` could never take one replica (ignoring what is in use);
  // empty when it could.
  std::string_view StaticCause(std::size_t n, const JobShape& job) const;
  // Every static cause of node `n` (StaticCause names only the first), in
  // StaticCause's order, into `out`: the node could take a replica if each
  // of them were lifted, and a node with one cause opens when that one is.
  // For the explanation (sched/layers.h), never on the cycle's path.
  void StaticCauses(std::size_t n, const JobShape& job, std::vector<std::string_view>& out) const;
  // Why node `n` cannot take one replica now; empty when it can.
  std::string_view Cause(std::size_t n, const JobShape& job) const;
  // Cause for a node whose StaticCause is empty, given its FreeEligible
  // (so that a caller that needs both computes each once).
  std::string_view DynamicCause(std::size_t n, const JobShape& job,
                                std::uint32_t free_eligible) const;
  // The largest GPU memory of any card (0: no GPUs).
  std::uint64_t MaxGpuMemory() const { return max_gpu_memory_; }
  // The GPU models present, sorted.
  const std::vector<std::string>& Models() const { return models_; }
  // Free healthy whole GPUs on all nodes (of any model).
  std::uint64_t FreeGpus() const;
  // Calls fn(n, free) for the nodes with fewer than `below` free GPUs that
  // `r` may use, the most free first (ascending index among equals), until
  // fn returns false.
  void ForNodesBelow(const model::Resources& r, std::uint32_t below,
                     const std::function<bool(std::size_t, std::uint32_t)>& fn) const;
  // Free GPUs on node `n` that the job's replicas may use.
  std::uint32_t FreeEligible(std::size_t n, const JobShape& job) const;

  // The shapes asked for (Snapshot::demand). With slices among them (a
  // sharing workload), every replica is placed by FGD's score (Weng et al.,
  // ATC'23): over every node it fits, the node (and, for a slice, the GPU)
  // where taking it grows the node's expected fragmentation for the shapes
  // asked for the least (FgdDelta); the tighter fit among equals. Else, when
  // some name a GPU model and the cluster has several, a replica free to use
  // any model goes, among the tightest fit of each model, where it adds the
  // least fragmentation (FragmentationDelta), the tightest among equals.
  // Shapes naming a model no node has are left out.
  void SetDemand(const std::vector<DemandShape>& demand);
  // How much the free GPUs of node `n` that the shapes asked for cannot use
  // grow, weighted by how often each is asked for, if the GPUs at positions
  // `gpus` were taken. A shape cannot use a node's free GPU when the node
  // has too few free GPUs of a model it may use, or the GPU is of another
  // model. Negative: the placement leaves the shapes more room.
  std::int64_t FragmentationDelta(std::size_t n, const std::vector<std::size_t>& gpus) const;
  // FGD's fragmentation delta, in milli-GPUs times replicas asking times
  // each shape's scale (1024 for a shape free to use any model): how much
  // the free GPU capacity of node `n` that the shapes asked for cannot use
  // grows, summed over the shapes by how often each is asked for, if one
  // replica of `r` took the GPUs at positions `gpus` (whole, or one slice).
  // A shape can use a node's free capacity only where it fits: none when
  // the node lacks the CPU or memory it asks, else a whole-GPU shape the
  // node's wholly free GPUs of its model, when there are enough of them; a
  // slice the room of each sharing GPU of its model that has room for it.
  // The rest of the node's free capacity is lost to the shape.
  std::int64_t FgdDelta(std::size_t n, const std::vector<std::size_t>& gpus,
                        const model::Resources& r) const;
  // Whether placement scores by FgdDelta (the demand holds slices).
  bool Fgd() const { return fgd_; }
  // Up to this many nodes (by default kFgdExactNodes) FGD scores every
  // node a replica fits. Above it (one pass over 10,000 nodes per replica
  // placed cost seconds a cycle), a whole-GPU or CPU-only replica is scored
  // on the first node that fits of each free-GPU count, and a slice on the
  // kFgdSliceCandidates nodes where it fits tightest. 0: always bounded
  // (berth-sim --fgd-exact-nodes, to measure the bounded form).
  static constexpr std::size_t kFgdExactNodes = 2048;
  static constexpr std::size_t kFgdSliceCandidates = 8;
  void SetFgdExactNodes(std::size_t nodes) { fgd_exact_nodes_ = nodes; }
  std::size_t FgdExactNodes() const { return fgd_exact_nodes_; }
  // The largest share (milli-GPUs) a new slice could take on one of node
  // `n`'s GPUs now: a healthy sharing GPU free, or holding slices with room
  // left. 0: no slice fits the node. Kept with every change (and undo).
  std::uint32_t SliceRoom(std::size_t n) const { return slice_room_[n]; }

  // Places every replica or none. On success the allocation is applied (and
  // logged); on failure nothing changes and `placed_before_failure` says how
  // many replicas had room.
  std::optional<std::vector<ReplicaPlacement>> PlaceGang(const JobShape& job,
                                                         std::uint32_t* placed_before_failure);
  // Gives a running job's GPUs, CPU and memory back (logged).
  void Release(const RunningJob& job);
  // Marks the GPU at node `n`, position `i` in its `gpus`, free or not
  // (logged): backfill hides GPUs reserved for another job this way.
  void SetGpuFree(std::size_t n, std::size_t i, bool free);
  // Sets the share slices hold on a sharing GPU (logged): backfill fills a
  // reserved GPU that holds slices (1000) so that no other slice lands there.
  void SetGpuSharedMillis(std::size_t n, std::size_t i, std::uint32_t millis);

  // The statement: Mark() before a tentative change, Rollback(mark) to undo.
  std::size_t Mark() const { return log_.size(); }
  void Rollback(std::size_t mark);
  // Names the current free state: equal ids mean equal state, so answers
  // computed from the state can be cached under it. Rollback restores the
  // id of the state it returns to; any other change takes a fresh one.
  std::uint64_t StateId() const { return state_; }

  // The GPU at node `n`, node-local `index`; nullptr if none.
  const GpuView* Gpu(std::size_t n, std::uint32_t index) const;
  // Where that GPU is among all the cluster's GPUs (node after node), for
  // the per-GPU facts below; nullopt if none. Reads one dense list, not the
  // node: a cycle asks for every GPU of every running job (80,000 GPUs at
  // 10,000 nodes, scattered over the heap).
  std::optional<std::size_t> GpuSlot(std::size_t n, std::uint32_t index) const;
  // The model id (a position in Models()) and the memory of the GPU in
  // `slot`; neither changes within a cycle.
  std::size_t ModelIdAt(std::size_t slot) const { return model_of_[slot]; }
  std::uint64_t MemoryAt(std::size_t slot) const { return memory_of_[slot]; }
  // Whether `layout` is this cluster's (compared in full: a pass over the
  // node names and GPU lists, no hash that could collide).
  bool HasLayout(const ClusterLayout& layout) const;
  void SaveLayout(ClusterLayout& layout) const;

 private:
  struct Undo {
    std::size_t node = 0;
    std::int32_t gpu = -1;  // position in gpus; -1: a CPU/memory change
    bool was_free = false;
    std::int64_t cpu_delta = 0;  // what was added to cpu_millis_free
    std::int64_t mem_delta = 0;
    std::uint64_t state_before = 0;   // StateId() before this change
    std::uint32_t millis_before = 0;  // a GPU change: its slices before
    std::uint64_t bytes_before = 0;
  };
  // Appends `u` to the log and moves to a fresh state id.
  void Log(Undo u);
  // Logs GPU position `i` of node `n` before a change to it.
  void LogGpu(std::size_t n, std::size_t i);
  bool Eligible(const GpuView& g, const model::Resources& r) const;
  // A slice of `r` fits GPU `g` now: sharing, healthy, eligible, not held
  // whole, and its share and memory stay within the card.
  bool SliceFits(const GpuView& g, const model::Resources& r) const;
  // The GPU (position) on node `n` for one slice, best fit: a GPU already
  // holding slices with the least room left, else the first free sharing
  // GPU. `key` (lower is better) ranks the choice against other nodes'.
  std::optional<std::size_t> ChooseSlice(std::size_t n, const model::Resources& r,
                                         std::pair<std::uint64_t, std::uint64_t>* key) const;
  // The GPUs `gpus` of node `n` span NVLink islands although the job
  // prefers one (a worse fit, not a refusal).
  bool SplitsPreferredIsland(std::size_t n, const JobShape& job,
                             const std::vector<std::size_t>& gpus) const;
  std::optional<std::size_t> BestSliceNode(const JobShape& job,
                                           std::vector<std::size_t>& gpus) const;
  // Recomputes node `n`'s slice summary (slice_room_, partial_, pristine_)
  // from its GPUs: after every change to a GPU's free state or slices.
  void RefreshSliceRoom(std::size_t n);
  std::string_view StaticSliceCause(std::size_t n, const model::Resources& r) const;
  // StaticCause's GPU part, for the request `r` (the job's, or the job's
  // with a cause lifted: StaticCauses).
  std::string_view StaticDeviceCause(std::size_t n, const JobShape& job,
                                     const model::Resources& r) const;
  // Chooses GPUs for one replica on node `n`; empty optional if it cannot.
  std::optional<std::vector<std::size_t>> ChooseGpus(std::size_t n, const JobShape& job) const;
  ReplicaPlacement Take(std::size_t n, std::uint32_t replica, const JobShape& job,
                        const std::vector<std::size_t>& gpus);
  bool PlaceOneNode(const JobShape& job, std::vector<ReplicaPlacement>& out);
  // The best node for one replica (see PlaceGang); nullopt if none fits.
  std::optional<std::size_t> BestNode(const JobShape& job, std::vector<std::size_t>& gpus) const;

  // Marks GPU `i` of node `n` free or not, keeping the free counts in step.
  void SetFree(std::size_t n, std::size_t i, bool free);
  // The count class of a job's GPUs: 0 for any model, 1 + model id for one
  // model; nullopt when no node has the model, or a memory minimum applies.
  std::optional<std::size_t> ClassOf(const model::Resources& r) const;

  // Sorts owned_ (by name, GPUs by index) and works on it.
  void Sort();
  // Builds the indexes below from the nodes; false (and nothing built to
  // rely on) when they are not sorted by name, GPUs by index.
  bool Index();
  // Node `n`, copied on its first change (what Node(n) returns from then).
  NodeView& Mutable(std::size_t n);

  std::vector<NodeView> owned_;  // the nodes, when the Cluster keeps them
  // The nodes as given, sorted by name: the snapshot's, or owned_.
  const std::vector<NodeView>* base_ = nullptr;
  // [node] 0: unchanged, read from base_; else 1 + its copy's position in
  // copies_ (a deque: references to copies stay valid as more are made).
  std::vector<std::uint32_t> own_;
  std::deque<NodeView> copies_;
  // Node index by name (the first of equal names, as a binary search finds):
  // a search per placed replica and per running job's replica was a visible
  // part of the cycle at 10,000 nodes. Open addressing with linear probing
  // on the name's hash; a power-of-two size, never more than half full.
  // Each slot keeps the hash's high half, so that a probe past another name
  // rarely reads that node.
  struct Slot {
    std::uint32_t node = 0;  // 1 + the node's index; 0: empty
    std::uint32_t tag = 0;   // the name's hash >> 32
  };
  std::vector<Slot> index_;
  std::vector<std::string> models_;  // GPU models present, sorted
  // Model id of every GPU, node after node (one list, not one per node: a
  // cycle builds it for every node); node n's GPUs start at first_gpu_[n].
  std::vector<std::size_t> model_of_;
  std::vector<std::uint32_t> index_of_;   // each GPU's node-local index
  std::vector<std::uint64_t> memory_of_;  // each GPU's memory
  std::vector<std::size_t> first_gpu_;
  std::vector<std::uint32_t> healthy_;  // [node] healthy GPUs
  std::vector<bool> has_sharing_;       // [node] any GPU in sharing mode
  // The slice summary, so that a slice's placement looks only at nodes
  // where it may fit. [node] the most room (milli-GPUs) for a new slice on
  // one GPU (SliceRoom); the nodes with room on a GPU that holds slices
  // (partial_), and the other nodes with room, all of it on sharing GPUs
  // that hold none (pristine_).
  std::vector<std::uint32_t> slice_room_;
  NodeSet partial_;
  NodeSet pristine_;
  // Every sharing GPU has this memory (0: none, or they differ): a slice
  // then takes a pristine GPU on any node with the same memory left, so the
  // tightest pristine node is the first in free-GPU order (BestSliceNode).
  std::uint64_t sharing_memory_ = 0;
  std::size_t fgd_exact_nodes_ = kFgdExactNodes;
  std::uint32_t max_healthy_ = 0;  // over ready nodes
  std::uint64_t max_gpu_memory_ = 0;
  // [class][node]: GPUs both free and healthy, for class 0 (any model) and
  // 1 + each model: FreeEligible without a scan.
  std::vector<std::vector<std::uint32_t>> free_;
  // [class][free count]: nodes in ascending index, the packing order.
  std::vector<std::vector<NodeSet>> by_free_;
  // SetDemand's shapes with their count class (0 any model, 1 + model id).
  // One per GPU shape; the CPU and memory its replicas ask, by weight.
  struct DemandHost {
    std::uint64_t cpu_millis = 0;
    std::uint64_t memory_bytes = 0;
    std::int64_t weight = 0;
  };
  struct Demand {
    std::uint32_t gpus = 0;
    std::size_t cls = 0;
    std::int64_t weight = 0;         // all its replicas
    std::uint32_t share_millis = 0;  // a slice: its share (or, by bytes, below)
    std::uint64_t share_bytes = 0;
    std::vector<DemandHost> hosts;
    // FGD's term for the shape is scaled by how scarce the GPUs it may use
    // are: 1024 times the cluster's GPUs over its class's GPUs.
    std::int64_t scale = 1024;
    // What one replica takes of the GPUs, milli-GPUs: 1000 per whole GPU,
    // or the slice's share.
    std::int64_t replica_millis = 1000;
  };
  // The terms of FgdDelta that depend on the node and the replica's CPU and
  // memory, not on the GPUs it takes: per demand shape, the weight of its
  // replicas whose CPU and memory the node has before and after, and the
  // free capacity it can use before.
  struct FgdBase {
    std::int64_t total = 0;  // the node's free GPU capacity, milli-GPUs
    std::uint64_t cpu_after = 0, memory_after = 0;
    std::vector<std::int64_t> usable, kept_before;
  };
  // Sum over shape `d`'s replicas (by weight) of the free GPU capacity
  // `usable` that a node with `cpu` and `memory` free lets each use: no more
  // than the replicas its CPU and memory can still hold would take.
  std::int64_t FgdKept(const Demand& d, std::int64_t usable, std::uint64_t cpu,
                       std::uint64_t memory) const;
  void FgdPrepare(std::size_t n, const model::Resources& r, FgdBase& base) const;
  std::int64_t FgdScore(std::size_t n, const std::vector<std::size_t>& gpus,
                        const model::Resources& r, const FgdBase& base) const;
  std::vector<Demand> demand_;
  bool model_aware_ = false;  // a shape names a model, and there are several
  bool fgd_ = false;          // a shape is a slice: FGD's score for every replica
  // The free capacity of GPU `i` of node `n` for new work, in milli-GPUs:
  // 1000 when free, what its slices leave on a sharing GPU, else 0.
  std::int64_t RoomOf(const GpuView& g) const;
  // FGD's choice for a replica of whole GPUs (or none: CPU only) of count
  // class `c`: every node with enough free GPUs scored by FgdDelta.
  std::optional<std::size_t> FgdNode(const JobShape& job, std::size_t c,
                                     std::vector<std::size_t>& gpus) const;
  std::vector<Undo> log_;
  std::uint64_t state_ = 0;
  std::uint64_t next_state_ = 0;
};

}  // namespace berth::sched
