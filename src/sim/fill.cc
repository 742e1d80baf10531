#include "sim/fill.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/baselines.h"

namespace berth::sim {
namespace {

// GPU-equivalents a pod asks for.
double PodGpus(const SimJob& p) {
  if (p.resources.gpu_share_millis > 0) {
    return static_cast<double>(p.resources.gpu_share_millis) / 1000.0 * p.replicas;
  }
  return static_cast<double>(p.resources.gpus) * p.replicas;
}

using Shape = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint64_t, std::string>;

}  // namespace

double FragmentedGpus(const std::vector<sched::NodeView>& nodes, const std::vector<SimJob>& pods) {
  std::map<Shape, std::int64_t> shapes;
  std::int64_t total = 0;
  for (const auto& p : pods) {
    const auto& r = p.resources;
    if (r.gpus == 0 && r.gpu_share_millis == 0) continue;  // CPU-only pods use no GPU
    ++shapes[{r.gpus, r.gpu_share_millis, r.cpu_millis, r.memory_bytes, r.gpu_model}];
    ++total;
  }
  if (total == 0) return 0;
  double frag_milli = 0;
  for (const auto& node : nodes) {
    std::int64_t node_free = 0;
    for (const auto& g : node.gpus) node_free += FreeMillis(g);
    if (node_free == 0) continue;
    double expected = 0;
    for (const auto& [shape, count] : shapes) {
      const auto& [gpus, share, cpu, mem, gpu_model] = shape;
      model::Resources r;
      r.gpus = gpus;
      r.gpu_share_millis = share;
      r.cpu_millis = cpu;
      r.memory_bytes = mem;
      r.gpu_model = gpu_model;
      std::int64_t frag = node_free;
      if (FitReplica(node, r)) {
        // It fits: only GPUs with less room than it asks per GPU are lost to it.
        const std::int64_t per_gpu = share > 0 ? share : 1000;
        frag = 0;
        for (const auto& g : node.gpus) {
          const std::int64_t room = FreeMillis(g);
          const bool usable =
              g.healthy && (gpu_model.empty() || g.model == gpu_model) && (share == 0 || g.sharing);
          if (room > 0 && (room < per_gpu || !usable)) frag += room;
        }
      }
      expected += static_cast<double>(frag) * static_cast<double>(count);
    }
    frag_milli += expected / static_cast<double>(total);
  }
  return frag_milli / 1000.0;
}

Result<FillResult> Fill(const std::vector<sched::NodeView>& nodes_in,
                        const std::vector<SimJob>& pods, const sched::Scheduler& scheduler,
                        const std::string& name, const FillOptions& options) {
  FillResult out;
  out.scheduler = name;
  std::vector<sched::NodeView> nodes = nodes_in;
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    index[nodes[i].name] = i;
    for (auto& g : nodes[i].gpus) {
      g.free = true;
      g.shared_millis = 0;
      g.shared_bytes = 0;
      if (g.healthy && nodes[i].ready) ++out.cluster_gpus;
    }
  }
  std::vector<double> milestones = options.milestones;
  std::sort(milestones.begin(), milestones.end());
  if (out.cluster_gpus == 0 || milestones.empty()) return out;
  double trace_gpus = 0;
  for (const auto& p : pods) trace_gpus += PodGpus(p);
  if (trace_gpus <= 0) return Fail(Code::kInvalidArgument, "fill: the trace asks for no GPUs");

