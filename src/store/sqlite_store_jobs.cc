// SqliteStore's jobs and runs: submissions (group commit), the lifecycle's
// loads and persists, and the writer's reads (store.h's JobStore).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "model/admission.h"
#include "model/json.h"
#include "store/audit_chain.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store.h"

namespace berth::store {
namespace {

using nlohmann::json;

// A tenant's pending jobs, and its member's (the pending_counts view).
constexpr std::string_view kPendingCountsSql =
    "SELECT COALESCE(SUM(n), 0), COALESCE(SUM(CASE WHEN submitted_by=? THEN n END), 0) "
    "FROM pending_counts WHERE tenant=?";

Result<PendingCount> ReadPendingCounts(Statement& counts, const std::string& tenant,
                                       std::string_view by) {
  counts.Bind(1, by).Bind(2, tenant);
  auto row = counts.Step();
  if (!row) return std::unexpected(row.error());
  PendingCount out;
  if (*row) out = {counts.Int(0), counts.Int(1)};
  counts.Reset();
  return out;
}

}  // namespace

Status SqliteStore::AddEvent(std::int64_t job_id, TimeMs t, model::JobState state,
                             std::string_view event, std::string_view message,
                             std::optional<std::int64_t> policy_version) {
  auto st = db_.Prepare(
      "INSERT INTO job_events(job_id, time_ms, state, event, message, policy_version) "
      "VALUES(?,?,?,?,?,?)");
  if (!st) return std::unexpected(st.error());
  return st->Bind(1, job_id)
      .Bind(2, t)
      .Bind(3, model::JobStateName(state))
      .Bind(4, event)
      .Bind(5, message)
      .Bind(6, policy_version)
      .Run();
}

Status SqliteStore::SetJobState(std::int64_t job_id, model::JobState state,
                                const model::Reason& reason) {
  auto st = db_.Prepare("UPDATE jobs SET state=?, reason=? WHERE id=?");
  if (!st) return std::unexpected(st.error());
  NoteJobChanged(job_id);
  return st->Bind(1, model::JobStateName(state)).Bind(2, ReasonText(reason)).Bind(3, job_id).Run();
}

Result<std::int64_t> SqliteStore::CreateJob(const model::JobSpec& spec, TimeMs now,
                                            std::string_view submitted_by) {
  auto ids = CreateJobs(spec, now, submitted_by);
  if (!ids) return std::unexpected(ids.error());
  return ids->front();
}

Result<std::vector<std::int64_t>> SqliteStore::CreateJobs(
    const model::JobSpec& spec, TimeMs now, std::string_view submitted_by,
    const AuditOf<std::vector<std::int64_t>>& audit) {
  Submission me{&spec, now, submitted_by, audit ? &audit : nullptr};
  std::unique_lock lock(commit_mu_);
  queued_.push_back(&me);
  // Whoever finds no commit in flight takes everything queued so far and
  // commits it; the others wait for it, and the next batch forms meanwhile.
  while (!me.done) {
    if (committing_) {
      commit_cv_.wait(lock);
      continue;
    }
    committing_ = true;
    // At most kMaxAuditBatch: each may commit an audit record, and the
    // chain's head file lag after a crash is counted in batches.
    const std::size_t n = std::min(queued_.size(), kMaxAuditBatch);
    std::vector<Submission*> batch(queued_.begin(),
                                   queued_.begin() + static_cast<std::ptrdiff_t>(n));
    queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(n));
    lock.unlock();
    CommitSubmissions(batch);
    lock.lock();
    ++commit_stats_.commits;
    commit_stats_.submissions += batch.size();
    for (Submission* s : batch) s->done = true;
    committing_ = false;
    commit_cv_.notify_all();
  }
  return std::move(me.ids);
}

CommitStats SqliteStore::commit_stats() {
  std::lock_guard lock(commit_mu_);
  return commit_stats_;
}

