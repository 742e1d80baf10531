#include "store/memory_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "model/admission.h"
#include "model/json.h"

namespace berth::store {
namespace {

bool Active(const RunRecord& r) {
  return r.state == model::RunState::kStarting || r.state == model::RunState::kRunning;
}

// What a read returns: the job without its timeline, with or without runs.
JobRecord Summary(const JobRecord& job, bool with_runs) {
  JobRecord out = job;
  out.timeline.clear();
  if (!with_runs) out.runs.clear();
  return out;
}

bool SubmittedBefore(const JobRecord& a, const JobRecord& b) {
  return std::pair(a.submitted_at_ms, a.id) < std::pair(b.submitted_at_ms, b.id);
}

}  // namespace

// The overlay of one UpdateJobs call: the jobs it loaded or wrote, merged
// into the store when the body succeeds.
class MemoryJobStore::Tx final : public JobTransaction {
 public:
  explicit Tx(MemoryJobStore& s) : s_(s) {}

  Result<std::optional<JobRecord>> Load(std::int64_t id) override {
    const JobRecord* job = Find(id);
    if (job == nullptr) return std::optional<JobRecord>{};
    return std::optional<JobRecord>(Summary(*job, true));
  }

  Result<std::optional<std::int64_t>> JobOfRun(const std::string& run_id) override {
    for (const auto& [id, job] : touched_) {
      for (const auto& r : job.runs) {
        if (r.run_id == run_id) return std::optional<std::int64_t>(id);
      }
    }
    auto it = s_.run_jobs_.find(run_id);
    if (it == s_.run_jobs_.end()) return std::optional<std::int64_t>{};
    return std::optional<std::int64_t>(it->second);
  }

  Result<std::vector<std::int64_t>> ActiveJobsOn(const std::string& node) override {
    std::vector<std::int64_t> out;
    for (const auto& [id, stored] : s_.jobs_) {
      // The transaction's own version of the job, if it wrote one.
      auto touched = touched_.find(id);
      const JobRecord& job = touched != touched_.end() ? touched->second : stored;
      if (std::any_of(job.runs.begin(), job.runs.end(),
                      [&](const RunRecord& r) { return Active(r) && r.node == node; })) {
        out.push_back(id);
      }
    }
    return out;
  }

  Result<std::vector<std::int64_t>> ArrayElements(std::int64_t array_id) override {
    std::vector<std::int64_t> out;
    for (const auto& [id, job] : s_.jobs_) {
      if (job.spec.array_element && job.spec.array_element->id == array_id) out.push_back(id);
    }
    return out;
  }

  Status Write(const model::JobUpdate& update) override {
    JobRecord* job = Touch(update.job.id);
    if (job == nullptr) {
      return Fail(Code::kNotFound, fmt::format("job {} not found", update.job.id));
    }
    const JobRecord& j = update.job;
    job->state = j.state;
    job->reason = j.reason;
    job->started_at_ms = j.started_at_ms;
    job->finished_at_ms = j.finished_at_ms;
    job->exit_code = j.exit_code;
    job->signal = j.signal;
    job->failures = j.failures;
    job->retry_after_ms = j.retry_after_ms;
    job->attempts = j.attempts;
    job->policy_version = j.policy_version;
    job->cancel_requested = j.cancel_requested;
    job->cancelled_by = j.cancelled_by;
    for (const auto& run : j.runs) {
      auto it = std::find_if(job->runs.begin(), job->runs.end(),
                             [&](const RunRecord& r) { return r.run_id == run.run_id; });
      if (it != job->runs.end()) {
        *it = run;
      } else {
        job->runs.push_back(run);
      }
    }
    std::stable_sort(job->runs.begin(), job->runs.end(), [](const auto& a, const auto& b) {
      return std::pair(a.attempt, a.replica) < std::pair(b.attempt, b.replica);
    });
    for (const auto& e : update.events) job->timeline.push_back(e);
    return Ok();
  }

  Status SetPendingReason(std::int64_t id, const model::Reason& reason) override {
    const JobRecord* seen = Find(id);
    if (seen == nullptr || seen->state != model::JobState::kPending) return Ok();
    if (seen->reason == reason) return Ok();
    if (JobRecord* job = Touch(id); job != nullptr) job->reason = reason;
    return Ok();
  }

  void Record(AuditEntry record) override { records_.push_back(std::move(record)); }

  // Makes the overlay the store's state (mu_ held).
  void Merge() {
    for (auto& [id, job] : touched_) {
      for (const auto& r : job.runs) s_.run_jobs_[r.run_id] = id;
      s_.jobs_[id] = std::move(job);
    }
    for (auto& r : records_) s_.Keep(std::move(r));
  }

