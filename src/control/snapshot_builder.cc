#include "control/snapshot_builder.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "model/reason.h"

namespace berth::server {

sched::PendingJob PendingFrom(const store::JobRecord& job) {
  sched::PendingJob p;
  p.id = job.id;
  p.tenant = job.spec.tenant;
  p.queue = job.spec.queue;
  p.priority = job.spec.priority;
  p.submitted_at_ms = job.submitted_at_ms;
  p.replicas = job.spec.replicas;
  p.resources = job.spec.resources;
  p.preemptible = job.spec.preemptible;
  p.node_selector = job.spec.node_selector;
  p.tolerations = job.spec.tolerations;
  p.pool = job.spec.pool;
  p.topology = job.spec.topology;
  p.max_runtime_ms = job.spec.max_runtime_ms;
  p.image = job.spec.image;
  if (job.spec.service) p.service = job.spec.tenant + "/" + job.spec.service->name;
  // Its reclaim grace counts from the cycle that first said it needed to
  // reclaim, as its stored pending reason says.
  if (auto it = job.reason.counts.find(model::kReclaimSinceMs); it != job.reason.counts.end()) {
    p.reclaim_since_ms = it->second;
  }
  return p;
}

sched::NodeView NodeViewFor(const store::NodeRecord& node, bool ready) {
  sched::NodeView v = sched::NodeViewOf(node.info, ready);
  v.cordoned = node.cordon.has_value();
  // A cordoned GPU takes nothing new, like an unhealthy one.
  for (auto& g : v.gpus) {
    if (node.gpu_cordons.contains(g.index)) g.healthy = false;
  }
  return v;
}

Result<sched::Snapshot> BuildSnapshot(const SnapshotInputs& in, const SpecLookup& spec_of) {
  sched::Snapshot snap;
  snap.now_ms = in.now_ms;
  snap.policy = *in.policy;
  std::map<std::string, std::size_t> index;
  for (const auto& n : *in.nodes) {
    auto it = in.ready->find(n.info.name);
    sched::NodeView v = NodeViewFor(n, it != in.ready->end() && it->second);
    index[v.name] = snap.nodes.size();
    snap.nodes.push_back(std::move(v));
  }
  std::sort(snap.nodes.begin(), snap.nodes.end(),
            [](const sched::NodeView& a, const sched::NodeView& b) { return a.name < b.name; });
  index.clear();
  for (std::size_t i = 0; i < snap.nodes.size(); ++i) index[snap.nodes[i].name] = i;

  // Active runs hold their GPUs, CPU and memory, and make up running jobs.
  std::map<std::int64_t, sched::RunningJob> running;
  for (const auto& run : *in.active_runs) {
    auto spec = spec_of(run.job_id);
    if (!spec) return std::unexpected(spec.error());
    if (auto it = index.find(run.node); it != index.end()) {
      auto& node = snap.nodes[it->second];
      for (auto idx : run.gpu_indices) {
        for (auto& g : node.gpus) {
          if (g.index != idx) continue;
          g.free = false;
          // A slice holds what it was placed with (model::SliceOf).
          g.shared_millis += run.gpu_share_millis;
          g.shared_bytes += run.gpu_share_bytes;
        }
      }
      node.cpu_millis_free -=
          std::min<std::uint64_t>(node.cpu_millis_free, spec->resources.cpu_millis);
      node.memory_bytes_free -=
          std::min<std::uint64_t>(node.memory_bytes_free, spec->resources.memory_bytes);
    }
    auto& job = running[run.job_id];
    if (job.id == 0) {
      job.id = run.job_id;
      job.tenant = spec->tenant;
      job.queue = spec->queue;
      job.priority = spec->priority;
      job.preemptible = spec->preemptible;
      job.resources = spec->resources;
      job.max_runtime_ms = spec->max_runtime_ms;
      job.started_at_ms = run.started_at_ms.value_or(in.now_ms);
      job.checkpoints = spec->checkpoint.enabled;
      job.node_selector = spec->node_selector;
      job.tolerations = spec->tolerations;
      job.pool = spec->pool;
      job.topology = spec->topology;
      job.image = spec->image;
      if (spec->service) job.service = spec->tenant + "/" + spec->service->name;
    }
    if (run.stop_requested) {
      // Already stopping (cancelled, evicted or moved): its GPUs are spoken
      // for until it exits, and no plan may evict or move it again.
      job.preemptible = false;
      job.checkpoints = false;
    }
    // Work lost counts from the earliest replica start, or from the newest
    // checkpoint any replica reported (usually rank 0 writes it).
    job.started_at_ms = std::min(job.started_at_ms, run.started_at_ms.value_or(in.now_ms));
    job.last_checkpoint_ms = std::max(job.last_checkpoint_ms, run.last_checkpoint_ms.value_or(0));
    job.replicas.push_back({run.replica, run.node, run.gpu_indices});
  }
  for (auto& [id, job] : running) {
    // A checkpoint file left from an earlier attempt saves nothing of this one.
    if (job.last_checkpoint_ms < job.started_at_ms) job.last_checkpoint_ms = 0;
    snap.running.push_back(std::move(job));
  }
  for (const auto& job : *in.pending) snap.pending.push_back(PendingFrom(*job));
  if (in.history != nullptr) {
    // Predictions where no max runtime is declared (a declared one wins).
    // A waiting job's from its submitter and name too; a running job's from
    // its tenant and shape (its spec names no submitter).
    for (std::size_t i = 0; i < snap.pending.size(); ++i) {
      auto& p = snap.pending[i];
      if (p.max_runtime_ms > 0) continue;
      const store::JobRecord& job = *(*in.pending)[i];
      p.predicted =
          in.history->Predict({p.tenant,
                               job.submitted_by,
                               job.spec.name,
                               {p.resources.gpus, p.replicas, model::IsSlice(p.resources)}});
    }
    for (auto& r : snap.running) {
      if (r.max_runtime_ms > 0) continue;
      // Knowing how long it has run already: the runs like it that lasted
      // longer say when it ends.
      r.predicted = in.history->PredictAfter(
          {r.tenant,
           {},
           {},
           {r.resources.gpus, static_cast<std::uint32_t>(r.replicas.size()),
            model::IsSlice(r.resources)}},
          snap.now_ms - r.started_at_ms);
    }
  }
  if (in.decayed_usage != nullptr) snap.decayed_usage = *in.decayed_usage;
  // What placement keeps room for when a job may use any GPU model: the
  // shapes waiting and running now.
  snap.demand = sched::DemandOf(snap.pending, snap.running);
  return snap;
}

void MarkOtherTenantJobs(sched::Plan& plan, const sched::Snapshot& snap) {
  // Most reasons name no other job: only the ids some reason names (and
  // those reasons' own jobs) are looked up, in one pass over the snapshot.
  std::unordered_map<std::int64_t, const std::string*> tenant_of;
  auto want = [&](const model::Reason& r, std::int64_t self) {
    bool any = false;
    for (std::string_view key : model::kJobRefKeys) {
      if (auto it = r.counts.find(key); it != r.counts.end()) {
        tenant_of.try_emplace(it->second, nullptr);
        any = true;
      }
    }
    if (any) tenant_of.try_emplace(self, nullptr);
  };
  for (const auto& d : plan.pending) want(d.reason, d.job_id);
  for (const auto& e : plan.evictions) want(e.reason, e.job_id);
  if (tenant_of.empty()) return;
  auto note = [&](std::int64_t id, const std::string& tenant) {
    if (auto it = tenant_of.find(id); it != tenant_of.end()) it->second = &tenant;
  };
  for (const auto& p : snap.pending) note(p.id, p.tenant);
  for (const auto& r : snap.running) note(r.id, r.tenant);
  auto mark = [&](model::Reason& r, std::int64_t self) {
    const std::string* own = tenant_of.contains(self) ? tenant_of[self] : nullptr;
    for (std::string_view key : model::kJobRefKeys) {
      auto it = r.counts.find(key);
      if (it == r.counts.end()) continue;
      const std::string* other = tenant_of[it->second];
      if (own == nullptr || other == nullptr || *own != *other) {
        model::MarkOtherTenantJob(r, key);
      }
    }
  };
  for (auto& d : plan.pending) mark(d.reason, d.job_id);
  for (auto& e : plan.evictions) mark(e.reason, e.job_id);
}

}  // namespace berth::server
