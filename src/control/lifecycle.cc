#include "control/lifecycle.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "common/failpoint.h"
#include "control/transitions.h"

namespace berth::control {

using model::JobRecord;
using store::JobTransaction;

namespace {

// What one job transaction changed, to announce once it is durable
// (store/change_feed.h): each job written, in its final state, and the
// nodes where a run started holding GPUs or let them go.
struct Written {
  std::vector<JobRecord> jobs;
  std::set<std::string> nodes;
};

// A job transaction that remembers what it wrote.
class Announcing final : public JobTransaction {
 public:
  Announcing(JobTransaction& tx, Written& written) : tx_(tx), written_(written) {}
  Result<std::optional<JobRecord>> Load(std::int64_t id) override {
    auto job = tx_.Load(id);
    if (job && *job) {
      auto& runs = loaded_[id];
      runs.clear();
      for (const auto& r : (*job)->runs) runs[r.run_id] = r.state;
    }
    return job;
  }
  Result<std::optional<std::int64_t>> JobOfRun(const std::string& run_id) override {
    return tx_.JobOfRun(run_id);
  }
  Result<std::vector<std::int64_t>> ActiveJobsOn(const std::string& node) override {
    return tx_.ActiveJobsOn(node);
  }
  Result<std::vector<std::int64_t>> ArrayElements(std::int64_t array_id) override {
    return tx_.ArrayElements(array_id);
  }
  Status Write(const model::JobUpdate& update) override {
    BERTH_RETURN_IF_ERROR(tx_.Write(update));
    JobRecord brief;
    brief.id = update.job.id;
    brief.state = update.job.state;
    brief.spec.tenant = update.job.spec.tenant;
    brief.spec.queue = update.job.spec.queue;
    written_.jobs.push_back(std::move(brief));
    // A new run holds its GPUs from now; an exited one has let them go.
    auto& known = loaded_[update.job.id];
    for (const auto& r : update.job.runs) {
      const auto was = known.find(r.run_id);
      const bool placed = was == known.end();
      const bool freed =
          !placed && was->second != model::RunState::kExited && r.state == model::RunState::kExited;
      if ((placed || freed) && !r.node.empty()) written_.nodes.insert(r.node);
      known[r.run_id] = r.state;
    }
    return Ok();
  }
  // A pending job's reason is not announced: it moves on every pass that
  // changes an estimate, and a watcher reads it with the job.
  Status SetPendingReason(std::int64_t id, const model::Reason& reason) override {
    return tx_.SetPendingReason(id, reason);
  }
  void Record(store::AuditEntry record) override { tx_.Record(std::move(record)); }

 private:
  JobTransaction& tx_;
  Written& written_;
  std::map<std::int64_t, std::map<std::string, model::RunState>> loaded_;
};

// store.UpdateJobs, and once it committed, each job it wrote announced on
// the store's change feed (once per job, in its final state), then each
// node whose GPUs were taken or freed (an "allocation" change: every
// watcher's fleet map, whoever's job it was).
Status Commit(store::JobStore& store, const store::JobTransactionBody& body) {
  Written written;
  auto st = store.UpdateJobs([&](JobTransaction& tx) -> Status {
    written = {};  // a retried body starts again
    Announcing announcing(tx, written);
    return body(announcing);
  });
  store::ChangeFeed* feed = store.change_feed();
  if (!st || feed == nullptr) return st;
  // Each job once, in its final state, in the order of its last write.
  const auto& jobs = written.jobs;
  std::unordered_map<std::int64_t, std::size_t> last_write;
  last_write.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) last_write[jobs[i].id] = i;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    if (last_write[j.id] != i) continue;
    feed->Publish(store::Topic::kJob, std::to_string(j.id), j.spec.tenant, j.spec.queue,
                  std::string(model::JobStateName(j.state)));
  }
  for (const auto& node : written.nodes) {
    feed->Publish(store::Topic::kNode, node, {}, {}, "allocation");
  }
  return st;
}

