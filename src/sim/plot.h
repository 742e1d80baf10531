// berth-sim's time series: one CSV per scheduler (one row per scheduling
// cycle, as the engine sampled it) and an SVG, written as text, of GPU
// allocation and queue length over time with one line per scheduler.
#pragma once

#include <string>
#include <vector>

#include "sim/engine.h"

namespace berth::sim {

// Header then one row per sample: t_s (seconds since the first sample),
// allocated_gpus (GPU-equivalents: slices count their share), pending_jobs,
// pending_gpus, idle_gpus_while_waiting, down_gpus.
std::string TimeSeriesCsv(const std::vector<Sample>& samples);

// Header then one row per job (times in seconds on the trace's clock, -1
// where there is none): id, tenant, gpus, submit_s, duration_s,
// first_start_s, end_s, evictions, waited (left waiting by a plan before
// its first start), and its first estimated start: eta_given_s, eta_s,
// eta_predicted, eta_after_job, eta_after_s (JobOutcome). What the ETA
// accuracy in docs/evaluation.md is broken down from.
std::string JobsCsv(const std::vector<JobOutcome>& jobs);

struct PlotSeries {
  std::string name;  // the scheduler
  const std::vector<Sample>* samples = nullptr;
};

// Two panels sharing the time axis (hours): allocated GPUs (with the
// cluster size as a dashed line) and pending jobs. Each line keeps at most
// one point per horizontal pixel (the mean of the samples in it).
std::string RenderSvg(const std::vector<PlotSeries>& series, std::int64_t cluster_gpus,
                      const std::string& title);

}  // namespace berth::sim