void SqliteStore::CommitSubmissions(const std::vector<Submission*>& batch) {
  std::lock_guard lock(mu_);
  auto fail_all = [&](const Error& e) {
    for (Submission* s : batch) s->ids = std::unexpected(e);
  };
  // Checked here, under the store's lock, so a job cannot slip into a queue
  // that a policy change removes at the same moment.
  auto active = Active();
  if (!active) return fail_all(active.error());
  const model::Policy& policy = (*active)->policy;
  Transaction tx(db_);
  if (auto st = tx.Begin(); !st) return fail_all(st.error());
  // SQLite: past every id AUTOINCREMENT ever gave too. Jobs are never
  // deleted, so on PostgreSQL the largest id is the last one given.
  auto next = db_.Prepare(db_.dialect() == Dialect::kPostgres
                              ? "SELECT COALESCE(MAX(id), 0) FROM jobs"
                              : "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE "
                                "name='jobs'), 0), COALESCE((SELECT MAX(id) FROM jobs), 0))");
  auto job_st = db_.Prepare(
      "INSERT INTO jobs(id, name, tenant, queue, spec, state, reason, submitted_ms, submitted_by, "
      "array_id, service) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  auto event_st = db_.Prepare(
      "INSERT INTO job_events(job_id, time_ms, state, event, message) VALUES(?,?,?,?,?)");
  // Read inside the transaction: submissions earlier in this batch count.
  auto counts_st = db_.Prepare(kPendingCountsSql);
  if (!counts_st) return fail_all(counts_st.error());
  if (!next) return fail_all(next.error());
  if (!job_st) return fail_all(job_st.error());
  if (!event_st) return fail_all(event_st.error());
  auto row = next->Step();
  if (!row) return fail_all(row.error());
  // Ids are given, not left to AUTOINCREMENT, so an array's elements know
  // the array's id (the first's) before they are written. One writer holds
  // mu_, so nobody else takes these.
  std::int64_t id = next->Int(0) + 1;
  const std::string pending(model::JobStateName(model::JobState::kPending));
  const std::string queued = ReasonText({model::ReasonCode::kQueued, {}, {}});
  std::vector<Submission*> stored;
  std::vector<AuditEntry> records;  // of the stored submissions, in order
  for (Submission* sub : batch) {
    const model::JobSpec& spec = *sub->spec;
    auto waiting = ReadPendingCounts(*counts_st, spec.tenant, sub->by);
    if (!waiting) {
      sub->ids = std::unexpected(waiting.error());
      continue;
    }
    if (auto admitted = model::AdmitSubmission(policy, spec, model::ToJson(spec).dump().size(),
                                               *waiting, sub->by);
        !admitted) {
      sub->ids = std::unexpected(admitted.error());
      continue;
    }
    // One submission's failure rolls back only its own rows.
    if (auto sp = db_.Exec("SAVEPOINT submission"); !sp) {
      sub->ids = std::unexpected(sp.error());
      continue;
    }
    const std::uint32_t count = model::JobCount(spec);
    const std::int64_t first = id;
    const std::string message = fmt::format("submitted to queue {}/{}", spec.tenant, spec.queue);
    // The element specs differ only in array_element and the parameter
    // set: the rest is printed once.
    model::JobSpec base = model::ArrayElementSpec(spec, 0);
    json printed = model::ToJson(base);
    std::vector<std::int64_t> ids;
    ids.reserve(count);
    Status st = Ok();
    for (std::uint32_t i = 0; i < count && st; ++i, ++id) {
      if (spec.array) {
        json element = printed;
        element["array_element"] = {
            {"id", first}, {"index", spec.array->first + i}, {"size", spec.array->count}};
        if (i < spec.array->params.size()) {
          auto env = spec.env;
          for (const auto& [k, v] : spec.array->params[i]) env[k] = v;
          element["env"] = env;
        }
        job_st->Bind(5, element.dump());
        job_st->Bind(10, first);
      } else {
        job_st->Bind(5, printed.dump());
        job_st->BindNull(10);
      }
      job_st->Bind(1, id)
          .Bind(2, spec.name)
          .Bind(3, spec.tenant)
          .Bind(4, spec.queue)
          .Bind(6, pending)
          .Bind(7, queued)
          .Bind(8, sub->now)
          .Bind(9, sub->by);
      if (spec.service) {
        job_st->Bind(11, spec.service->name);
      } else {
        job_st->BindNull(11);
      }
      NoteJobChanged(id);
      st = job_st->Run();
      job_st->Reset();
      if (!st) break;
      st = event_st->Bind(1, id)
               .Bind(2, sub->now)
               .Bind(3, pending)
               .Bind(4, std::string_view("Submitted"))
               .Bind(5, message)
               .Run();
      event_st->Reset();
      ids.push_back(id);
    }
    if (!st) {
      (void)db_.Exec("ROLLBACK TO submission; RELEASE submission");
      id = first;
      sub->ids = std::unexpected(st.error());
      continue;
    }
    if (auto rel = db_.Exec("RELEASE submission"); !rel) {
      sub->ids = std::unexpected(rel.error());
      continue;
    }
    if (sub->audit != nullptr) {
      if (auto record = (*sub->audit)(ids)) records.push_back(std::move(*record));
    }
    sub->ids = std::move(ids);
    stored.push_back(sub);
  }
  if (stored.empty()) return;  // nothing to commit: the transaction rolls back
  if (auto st = CommitWithRecords(tx, db_, audit_head_, records); !st) {
    for (Submission* sub : stored) sub->ids = std::unexpected(st.error());
  }
}