// The job `id` loaded in `tx`; NotFound when there is none.
Result<JobRecord> MustLoad(JobTransaction& tx, std::int64_t id) {
  auto job = tx.Load(id);
  if (!job) return std::unexpected(job.error());
  if (!*job) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  return std::move(**job);
}

// The job run `run_id` belongs to; NotFound when no run has this id.
Result<JobRecord> LoadByRun(JobTransaction& tx, const std::string& run_id) {
  auto id = tx.JobOfRun(run_id);
  if (!id) return std::unexpected(id.error());
  if (!*id) return Fail(Code::kNotFound, fmt::format("run {} not found", run_id));
  return MustLoad(tx, **id);
}

// Cancels job `id` inside `tx`; returns the job as it was and as the cancel
// left it.
struct Cancelled {
  JobRecord before;
  JobRecord after;
};
Result<Cancelled> CancelIn(JobTransaction& tx, std::int64_t id, const std::string& by, TimeMs now) {
  auto job = MustLoad(tx, id);
  if (!job) return std::unexpected(job.error());
  auto update = control::CancelJob(*job, by, now);
  if (!update) return std::unexpected(update.error());
  BERTH_RETURN_IF_ERROR(tx.Write(*update));
  return Cancelled{std::move(*job), std::move(update->job)};
}

// Applies `decide` to every job with an active run on `node`; returns the
// ids of those it changed.
template <typename Decide>
Result<std::vector<std::int64_t>> StopOnNode(store::JobStore& store, const std::string& node,
                                             Decide decide) {
  std::vector<std::int64_t> jobs;
  auto st = Commit(store, [&](JobTransaction& tx) -> Status {
    jobs.clear();
    auto ids = tx.ActiveJobsOn(node);
    if (!ids) return std::unexpected(ids.error());
    for (auto id : *ids) {
      auto job = tx.Load(id);
      if (!job) return std::unexpected(job.error());
      if (!*job) continue;
      std::optional<model::JobUpdate> update = decide(**job);
      if (!update) continue;
      BERTH_RETURN_IF_ERROR(tx.Write(*update));
      jobs.push_back(id);
    }
    return Ok();
  });
  if (!st) return std::unexpected(st.error());
  return jobs;
}

}  // namespace

Result<JobRecord> CancelJob(store::JobStore& store, std::int64_t id, const std::string& by,
                            TimeMs now, const store::AuditOf<JobRecord, JobRecord>& audit) {
  auto st = Commit(store, [&](JobTransaction& tx) -> Status {
    auto done = CancelIn(tx, id, by, now);
    if (!done) return std::unexpected(done.error());
    if (audit) {
      if (auto record = audit(done->before, done->after)) tx.Record(std::move(*record));
    }
    return Ok();
  });
  if (!st) return std::unexpected(st.error());
  return store.GetJob(id);
}

Result<store::ArrayCancel> CancelArray(store::JobStore& store, std::int64_t array_id,
                                       const std::string& by, TimeMs now,
                                       const store::AuditOf<store::ArrayCancel>& audit) {
  store::ArrayCancel out;
  auto st = Commit(store, [&](JobTransaction& tx) -> Status {
    out = {};
    auto ids = tx.ArrayElements(array_id);
    if (!ids) return std::unexpected(ids.error());
    if (ids->empty()) return Fail(Code::kNotFound, fmt::format("array {} not found", array_id));
    for (std::int64_t id : *ids) {
      auto job = MustLoad(tx, id);
      if (!job) return std::unexpected(job.error());
      out.tenant = job->spec.tenant;
      if (model::IsTerminal(job->state)) continue;
      auto done = CancelIn(tx, id, by, now);
      if (!done) return std::unexpected(done.error());
      ++(done->before.state == model::JobState::kPending ? out.cancelled : out.stopping);
    }
    if (audit) {
      if (auto record = audit(out)) tx.Record(std::move(*record));
    }
    return Ok();
  });
  if (!st) return std::unexpected(st.error());
  return out;
}