 private:
  const JobRecord* Find(std::int64_t id) const {
    if (auto it = touched_.find(id); it != touched_.end()) return &it->second;
    if (auto it = s_.jobs_.find(id); it != s_.jobs_.end()) return &it->second;
    return nullptr;
  }
  JobRecord* Touch(std::int64_t id) {
    if (auto it = touched_.find(id); it != touched_.end()) return &it->second;
    auto it = s_.jobs_.find(id);
    if (it == s_.jobs_.end()) return nullptr;
    return &touched_.emplace(id, it->second).first->second;
  }

  MemoryJobStore& s_;
  std::vector<AuditEntry> records_;
  std::map<std::int64_t, JobRecord> touched_;
};

void MemoryJobStore::set_policy(model::Policy policy) {
  std::lock_guard lock(mu_);
  policy_ = std::move(policy);
}

Result<std::string> MemoryJobStore::JobTenant(std::int64_t id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  return it->second.spec.tenant;
}

Result<std::int64_t> MemoryJobStore::CreateJob(const model::JobSpec& spec, TimeMs now,
                                               std::string_view submitted_by) {
  auto ids = CreateJobs(spec, now, submitted_by);
  if (!ids) return std::unexpected(ids.error());
  return ids->front();
}

Result<std::vector<std::int64_t>> MemoryJobStore::CreateJobs(
    const model::JobSpec& spec, TimeMs now, std::string_view submitted_by,
    const AuditOf<std::vector<std::int64_t>>& audit) {
  std::lock_guard lock(mu_);
  BERTH_RETURN_IF_ERROR(model::AdmitSubmission(policy_, spec, model::ToJson(spec).dump().size(),
                                               CountPending(spec.tenant, submitted_by),
                                               submitted_by));
  const std::uint32_t count = model::JobCount(spec);
  const std::int64_t first = next_id_;
  std::vector<std::int64_t> ids;
  ids.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    JobRecord job;
    job.id = next_id_++;
    job.spec = model::ArrayElementSpec(spec, i);
    if (job.spec.array_element) job.spec.array_element->id = first;
    job.state = model::JobState::kPending;
    job.reason = {model::ReasonCode::kQueued, {}, {}};
    job.submitted_at_ms = now;
    job.submitted_by = std::string(submitted_by);
    job.timeline.push_back({now, model::JobState::kPending, "Submitted",
                            fmt::format("submitted to queue {}/{}", spec.tenant, spec.queue),
                            std::nullopt});
    ids.push_back(job.id);
    jobs_.emplace(job.id, std::move(job));
  }
  if (audit) {
    if (auto record = audit(ids)) Keep(std::move(*record));
  }
  ++stats_.commits;
  ++stats_.submissions;
  return ids;
}

void MemoryJobStore::Keep(AuditEntry record) {
  // Numbered as the SQLite chain numbers them; no hashes: nothing here
  // outlives the process to be tampered with.
  record.seq = static_cast<std::int64_t>(audit_.size()) + 1;
  audit_.push_back(std::move(record));
}

std::vector<AuditEntry> MemoryJobStore::audit_records() {
  std::lock_guard lock(mu_);
  return audit_;
}

CommitStats MemoryJobStore::commit_stats() {
  std::lock_guard lock(mu_);
  return stats_;
}

PendingCount MemoryJobStore::CountPending(const std::string& tenant, std::string_view by) const {
  PendingCount out;
  for (const auto& [id, job] : jobs_) {
    if (job.state != model::JobState::kPending || job.spec.tenant != tenant) continue;
    ++out.tenant;
    if (job.submitted_by == by) ++out.member;
  }
  return out;
}

Result<PendingCount> MemoryJobStore::PendingCounts(const std::string& tenant,
                                                   std::string_view submitted_by) {
  std::lock_guard lock(mu_);
  return CountPending(tenant, submitted_by);
}

Result<JobRecord> MemoryJobStore::GetJob(std::int64_t id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  return it->second;
}

Result<std::vector<JobRecord>> MemoryJobStore::ListJobs(const JobFilter& filter) {
  std::lock_guard lock(mu_);
  std::vector<JobRecord> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend() && out.size() < filter.limit; ++it) {
    const JobRecord& job = it->second;
    if (filter.after_id && job.id >= *filter.after_id) continue;
    if (!filter.states.empty() &&
        std::find(filter.states.begin(), filter.states.end(), job.state) == filter.states.end()) {
      continue;
    }
    if (!filter.tenant.empty() && job.spec.tenant != filter.tenant) continue;
    if (!filter.queue.empty() && job.spec.queue != filter.queue) continue;
    if (!filter.tenants.Contains(job.spec.tenant)) continue;
    if (!filter.service.empty() &&
        (!job.spec.service || job.spec.service->name != filter.service)) {
      continue;
    }
    if (filter.replicas_only && !job.spec.service) continue;
    if (filter.array_id &&
        (!job.spec.array_element || job.spec.array_element->id != *filter.array_id)) {
      continue;
    }
    out.push_back(Summary(job, filter.with_runs));
  }
  return out;
}