  double arrived = 0;
  double allocated = 0;
  std::int64_t arrived_pods = 0;
  std::int64_t failed = 0;
  std::int64_t failed_model = 0;
  std::size_t next_milestone = 0;
  const auto cluster = static_cast<double>(out.cluster_gpus);
  // The shapes of the pods arrived so far, this one included: the demand a
  // scheduler may keep room for (Snapshot::demand), learned as the fill
  // goes, never the trace's future.
  // (gpus, model, share millis, share bytes, CPU, memory) -> replicas
  std::map<std::tuple<std::uint32_t, std::string, std::uint32_t, std::uint64_t, std::uint64_t,
                      std::uint64_t>,
           std::int64_t>
      arrived_shapes;
  for (std::size_t k = 0; next_milestone < milestones.size(); ++k) {
    const SimJob& pod = pods[k % pods.size()];
    sched::Snapshot snap;
    snap.now_ms = static_cast<TimeMs>(k);
    snap.nodes = nodes;
    const auto& r = pod.resources;
    if (model::IsSlice(r)) {
      arrived_shapes[{1, r.gpu_model, r.gpu_share_millis, r.gpu_share_bytes, r.cpu_millis,
                      r.memory_bytes}] += pod.replicas;
    } else if (r.gpus > 0) {
      arrived_shapes[{r.gpus, r.gpu_model, 0, 0, r.cpu_millis, r.memory_bytes}] += pod.replicas;
    }
    snap.demand.reserve(arrived_shapes.size());
    for (const auto& [shape, n] : arrived_shapes) {
      const auto& [gpus, gpu_model, millis, bytes, cpu, memory] = shape;
      snap.demand.push_back({gpus, gpu_model, n, millis, bytes, cpu, memory});
    }
    sched::PendingJob p;
    p.id = static_cast<std::int64_t>(k) + 1;
    p.tenant = "default";
    p.queue = "default";
    p.submitted_at_ms = static_cast<TimeMs>(k);
    p.replicas = pod.replicas;
    p.resources = pod.resources;
    snap.pending.push_back(std::move(p));
    const sched::Plan plan = scheduler.Schedule(snap);
    if (!plan.evictions.empty()) {
      return Fail(Code::kInternal, fmt::format("fill: {} evicted a pod", name));
    }
    ++arrived_pods;
    arrived += PodGpus(pod);
    if (plan.placements.empty()) {
      if (!out.first_failure_share) {
        out.first_failure_share = (arrived - PodGpus(pod)) / cluster;
        out.placed_before_first_failure = arrived_pods - 1 - failed;
      }
      ++failed;
      if (!pod.resources.gpu_model.empty()) ++failed_model;
    } else {
      const auto& replicas = plan.placements.front().replicas;
      sched::HoldGpus(nodes, pod.resources, replicas, true);
      for (const auto& rp : replicas) {
        auto& node = nodes[index.at(rp.node)];
        node.cpu_millis_free -=
            std::min<std::uint64_t>(node.cpu_millis_free, pod.resources.cpu_millis);
        node.memory_bytes_free -= std::min(node.memory_bytes_free, pod.resources.memory_bytes);
      }
      allocated += PodGpus(pod);
    }
    while (next_milestone < milestones.size() && arrived >= milestones[next_milestone] * cluster) {
      FillPoint pt;
      pt.arrived_share = milestones[next_milestone];
      pt.arrived_pods = arrived_pods;
      pt.arrived_gpus = arrived;
      pt.allocated_gpus = allocated;
      pt.unallocated_gpus = cluster - allocated;
      pt.fragmented_gpus = FragmentedGpus(nodes, pods);
      pt.failed_pods = failed;
      pt.failed_model_pods = failed_model;
      out.points.push_back(pt);
      ++next_milestone;
    }
  }
  return out;
}

std::string RenderFillTable(const std::vector<FillResult>& results) {
  std::string out =
      fmt::format("{:<10} {:>8} {:>6} {:>8} {:>10} {:>12} {:>11} {:>7}\n", "SCHEDULER", "ARRIVED",
                  "PODS", "FAILED", "ALLOCATED", "UNALLOCATED", "FRAGMENTED", "FRAG%");
  for (const auto& r : results) {
    for (const auto& p : r.points) {
      out += fmt::format("{:<10} {:>7.0f}% {:>6} {:>8} {:>10.1f} {:>12.1f} {:>11.1f} {:>6.1f}%\n",
                         r.scheduler, 100 * p.arrived_share, p.arrived_pods, p.failed_pods,
                         p.allocated_gpus, p.unallocated_gpus, p.fragmented_gpus,
                         100.0 * p.fragmented_gpus / static_cast<double>(r.cluster_gpus));
    }
  }
  out +=
      "(GPU-equivalents; ARRIVED: GPU demand arrived as a share of the cluster's GPUs; FRAG%: "
      "fragmented / cluster GPUs)\n";
  for (const auto& r : results) {
    if (r.first_failure_share) {
      out += fmt::format("{}: first pod that did not fit arrived at {:.1f}% ({} pods placed)\n",
                         r.scheduler, 100 * *r.first_failure_share, r.placed_before_first_failure);
    }
  }
  return out;
}

nlohmann::json ToJson(const FillResult& r) {
  nlohmann::json j{{"scheduler", r.scheduler},
                   {"cluster_gpus", r.cluster_gpus},
                   {"placed_before_first_failure", r.placed_before_first_failure},
                   {"points", nlohmann::json::array()}};
  if (r.first_failure_share) j["first_failure_arrived_share"] = *r.first_failure_share;
  for (const auto& p : r.points) {
    j["points"].push_back({{"arrived_share", p.arrived_share},
                           {"arrived_pods", p.arrived_pods},
                           {"arrived_gpus", p.arrived_gpus},
                           {"allocated_gpus", p.allocated_gpus},
                           {"unallocated_gpus", p.unallocated_gpus},
                           {"fragmented_gpus", p.fragmented_gpus},
                           {"failed_pods", p.failed_pods},
                           {"failed_model_pods", p.failed_model_pods}});
  }
  return j;
}

}  // namespace berth::sim