Status ApplyPlan(store::JobStore& store, const sched::Plan& plan,
                 const std::vector<store::NodeRecord>& nodes, std::int64_t policy_version,
                 TimeMs now) {
  NodeIndex by_name;
  for (const auto& n : nodes) by_name[n.info.name] = &n.info;
  return Commit(store, [&](JobTransaction& tx) -> Status {
    // Evictions, placements and reasons are one decision: all of it is
    // durable, or none of it.
    for (const auto& e : plan.evictions) {
      auto job = tx.Load(e.job_id);
      if (!job) return std::unexpected(job.error());
      if (!*job) continue;
      std::optional<JobRecord> by;
      if (e.cause == sched::EvictionCause::kMove) {
        auto loaded = tx.Load(e.by_job);
        if (!loaded) return std::unexpected(loaded.error());
        by = std::move(*loaded);
      }
      auto update = EvictJob(**job, e, by ? &*by : nullptr, now);
      if (!update) continue;
      BERTH_RETURN_IF_ERROR(tx.Write(update->victim));
      if (update->by) BERTH_RETURN_IF_ERROR(tx.Write(*update->by));
    }
    if (!plan.evictions.empty()) Failpoint("plan.after_evictions");
    for (const auto& p : plan.placements) {
      auto job = tx.Load(p.job_id);
      if (!job) return std::unexpected(job.error());
      if (!*job) continue;
      auto update = PlaceJob(**job, p, by_name, policy_version, now);
      if (!update) continue;
      BERTH_RETURN_IF_ERROR(tx.Write(*update));
    }
    for (const auto& d : plan.pending) {
      BERTH_RETURN_IF_ERROR(tx.SetPendingReason(d.job_id, d.reason));
    }
    return Ok();
  });
}

Status EvictJobs(store::JobStore& store, const std::vector<sched::Eviction>& evictions,
                 TimeMs now) {
  sched::Plan plan;
  plan.evictions = evictions;
  return ApplyPlan(store, plan, {}, 0, now);
}

Status MarkRunStarted(store::JobStore& store, const std::string& run_id, std::int64_t pid,
                      TimeMs started_at, TimeMs now, std::uint32_t port) {
  (void)now;
  return Commit(store, [&](JobTransaction& tx) -> Status {
    auto job = LoadByRun(tx, run_id);
    if (!job) return std::unexpected(job.error());
    auto update = StartRun(*job, run_id, pid, started_at, port);
    if (!update) return Ok();  // already known
    return tx.Write(update->job);
  });
}

Status MarkRunHealth(store::JobStore& store, const std::string& run_id, bool ready,
                     bool liveness_failed, const std::string& detail, TimeMs at) {
  return Commit(store, [&](JobTransaction& tx) -> Status {
    auto job = LoadByRun(tx, run_id);
    if (!job) return std::unexpected(job.error());
    auto update = RecordRunHealth(*job, run_id, ready, liveness_failed, detail, at);
    if (!update) return Ok();
    return tx.Write(*update);
  });
}

Status AddJobEvent(store::JobStore& store, std::int64_t job_id, const std::string& event,
                   const std::string& message, TimeMs at) {
  return Commit(store, [&](JobTransaction& tx) -> Status {
    auto job = MustLoad(tx, job_id);
    if (!job) return std::unexpected(job.error());
    const model::JobState state = job->state;
    return tx.Write(model::JobUpdate{std::move(*job), {{at, state, event, message, std::nullopt}}});
  });
}

