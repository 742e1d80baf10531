#include "control/runtime_feed.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "model/job.h"

namespace berth::server {

std::optional<sched::RuntimeRecord> RuntimeRecordOf(const store::JobRecord& job) {
  sched::RunEnd end{};
  if (job.state == model::JobState::kSucceeded) {
    end = sched::RunEnd::kSucceeded;
  } else if (job.state == model::JobState::kFailed) {
    end = sched::RunEnd::kFailed;
  } else {
    return std::nullopt;  // cancelled or not finished: teaches nothing
  }
  TimeMs from = 0;
  TimeMs to = 0;
  for (const auto& run : job.runs) {
    if (run.attempt != job.attempts || !run.started_at_ms || !run.finished_at_ms) continue;
    from = from == 0 ? *run.started_at_ms : std::min(from, *run.started_at_ms);
    to = std::max(to, *run.finished_at_ms);
  }
  if (from == 0 && job.started_at_ms && job.finished_at_ms) {
    from = *job.started_at_ms;
    to = *job.finished_at_ms;
  }
  if (from == 0 || to <= from) return std::nullopt;
  const auto& r = job.spec.resources;
  return sched::RuntimeRecord{job.spec.tenant, job.submitted_by,
                              job.spec.name,   {r.gpus, job.spec.replicas, model::IsSlice(r)},
                              to - from,       end};
}

RuntimeFeed::RuntimeFeed(RuntimeFeedOptions options)
    : options_(options), history_(options.history) {}

Status RuntimeFeed::Refresh(store::JobStore& store, TimeMs now) {
  if (started_ && now - last_refresh_ms_ < options_.refresh_ms) return Ok();
  store::JobFilter filter;
  filter.states = {model::JobState::kSucceeded, model::JobState::kFailed};
  filter.limit = started_ ? options_.batch_jobs : options_.initial_jobs;
  auto jobs = store.ListJobs(filter);
  if (!jobs) return std::unexpected(jobs.error());
  started_ = true;
  last_refresh_ms_ = now;
  // Oldest finish first, so that each key keeps its most recent runs.
  std::vector<std::pair<TimeMs, const store::JobRecord*>> fresh;
  for (const auto& job : *jobs) {
    const TimeMs at = job.finished_at_ms.value_or(0);
    if (at < fed_until_ms_ || (at == fed_until_ms_ && fed_at_end_.contains(job.id))) continue;
    fresh.emplace_back(at, &job);
  }
  std::sort(fresh.begin(), fresh.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second->id) < std::tie(b.first, b.second->id);
  });
  for (const auto& [at, job] : fresh) {
    if (at > fed_until_ms_) {
      fed_until_ms_ = at;
      fed_at_end_.clear();
    }
    fed_at_end_.insert(job->id);
    if (auto record = RuntimeRecordOf(*job)) history_.Add(*record);
  }
  return Ok();
}

}  // namespace berth::server
