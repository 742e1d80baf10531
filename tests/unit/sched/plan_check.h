// Invariants every plan must keep, whatever the rules: used by the scenario
// and property tests. Returns an empty string when the plan is sound.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "sched/plan.h"
#include "sched/snapshot.h"

namespace berth::sched {

inline std::string CheckPlan(const Snapshot& s, const Plan& plan) {
  std::map<std::int64_t, const PendingJob*> pending;
  for (const auto& j : s.pending) pending[j.id] = &j;
  std::map<std::int64_t, const RunningJob*> running;
  for (const auto& r : s.running) running[r.id] = &r;
  std::set<std::int64_t> evicted;
  for (const auto& e : plan.evictions) {
    if (!running.contains(e.job_id)) return "evicted a job that is not running";
    if (!evicted.insert(e.job_id).second) return "evicted a job twice";
    if (e.by_job == 0 || e.by_queue.empty()) return "an eviction does not say who caused it";
  }
  // GPUs free after the evictions.
  std::set<std::tuple<std::string, std::uint32_t>> free;
  for (const auto& n : s.nodes) {
    for (const auto& g : n.gpus) {
      if (g.free && g.healthy && n.ready) free.insert({n.name, g.index});
    }
  }
  for (const auto& r : s.running) {
    if (!evicted.contains(r.id)) continue;
    for (const auto& rp : r.replicas) {
      for (auto i : rp.gpu_indices) free.insert({rp.node, i});
    }
  }
  std::set<std::int64_t> seen;
  for (const auto& p : plan.placements) {
    auto it = pending.find(p.job_id);
    if (it == pending.end()) return "placed a job that is not pending";
    if (!seen.insert(p.job_id).second) return "placed a job twice";
    const PendingJob& j = *it->second;
    if (p.replicas.size() != j.replicas) return "partial gang for job " + std::to_string(j.id);
    for (const auto& rp : p.replicas) {
      if (rp.gpu_indices.size() != j.resources.gpus) return "replica with the wrong GPU count";
      for (auto i : rp.gpu_indices) {
        if (free.erase({rp.node, i}) != 1) {
          return "GPU " + rp.node + "/" + std::to_string(i) + " handed out twice or not free";
        }
      }
    }
    for (auto v : p.after_evicting) {
      if (!evicted.contains(v)) return "after_evicting names a job not evicted";
    }
  }
  for (const auto& d : plan.pending) {
    if (!pending.contains(d.job_id)) return "a reason for a job that is not pending";
    if (!seen.insert(d.job_id).second) return "job both placed and pending, or pending twice";
    if (d.reason.code == model::ReasonCode::kNone) return "a pending job without a reason";
  }
  if (seen.size() != pending.size()) return "a pending job is neither placed nor explained";
  // Backfill never delays a reserved job: whatever is placed on a GPU
  // reserved for another job ends (now + max runtime) by that reservation's
  // start, and a reservation is for a job left waiting.
  std::map<std::tuple<std::string, std::uint32_t>, std::int64_t> reserved_from;
  std::set<std::int64_t> reserved_jobs;
  std::map<std::tuple<std::string, std::uint32_t>, std::int64_t> reserved_by;
  for (const auto& r : plan.reservations) {
    if (!pending.contains(r.job_id)) return "a reservation for a job that is not pending";
    if (!reserved_jobs.insert(r.job_id).second) return "a job reserved twice";
    if (r.start_ms < s.now_ms) return "a reservation starts before now";
    const PendingJob& j = *pending.at(r.job_id);
    if (r.replicas.size() != j.replicas) return "a reservation for part of a gang";
    for (const auto& rp : r.replicas) {
      if (rp.gpu_indices.size() != j.resources.gpus) return "reserved the wrong GPU count";
      for (auto i : rp.gpu_indices) {
        auto [it, fresh] = reserved_from.try_emplace({rp.node, i}, r.start_ms);
        if (!fresh) it->second = std::min(it->second, r.start_ms);
        reserved_by[{rp.node, i}] = r.job_id;
      }
    }
  }
  for (const auto& p : plan.placements) {
    if (reserved_jobs.contains(p.job_id)) return "a job both placed and reserved";
    const PendingJob& j = *pending.at(p.job_id);
    for (const auto& rp : p.replicas) {
      for (auto i : rp.gpu_indices) {
        auto it = reserved_from.find({rp.node, i});
        if (it == reserved_from.end()) continue;
        if (j.max_runtime_ms <= 0 || s.now_ms + j.max_runtime_ms > it->second) {
          return "job " + std::to_string(j.id) + " placed on GPU " + rp.node + "/" +
                 std::to_string(i) + " reserved for job " +
                 std::to_string(reserved_by[{rp.node, i}]) + " and does not end before it starts";
        }
      }
    }
  }
  return {};
}

}  // namespace berth::sched
