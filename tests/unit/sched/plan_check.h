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
  // Jobs moved (consolidation): placed again as if pending, with the shape
  // they run with now.
  std::map<std::int64_t, PendingJob> moved;
  for (const auto& e : plan.evictions) {
    if (!running.contains(e.job_id)) return "evicted a job that is not running";
    if (!evicted.insert(e.job_id).second) return "evicted a job twice";
    if (e.by_job == 0 || e.by_queue.empty()) return "an eviction does not say who caused it";
    if (e.cause != EvictionCause::kMove) continue;
    const RunningJob& r = *running.at(e.job_id);
    if (!r.checkpoints) return "moved a job that does not checkpoint";
    if (e.moved_from != r.replicas) return "a move does not say where the job runs now";
    PendingJob j;
    j.id = r.id;
    j.replicas = static_cast<std::uint32_t>(r.replicas.size());
    j.resources = r.resources;
    j.max_runtime_ms = r.max_runtime_ms;
    j.image = r.image;
    moved[r.id] = j;
  }
  auto subject = [&](const Placement& p) -> const PendingJob* {
    if (p.moved) {
      auto it = moved.find(p.job_id);
      return it == moved.end() ? nullptr : &it->second;
    }
    auto it = pending.find(p.job_id);
    return it == pending.end() ? nullptr : it->second;
  };
  // Per GPU after the evictions: free, held whole, or holding slices.
  struct Held {
    const GpuView* gpu = nullptr;
    bool usable = false;  // ready node, healthy GPU
    bool whole = false;
    std::uint32_t millis = 0;
    std::uint64_t bytes = 0;
  };
  std::map<std::tuple<std::string, std::uint32_t>, Held> gpus;
  for (const auto& n : s.nodes) {
    for (const auto& g : n.gpus) {
      Held h{&g, g.healthy && n.ready, !g.free && g.shared_millis == 0, g.shared_millis,
             g.shared_bytes};
      if (g.shared_millis > 0 && g.free) return "snapshot: a GPU with slices marked free";
      gpus[{n.name, g.index}] = h;
    }
  }
  for (const auto& r : s.running) {
    if (!evicted.contains(r.id)) continue;
    for (const auto& rp : r.replicas) {
      for (auto i : rp.gpu_indices) {
        auto it = gpus.find({rp.node, i});
        if (it == gpus.end()) continue;
        Held& h = it->second;
        if (model::IsSlice(r.resources)) {
          auto sl = model::SliceOf(r.resources, h.gpu->memory_bytes);
          h.millis -= std::min(h.millis, sl.millis);
          h.bytes -= std::min(h.bytes, sl.bytes);
        } else {
          h.whole = false;
        }
      }
    }
  }
  std::set<std::int64_t> seen;
  std::set<std::int64_t> placed_moved;
  for (const auto& p : plan.placements) {
    const PendingJob* subj = subject(p);
    if (subj == nullptr) {
      return p.moved ? "a moved placement for a job not evicted to move"
                     : "placed a job that is not pending";
    }
    if (!(p.moved ? placed_moved : seen).insert(p.job_id).second) return "placed a job twice";
    if (p.moved) {
      if (p.after_evicting != std::vector<std::int64_t>{p.job_id}) {
        return "a moved job must start after its own eviction";
      }
      auto e = std::find_if(plan.evictions.begin(), plan.evictions.end(),
                            [&](const Eviction& v) { return v.job_id == p.job_id; });
      if (e->moved_to != p.replicas) return "a move's eviction and placement disagree";
    }
    const PendingJob& j = *subj;
    if (p.replicas.size() != j.replicas) return "partial gang for job " + std::to_string(j.id);
    // A job with an image runs in a container: only where podman is.
    for (const auto& rp : p.replicas) {
      if (j.image.empty()) break;
      auto node = std::find_if(s.nodes.begin(), s.nodes.end(),
                               [&](const NodeView& v) { return v.name == rp.node; });
      if (node == s.nodes.end() || !node->container_runtime) {
        return "job " + std::to_string(j.id) + " has an image and was placed on " + rp.node +
               ", which has no container runtime";
      }
    }
    bool slice = model::IsSlice(j.resources);
    for (const auto& rp : p.replicas) {
      if (rp.gpu_indices.size() != (slice ? 1 : j.resources.gpus)) {
        return "replica with the wrong GPU count";
      }
      for (auto i : rp.gpu_indices) {
        std::string name = "GPU " + rp.node + "/" + std::to_string(i);
        auto g = gpus.find({rp.node, i});
        if (g == gpus.end() || !g->second.usable) return name + " does not exist or is unusable";
        Held& h = g->second;
        if (h.whole) return name + " handed out twice or not free";
        if (!slice) {
          if (h.millis > 0)
            return name + " holds slices and was given whole to job " + std::to_string(j.id);
          h.whole = true;
          continue;
        }
        if (!h.gpu->sharing) return name + " is not in sharing mode but took a slice";
        auto sl = model::SliceOf(j.resources, h.gpu->memory_bytes);
        h.millis += sl.millis;
        h.bytes += sl.bytes;
        if (h.millis > 1000) return name + " shares add up past one GPU";
        if (h.bytes > h.gpu->memory_bytes) return name + " memory oversubscribed by slices";
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
  if (placed_moved.size() != moved.size()) return "a job evicted to move is not placed again";
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
      const std::size_t want = model::IsSlice(j.resources) ? 1 : j.resources.gpus;
      if (rp.gpu_indices.size() != want) return "reserved the wrong GPU count";
      for (auto i : rp.gpu_indices) {
        auto [it, fresh] = reserved_from.try_emplace({rp.node, i}, r.start_ms);
        if (!fresh) it->second = std::min(it->second, r.start_ms);
        reserved_by[{rp.node, i}] = r.job_id;
      }
    }
  }
  // A slice reserved beside other slices may share its GPU with slices that
  // outlast its start, as long as all of them fit then: checked below.
  std::set<std::tuple<std::string, std::uint32_t>> shared_reserved;
  for (const auto& p : plan.placements) {
    if (reserved_jobs.contains(p.job_id)) return "a job both placed and reserved";
    const PendingJob& j = *subject(p);
    for (const auto& rp : p.replicas) {
      for (auto i : rp.gpu_indices) {
        auto it = reserved_from.find({rp.node, i});
        if (it == reserved_from.end()) continue;
        if (model::IsSlice(j.resources) &&
            model::IsSlice(pending.at(reserved_by[{rp.node, i}])->resources)) {
          shared_reserved.insert({rp.node, i});
          continue;
        }
        if (j.max_runtime_ms <= 0 || s.now_ms + j.max_runtime_ms > it->second) {
          return "job " + std::to_string(j.id) + " placed on GPU " + rp.node + "/" +
                 std::to_string(i) + " reserved for job " +
                 std::to_string(reserved_by[{rp.node, i}]) + " and does not end before it starts";
        }
      }
    }
  }
  for (const auto& key : shared_reserved) {
    const TimeMs start = reserved_from.at(key);
    const GpuView& g = *gpus.at(key).gpu;
    std::uint64_t millis = 0;
    std::uint64_t bytes = 0;
    auto add = [&](const model::Resources& res, TimeMs end) {
      if (end != 0 && end <= start) return;  // gone by then
      auto sl = model::SliceOf(res, g.memory_bytes);
      millis += sl.millis;
      bytes += sl.bytes;
    };
    for (const auto& r : s.running) {
      if (evicted.contains(r.id) || !model::IsSlice(r.resources)) continue;
      for (const auto& rp : r.replicas) {
        for (auto i : rp.gpu_indices) {
          if (std::tuple(rp.node, i) != key) continue;
          add(r.resources, r.max_runtime_ms > 0 ? r.started_at_ms + r.max_runtime_ms : 0);
        }
      }
    }
    for (const auto& p : plan.placements) {
      const PendingJob& j = *subject(p);
      for (const auto& rp : p.replicas) {
        for (auto i : rp.gpu_indices) {
          if (std::tuple(rp.node, i) != key) continue;
          add(j.resources, j.max_runtime_ms > 0 ? s.now_ms + j.max_runtime_ms : 0);
        }
      }
    }
    add(pending.at(reserved_by.at(key))->resources, 0);
    if (millis > 1000 || bytes > g.memory_bytes) {
      return "the slice reserved on GPU " + std::get<0>(key) + "/" +
             std::to_string(std::get<1>(key)) +
             " does not fit beside the slices there at its start";
    }
  }
  return {};
}

}  // namespace berth::sched
