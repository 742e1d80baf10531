// What the cycles over one stream of snapshots learned about their running
// jobs, kept between cycles by a caller that hands the scheduler the same
// running jobs cycle after cycle (berth-sim). Each cycle otherwise finds
// every running job's node by name and every GPU it holds, to count what
// the job uses against quota: at 10,000 nodes and 20,000 running jobs, a
// walk through scattered memory that was half of a cycle. With a memo, a
// job whose run and cluster layout are unchanged since the last cycle adds
// a few remembered integers instead.
//
// Plans never depend on it: a remembered entry is used only for the same
// job and run key on a cluster of the same layout (compared in full), and
// gives the same sums as resolving the job again.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "sched/placement.h"
#include "sched/quota.h"

namespace berth::sched {

class RunningMemo {
 public:
  RunningMemo() = default;
  RunningMemo(const RunningMemo&) = delete;
  RunningMemo& operator=(const RunningMemo&) = delete;

  // Running jobs taken from the memo, and resolved anew, by the cycles so far.
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

 private:
  friend class Cycle;

  static constexpr std::uint32_t kNoNode = UINT32_MAX;
  struct Entry {
    std::int64_t id = 0;
    std::uint64_t run_key = 0;
    std::uint32_t node = kNoNode;  // its one replica's node; kNoNode: not found
    bool has_gpus = false;
    UsageFootprint usage;
  };

  // A cycle uses the memo only when no other holds it (two threads
  // scheduling one snapshot stream each resolve on their own).
  std::mutex mu_;
  bool saved_ = false;
  ClusterLayout layout_;        // the cluster the entries were resolved on
  std::vector<Entry> entries_;  // ascending id
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace berth::sched