Result<std::vector<JobRecord>> MemoryJobStore::PendingJobs() {
  std::lock_guard lock(mu_);
  std::vector<JobRecord> out;
  for (const auto& [id, job] : jobs_) {
    if (job.state == model::JobState::kPending) out.push_back(Summary(job, false));
  }
  std::stable_sort(out.begin(), out.end(), SubmittedBefore);
  return out;
}

Result<std::vector<RunRecord>> MemoryJobStore::ActiveRuns() {
  std::lock_guard lock(mu_);
  std::vector<RunRecord> out;
  for (const auto& [id, job] : jobs_) {
    for (const auto& r : job.runs) {
      if (Active(r)) out.push_back(r);
    }
  }
  return out;
}

Status MemoryJobStore::UpdateJobs(const JobTransactionBody& body) {
  std::lock_guard lock(mu_);
  Tx tx(*this);
  BERTH_RETURN_IF_ERROR(body(tx));
  tx.Merge();
  return Ok();
}

RunRecord* MemoryJobStore::FindRun(const std::string& run_id) {
  auto it = run_jobs_.find(run_id);
  if (it == run_jobs_.end()) return nullptr;
  for (auto& r : jobs_.at(it->second).runs) {
    if (r.run_id == run_id) return &r;
  }
  return nullptr;
}

Result<std::optional<RunRecord>> MemoryJobStore::GetRun(const std::string& run_id) {
  std::lock_guard lock(mu_);
  const RunRecord* run = FindRun(run_id);
  if (run == nullptr) return std::optional<RunRecord>{};
  return std::optional<RunRecord>(*run);
}

Status MemoryJobStore::RecordCheckpoint(const std::string& run_id, TimeMs at) {
  std::lock_guard lock(mu_);
  RunRecord* run = FindRun(run_id);
  if (run == nullptr) return Fail(Code::kNotFound, fmt::format("run {} not found", run_id));
  if (!run->last_checkpoint_ms || *run->last_checkpoint_ms < at) run->last_checkpoint_ms = at;
  return Ok();
}

Result<std::vector<RunUsage>> MemoryJobStore::FinishedRunsSince(TimeMs since) {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::pair<TimeMs, std::string>, RunUsage>> found;
  for (const auto& [id, job] : jobs_) {
    for (const auto& r : job.runs) {
      if (!r.finished_at_ms || *r.finished_at_ms < since || !r.started_at_ms) continue;
      const std::int64_t mgpu = r.gpu_share_millis > 0
                                    ? std::int64_t{r.gpu_share_millis}
                                    : static_cast<std::int64_t>(r.gpu_indices.size()) * 1000;
      found.push_back(
          {{*r.finished_at_ms, r.run_id},
           {job.spec.tenant, job.spec.queue, mgpu, *r.started_at_ms, *r.finished_at_ms}});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<RunUsage> out;
  out.reserve(found.size());
  for (auto& [key, usage] : found) out.push_back(std::move(usage));
  return out;
}

Result<std::vector<JobRecord>> MemoryJobStore::JobsSubmittedBetween(TimeMs since, TimeMs until,
                                                                    std::size_t max_jobs) {
  std::lock_guard lock(mu_);
  std::vector<JobRecord> out;
  for (const auto& [id, job] : jobs_) {
    if (job.submitted_at_ms >= since && job.submitted_at_ms < until) {
      out.push_back(Summary(job, true));
    }
  }
  std::stable_sort(out.begin(), out.end(), SubmittedBefore);
  if (max_jobs > 0 && out.size() > max_jobs) out.resize(max_jobs);
  return out;
}

Result<std::vector<JobRecord>> MemoryJobStore::JobsForWindow(TimeMs from, TimeMs to,
                                                             const model::TenantScope& scope,
                                                             std::size_t max_rows) {
  std::lock_guard lock(mu_);
  std::vector<JobRecord> out;
  for (const auto& [id, job] : jobs_) {
    if (job.submitted_at_ms < to && (!job.finished_at_ms || *job.finished_at_ms >= from) &&
        scope.Contains(job.spec.tenant)) {
      out.push_back(Summary(job, true));
    }
  }
  std::stable_sort(out.begin(), out.end(), SubmittedBefore);
  if (out.size() > max_rows) out.resize(max_rows);
  return out;
}

}  // namespace berth::store