Result<PendingCount> SqliteStore::PendingCounts(const std::string& tenant,
                                                std::string_view submitted_by) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(kPendingCountsSql);
  if (!st) return std::unexpected(st.error());
  return ReadPendingCounts(*st, tenant, submitted_by);
}

Result<std::vector<RunRecord>> SqliteStore::LoadRuns(std::string_view where, std::int64_t arg) {
  auto st = db_.Prepare(fmt::format(
      "SELECT {} FROM runs WHERE {} ORDER BY job_id, attempt, replica", kRunColumns, where));
  if (!st) return std::unexpected(st.error());
  if (where.find('?') != std::string_view::npos) st->Bind(1, arg);
  std::vector<RunRecord> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadRun(*st));
  }
  return out;
}

Result<std::optional<JobRecord>> SqliteStore::LoadJob(std::int64_t id, bool with_timeline) {
  auto st = db_.Prepare(fmt::format("SELECT {} FROM jobs WHERE id=?", kJobColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<JobRecord>{};
  JobRecord job = ReadJob(*st);
  auto runs = LoadRuns("job_id=?", id);
  if (!runs) return std::unexpected(runs.error());
  job.runs = std::move(*runs);
  if (with_timeline) {
    auto ev = db_.Prepare(
        "SELECT time_ms, state, event, message, policy_version FROM job_events WHERE job_id=? "
        "ORDER BY id");
    if (!ev) return std::unexpected(ev.error());
    ev->Bind(1, id);
    for (;;) {
      auto r = ev->Step();
      if (!r) return std::unexpected(r.error());
      if (!*r) break;
      job.timeline.push_back({ev->Int(0),
                              model::ParseJobState(ev->Text(1)).value_or(model::JobState::kPending),
                              ev->Text(2), ev->Text(3), ev->OptInt(4)});
    }
  }
  return std::optional<JobRecord>(std::move(job));
}

Result<JobRecord> SqliteStore::GetJob(std::int64_t id) {
  std::lock_guard lock(mu_);
  auto job = LoadJob(id, /*with_timeline=*/true);
  if (!job) return std::unexpected(job.error());
  if (!*job) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  return std::move(**job);
}

Result<std::string> SqliteStore::JobTenant(std::int64_t id) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare("SELECT tenant FROM jobs WHERE id=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  return st->Text(0);
}

Status SqliteStore::LoadAllPending() {
  auto st = db_.Prepare(fmt::format(
      "SELECT {} FROM jobs WHERE state='Pending' ORDER BY submitted_ms, id", kJobColumns));
  if (!st) return std::unexpected(st.error());
  pending_.clear();
  pending_at_.clear();
  pending_loaded_ = false;  // until the scan ends
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    JobRecord job = ReadJob(*st, &specs_);
    pending_at_[job.id] = job.submitted_at_ms;
    pending_.emplace(std::pair{job.submitted_at_ms, job.id},
                     std::make_shared<const JobRecord>(std::move(job)));
  }
  pending_loaded_ = true;
  return Ok();
}

void SqliteStore::RepointPending(std::int64_t id, std::optional<JobRecord> now_pending) {
  if (auto at = pending_at_.find(id); at != pending_at_.end()) {
    pending_.erase(std::pair{at->second, id});
    pending_at_.erase(at);
  }
  if (now_pending && now_pending->state == model::JobState::kPending) {
    pending_at_[id] = now_pending->submitted_at_ms;
    pending_.emplace(std::pair{now_pending->submitted_at_ms, id},
                     std::make_shared<const JobRecord>(std::move(*now_pending)));
  }
}

Status SqliteStore::RefreshPending() {
  std::unordered_set<std::int64_t> changed;
  {
    std::lock_guard lock(changed_mu_);
    changed.swap(changed_jobs_);
  }
  // Most of the queue changed (a big array, a first call): one scan. Where
  // another process may write jobs too, every time.
  if (!pending_loaded_ || !sole_writer_ || changed.size() > 256 + pending_.size() / 2) {
    track_changes_.store(true);
    return LoadAllPending();
  }
  if (changed.empty()) return Ok();
  auto st = db_.Prepare(fmt::format("SELECT {} FROM jobs WHERE id=?", kJobColumns));
  if (!st) return std::unexpected(st.error());
  for (std::int64_t id : changed) {
    st->Bind(1, id);
    auto row = st->Step();
    if (!row) {
      pending_loaded_ = false;  // read it whole next time
      return std::unexpected(row.error());
    }
    RepointPending(id, *row ? std::optional(ReadJob(*st, &specs_)) : std::nullopt);
    st->Reset();
  }
  return Ok();
}

Result<std::vector<JobRecord>> SqliteStore::PendingJobs() {
  auto shared = SharedPendingJobs();  // the copies are made outside mu_
  if (!shared) return std::unexpected(shared.error());
  std::vector<JobRecord> out;
  out.reserve(shared->size());
  for (const auto& job : *shared) out.push_back(*job);
  return out;
}

Result<PendingQueue> SqliteStore::SharedPendingJobs() {
  std::lock_guard lock(mu_);
  BERTH_RETURN_IF_ERROR(RefreshPending());
  PendingQueue out;
  out.reserve(pending_.size());
  for (const auto& [key, job] : pending_) out.push_back(job);
  return out;
}

Result<std::vector<RunRecord>> SqliteStore::ActiveRuns() {
  std::lock_guard lock(mu_);
  return LoadRuns("state IN ('Starting','Running')", 0);
}

Status SqliteStore::PersistJob(const model::JobUpdate& update) {
  const JobRecord& j = update.job;
  auto st = db_.Prepare(
      "UPDATE jobs SET state=?, reason=?, started_ms=?, finished_ms=?, exit_code=?, signal=?, "
      "failures=?, retry_after_ms=?, attempts=?, policy_version=?, cancel_requested=?, "
      "cancelled_by=? WHERE id=?");
  if (!st) return std::unexpected(st.error());
  auto wide = [](std::optional<std::int32_t> v) {
    return v ? std::optional<std::int64_t>(*v) : std::nullopt;
  };
  BERTH_RETURN_IF_ERROR(st->Bind(1, model::JobStateName(j.state))
                            .Bind(2, ReasonText(j.reason))
                            .Bind(3, j.started_at_ms)
                            .Bind(4, j.finished_at_ms)
                            .Bind(5, wide(j.exit_code))
                            .Bind(6, wide(j.signal))
                            .Bind(7, std::int64_t{j.failures})
                            .Bind(8, j.retry_after_ms)
                            .Bind(9, std::int64_t{j.attempts})
                            .Bind(10, j.policy_version)
                            .Bind(11, std::int64_t{j.cancel_requested ? 1 : 0})
                            .Bind(12, j.cancelled_by)
                            .Bind(13, j.id)
                            .Run());
  NoteJobChanged(j.id);
  for (const auto& e : update.events) {
    BERTH_RETURN_IF_ERROR(AddEvent(j.id, e.time_ms, e.state, e.event, e.message, e.policy_version));
  }
  return Ok();
}

Status SqliteStore::RecordCheckpoint(const std::string& run_id, TimeMs at) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "UPDATE runs SET last_checkpoint_ms=? WHERE run_id=? AND "
      "(last_checkpoint_ms IS NULL OR last_checkpoint_ms < ?)");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, at).Bind(2, run_id).Bind(3, at).Run());
  auto found = db_.Prepare("SELECT 1 FROM runs WHERE run_id=?");
  if (!found) return std::unexpected(found.error());
  found->Bind(1, run_id);
  auto row = found->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return Fail(Code::kNotFound, fmt::format("run {} not found", run_id));
  return Ok();
}