Result<JobRecord> MarkRunExited(store::JobStore& store, const model::RunExit& exit, TimeMs now,
                                const model::Policy* policy) {
  JobRecord after;
  auto st = Commit(store, [&](JobTransaction& tx) -> Status {
    auto job = LoadByRun(tx, exit.run_id);
    if (!job) return std::unexpected(job.error());
    const auto cap = policy == nullptr
                         ? std::nullopt
                         : model::AttemptCapOf(*policy, job->spec.tenant + "/" + job->spec.queue);
    // An exit already recorded changes nothing.
    if (auto update = RecordExit(*job, exit, now, cap)) {
      BERTH_RETURN_IF_ERROR(tx.Write(update->job));
      auto reloaded = MustLoad(tx, job->id);
      if (!reloaded) return std::unexpected(reloaded.error());
      after = std::move(*reloaded);
    } else {
      after = std::move(*job);
    }
    return Ok();
  });
  if (!st) return std::unexpected(st.error());
  return after;
}

Status RequestStop(store::JobStore& store, std::int64_t job_id, model::StopCause why, TimeMs now) {
  (void)now;
  if (why == model::StopCause::kNone || why == model::StopCause::kUnknown) {
    return Fail(Code::kInvalidArgument,
                fmt::format("'{}' is no stop cause", model::StopCauseName(why)));
  }
  return Commit(store, [&](JobTransaction& tx) -> Status {
    auto job = tx.Load(job_id);
    if (!job) return std::unexpected(job.error());
    if (!*job) return Ok();
    if (auto update = StopJob(**job, why)) return tx.Write(*update);
    return Ok();
  });
}

Result<std::vector<std::int64_t>> StopRunsOnGpu(store::JobStore& store, const std::string& node,
                                                std::uint32_t gpu, const std::string& detail,
                                                TimeMs now) {
  return StopOnNode(store, node,
                    [&](const JobRecord& job) { return FailGpu(job, node, gpu, detail, now); });
}

Result<std::vector<std::int64_t>> StopRunsOnNode(store::JobStore& store, const std::string& node,
                                                 TimeMs now) {
  return StopOnNode(store, node, [&](const JobRecord& job) { return DrainJob(job, node, now); });
}

Result<int> RecordJobCheckpoint(store::JobStore& store, std::int64_t id, TimeMs at,
                                const store::AuditOf<JobRecord, int>& audit) {
  int recorded = 0;
  auto st = Commit(store, [&](JobTransaction& tx) -> Status {
    recorded = 0;
    auto job = MustLoad(tx, id);
    if (!job) return std::unexpected(job.error());
    std::uint32_t attempt = 0;
    for (const auto& r : job->runs) attempt = std::max(attempt, r.attempt);
    model::JobUpdate update{*job, {}};
    for (auto& r : update.job.runs) {
      if (r.attempt != attempt || r.state == model::RunState::kExited) continue;
      if (!r.last_checkpoint_ms || *r.last_checkpoint_ms < at) r.last_checkpoint_ms = at;
      ++recorded;
    }
    if (recorded == 0) {
      return Fail(Code::kFailedPrecondition,
                  fmt::format("job {} is {}: only a running job can report a checkpoint", id,
                              model::JobStateName(job->state)));
    }
    BERTH_RETURN_IF_ERROR(tx.Write(update));
    if (audit) {
      if (auto record = audit(*job, recorded)) tx.Record(std::move(*record));
    }
    return Ok();
  });
  if (!st) return std::unexpected(st.error());
  return recorded;
}

Result<store::QuotaRequest> ApproveQuotaRequest(
    store::PolicyStore& store, std::int64_t id, const std::string& by, const std::string& comment,
    TimeMs now, const store::AuditOf<store::QuotaRequest, store::QuotaRequest>& audit) {
  return store.ApproveQuotaRequest(
      id, by, comment,
      [](const model::Policy& active, std::int64_t version, const store::QuotaRequest& request) {
        return ApproveQuota(active, version,
                            {request.id, request.queue, request.resource, request.guaranteed,
                             request.borrow_limit, request.weight, request.lending_limit});
      },
      now, audit);
}

}  // namespace berth::control
