// OpenB fill mode: the measurement of FGD (Weng et al., "Beware of
// Fragmentation", ATC'23). Pods arrive one at a time in trace order and never
// leave; each is placed by the scheduler under test or, when it does not fit,
// counted as arrived and dropped. At the points where the GPU demand that has
// arrived reaches given shares of the cluster's GPUs, the fill records the
// unallocated GPUs (cluster GPUs minus allocated GPU-equivalents) and the
// fragmented ones. When the trace runs out before the last point, it is
// replayed again from the start (FGD likewise inflates its workload).
//
// Fragmentation is FGD's: for a node and a pod shape, the node's free GPU
// capacity that shape cannot use: all of it when the shape does not fit the
// node at all (CPU, memory, GPU model, too few GPUs), else the free part of
// each GPU with less room than the shape asks per GPU. A node's fragmentation
// is its mean over the trace's GPU pod shapes, weighted by how often each
// appears; the cluster's is the sum over nodes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/scheduler.h"
#include "sim/trace.h"

namespace berth::sim {

struct FillPoint {
  double arrived_share = 0;  // the milestone: arrived GPU demand / cluster GPUs
  std::int64_t arrived_pods = 0;
  double arrived_gpus = 0;  // GPU-equivalents asked by the pods so far
  double allocated_gpus = 0;
  double unallocated_gpus = 0;
  double fragmented_gpus = 0;
  std::int64_t failed_pods = 0;        // pods so far that did not fit
  std::int64_t failed_model_pods = 0;  // of those, pods that name a GPU model
};

struct FillResult {
  std::string scheduler;
  std::int64_t cluster_gpus = 0;
  // When the first pod did not fit (the brief "fill until the next pod does
  // not fit" stops here): the arrived share and the pods placed before it.
  std::optional<double> first_failure_share;
  std::int64_t placed_before_first_failure = 0;
  std::vector<FillPoint> points;
};

struct FillOptions {
  std::vector<double> milestones{0.5, 0.7, 0.8, 0.9, 0.95, 1.0};
};

// Runs the fill with `scheduler`. Every pod goes in one queue at normal
// priority, and the snapshot lists no running jobs, so nothing is evicted:
// placed pods hold their GPUs for good.
Result<FillResult> Fill(const std::vector<sched::NodeView>& nodes, const std::vector<SimJob>& pods,
                        const sched::Scheduler& scheduler, const std::string& name,
                        const FillOptions& options = {});

// FGD's expected fragmentation of the cluster (GPU-equivalents) against the
// GPU pods in `pods`.
double FragmentedGpus(const std::vector<sched::NodeView>& nodes, const std::vector<SimJob>& pods);

std::string RenderFillTable(const std::vector<FillResult>& results);
nlohmann::json ToJson(const FillResult& result);

}  // namespace berth::sim