Result<std::optional<RunRecord>> SqliteStore::GetRun(const std::string& run_id) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format("SELECT {} FROM runs WHERE run_id=?", kRunColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, run_id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<RunRecord>{};
  return std::optional<RunRecord>(ReadRun(*st));
}

Result<std::vector<RunUsage>> SqliteStore::FinishedRunsSince(TimeMs since) {
  std::lock_guard lock(mu_);
  const Dialect d = db_.dialect();
  auto st = db_.Prepare(fmt::format(
      "SELECT {}, {}, CASE WHEN r.gpu_share_millis > 0 THEN r.gpu_share_millis "
      "ELSE {} * 1000 END, r.started_ms, r.finished_ms FROM runs r "
      "JOIN jobs j ON j.id = r.job_id WHERE r.finished_ms >= ? AND r.started_ms IS NOT NULL "
      "ORDER BY r.finished_ms, r.run_id",
      SqlJsonText(d, "j.spec", "tenant"), SqlJsonText(d, "j.spec", "queue"),
      SqlJsonArrayLength(d, "r.gpu_indices")));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, since);
  std::vector<RunUsage> out;
  while (true) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    RunUsage u;
    u.tenant = st->Text(0);
    u.queue = st->Text(1);
    u.mgpu = st->Int(2);
    u.started_ms = st->Int(3);
    u.finished_ms = st->Int(4);
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace berth::store
