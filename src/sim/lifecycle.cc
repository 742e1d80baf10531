#include "sim/lifecycle.h"

#include <fmt/format.h>

#include <limits>
#include <utility>

namespace berth::sim {

using model::JobRecord;
using model::JobState;

namespace {

bool Active(const model::RunRecord& r) {
  return r.state == model::RunState::kStarting || r.state == model::RunState::kRunning;
}

std::unexpected<Error> Disagree(const JobRecord& job, std::string_view what,
                                std::string_view expected) {
  return Fail(Code::kInternal,
              fmt::format("job {} after {}: its record is {}, the simulation has it {}", job.id,
                          what, model::JobStateName(job.state), expected));
}

// Records the exit of each run still active that `exit_of` answers for (it
// fills in the run's RunExit; false: not this one), in run order.
template <typename ExitOf>
Status ExitRuns(JobRecord& job, ExitOf exit_of) {
  for (std::size_t i = 0; i < job.runs.size(); ++i) {
    if (!Active(job.runs[i])) continue;
    model::RunExit exit;
    exit.run_id = job.runs[i].run_id;
    if (!exit_of(job.runs[i], exit)) continue;
    auto recorded = control::RecordExit(job, exit, exit.ended_at_ms);
    if (!recorded) {
      return Fail(Code::kInternal,
                  fmt::format("job {}: the exit of run {} was refused", job.id, exit.run_id));
    }
    job = std::move(recorded->job.job);
  }
  return Ok();
}

}  // namespace

SimNodes::SimNodes(const std::vector<sched::NodeView>& nodes) {
  infos_.reserve(nodes.size());
  for (const auto& n : nodes) {
    model::NodeInfo info;
    info.name = n.name;
    info.hostname = n.name;
    info.gpu_provider = "simulated";
    for (const auto& g : n.gpus) {
      model::Gpu gpu;
      gpu.index = g.index;
      gpu.uuid = g.uuid;
      gpu.model = g.model;
      gpu.memory_bytes = g.memory_bytes;
      gpu.nvlink_island = g.nvlink_island;
      gpu.sharing = g.sharing;
      info.gpus.push_back(std::move(gpu));
    }
    infos_.push_back(std::move(info));
  }
  // After the last push_back: the index points into infos_.
  for (const auto& info : infos_) index_.emplace(info.name, &info);
}

JobRecord ArrivedJob(const SimJob& job) {
  JobRecord r;
  r.id = job.id;
  r.spec.name = job.name;
  r.spec.tenant = job.tenant;
  r.spec.queue = job.queue;
  r.spec.replicas = job.replicas;
  r.spec.resources = job.resources;
  r.spec.priority = job.priority;
  r.spec.preemptible = job.preemptible;
  r.spec.max_runtime_ms = job.max_runtime_ms;
  r.spec.retry.max_attempts = std::numeric_limits<std::uint32_t>::max();
  r.spec.retry.backoff_ms = 0;
  r.spec.retry.on = {"node_lost"};
  r.state = JobState::kPending;
  r.submitted_at_ms = job.submit_ms;
  return r;
}

Status PlaceAndStart(JobRecord& job, const sched::Placement& placement,
                     const control::NodeIndex& nodes, std::int64_t policy_version, TimeMs now) {
  auto placed = control::PlaceJob(job, placement, nodes, policy_version, now);
  if (!placed) return Disagree(job, "a placement PlaceJob refused", "waiting");
  job = std::move(placed->job);  // its runs are the new attempt's only
  for (std::size_t i = 0; i < job.runs.size(); ++i) {
    auto started = control::StartRun(job, job.runs[i].run_id, 0, now);
    if (!started) {
      return Fail(Code::kInternal,
                  fmt::format("job {}: run {} could not start", job.id, job.runs[i].run_id));
    }
    job = std::move(started->job.job);
    job.runs[i] = std::move(started->run);
  }
  if (job.state != JobState::kRunning) return Disagree(job, "its placement", "Running");
  return Ok();
}

Status EvictAndExit(JobRecord& job, const sched::Eviction& eviction, TimeMs now) {
  // No `by`: the job it makes room for would only get an event, and the
  // simulator keeps none.
  auto evicted = control::EvictJob(job, eviction, nullptr, now);
  if (!evicted) return Disagree(job, "an eviction EvictJob refused", "Running");
  job = std::move(evicted->victim.job);
  BERTH_RETURN_IF_ERROR(ExitRuns(job, [&](const model::RunRecord& r, model::RunExit& exit) {
    if (!r.stop_requested) return false;
    exit.ended_at_ms = now;
    exit.stopped_for = r.stopped_for;
    return true;
  }));
  if (job.state != JobState::kPending) return Disagree(job, "its eviction", "Pending");
  return Ok();
}

Status Complete(JobRecord& job, TimeMs now) {
  BERTH_RETURN_IF_ERROR(ExitRuns(job, [&](const model::RunRecord&, model::RunExit& exit) {
    exit.ended_at_ms = now;
    return true;
  }));
  if (job.state != JobState::kSucceeded) return Disagree(job, "its runs ended", "Succeeded");
  return Ok();
}

Status LoseNode(JobRecord& job, const std::string& node, std::int64_t failures, TimeMs now) {
  // As the server records a run on a node presumed gone (control/controller.cc).
  BERTH_RETURN_IF_ERROR(ExitRuns(job, [&](const model::RunRecord& r, model::RunExit& exit) {
    if (r.node != node) return false;
    exit.exit_code = -1;
    exit.ended_at_ms = now;
    exit.stopped_for = model::StopCause::kLost;
    exit.start_error = fmt::format("node {} failed", node);
    return true;
  }));
  // Its replicas elsewhere, stopped with the gang.
  BERTH_RETURN_IF_ERROR(ExitRuns(job, [&](const model::RunRecord&, model::RunExit& exit) {
    exit.ended_at_ms = now;
    return true;
  }));
  if (job.state != JobState::kPending) return Disagree(job, "a node failure", "Pending");
  if (job.failures != static_cast<std::uint64_t>(failures)) {
    return Fail(Code::kInternal,
                fmt::format("job {}: its record counts {} failures, the simulation {}", job.id,
                            job.failures, failures));
  }
  return Ok();
}

}  // namespace berth::sim
