#include "meter/ops_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "model/failure.h"

namespace berth::server {
namespace {

using nlohmann::json;

// How a finished run ended, and its failure class when it failed.
struct RunOutcome {
  std::string outcome;  // succeeded, failed, cancelled, preempted, reclaimed, moved, drained, gang
  std::string failure_class;
};

RunOutcome Classify(const store::RunRecord& r) {
  using model::StopCause;
  const StopCause s = r.stopped_for;
  if (model::IsEviction(s) || s == StopCause::kCancelled || s == StopCause::kDrained ||
      s == StopCause::kGang) {
    return {std::string(model::StopCauseName(s)), ""};
  }
  std::string cls = r.failure_class;
  if (cls.empty()) {
    if (s == StopCause::kMaxRuntime) {
      cls = model::FailureClassName(model::FailureClass::kMaxRuntime);
    } else if (store::RunLost(s)) {
      cls = model::FailureClassName(model::FailureClass::kNodeLost);
    } else if (s == StopCause::kGpuError) {
      cls = model::FailureClassName(model::FailureClass::kGpuHardware);
    } else if (!r.start_error.empty()) {
      cls = model::FailureClassName(model::FailureClass::kCommandNotFound);
    } else if (r.exit_code.value_or(0) != 0 || r.signal.value_or(0) != 0) {
      cls = model::FailureClassName(model::FailureClass::kUserCode);
    }
  }
  if (cls.empty()) return {"succeeded", ""};
  return {"failed", cls};
}

std::int64_t RunMgpu(const store::RunRecord& r) {
  if (r.gpu_share_millis > 0) return r.gpu_share_millis;
  return static_cast<std::int64_t>(r.gpu_indices.size()) * 1000;
}

// The job an audit object names: job/N, or array/N (its first job).
std::optional<std::int64_t> JobIdOf(const std::string& object) {
  const std::size_t prefix = object.starts_with("job/") ? 4 : object.starts_with("array/") ? 6 : 0;
  if (prefix == 0) return std::nullopt;
  std::int64_t id = 0;
  const char* b = object.data() + prefix;
  const char* e = object.data() + object.size();
  auto [p, ec] = std::from_chars(b, e, id);
  if (ec != std::errc() || p != e) return std::nullopt;
  return id;
}

void AddMeasured(OpsMeasured& m, const model::UsageRecord& r, const store::UtilSummary& s) {
  if (s.samples <= 0) return;
  ++m.runs_sampled;
  m.sampled_mgpu_ms += r.mgpu_ms;
  // Allocated time weighted by the run's average utilization, floored.
  const auto used = static_cast<model::Int128>(r.mgpu_ms) * s.util_sum /
                    (static_cast<model::Int128>(s.samples) * 100);
  m.used_mgpu_ms += static_cast<std::int64_t>(used);
  m.samples += s.samples;
  m.util_sum += s.util_sum;
  m.memory_used_sum += s.memory_used_sum;
  m.memory_capacity_sum += static_cast<std::uint64_t>(s.samples) * s.memory_total_bytes;
}

double Ratio(std::int64_t num, std::int64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

double Hours(std::int64_t mgpu_ms) {
  return static_cast<double>(mgpu_ms) / static_cast<double>(model::kMgpuMsPerGpuHour);
}

json MeasuredJson(const std::optional<OpsMeasured>& m, std::int64_t allocated) {
  if (!m) return nullptr;
  return {{"runs_sampled", m->runs_sampled},
          {"sampled_mgpu_ms", m->sampled_mgpu_ms},
          {"used_mgpu_ms", m->used_mgpu_ms},
          {"used_gpu_hours", Hours(m->used_mgpu_ms)},
          {"samples", m->samples},
          {"util_sum", m->util_sum},
          {"memory_used_sum", m->memory_used_sum},
          {"memory_capacity_sum", m->memory_capacity_sum},
          // used / allocated of the sampled runs; the samples' plain average.
          {"gpu_utilization_pct", 100.0 * Ratio(m->used_mgpu_ms, m->sampled_mgpu_ms)},
          {"avg_sample_util_pct", Ratio(m->util_sum, m->samples)},
          {"gpu_memory_utilization_pct", m->memory_capacity_sum == 0
                                             ? 0.0
                                             : 100.0 * static_cast<double>(m->memory_used_sum) /
                                                   static_cast<double>(m->memory_capacity_sum)},
          {"unsampled_mgpu_ms", allocated - m->sampled_mgpu_ms}};
}

// {"reclaimed": {"lost_mgpu_ms": ..., "lost_gpu_hours": ...}, ...}
json OpsLostByKindJson(const std::map<std::string, std::int64_t>& by_kind) {
  json out = json::object();
  for (const auto& [kind, mgpu_ms] : by_kind) {
    out[kind] = {{"lost_mgpu_ms", mgpu_ms}, {"lost_gpu_hours", Hours(mgpu_ms)}};
  }
  return out;
}

json FiguresJson(const OpsFigures& f, const OpsReport& r) {
  const OpsWait& w = f.wait;
  json j{{"jobs_submitted", f.jobs_submitted},
         {"jobs_failed", f.jobs_failed},
         {"allocated_mgpu_ms", f.allocated_mgpu_ms},
         {"allocated_gpu_hours", Hours(f.allocated_mgpu_ms)},
         {"cost_micros", f.cost_micros},
         {"cost", model::FormatMoney(f.cost_micros)},
         {"records", f.records},
         {"measured", MeasuredJson(f.measured, f.allocated_mgpu_ms)},
         {"wait",
          {{"started", w.started},
           {"total_wait_ms", w.total_wait_ms},
           {"avg_wait_ms", w.started == 0 ? 0 : w.total_wait_ms / w.started},
           {"p95_wait_ms", w.p95_wait_ms},
           {"max_wait_ms", w.max_wait_ms},
           {"waiting", w.waiting},
           {"oldest_wait_ms", w.oldest_wait_ms},
           {"oldest_job_id", w.oldest_job_id == 0 ? json(nullptr) : json(w.oldest_job_id)}}},
         {"runs_finished", f.runs_finished},
         {"outcomes", f.outcomes},
         {"runs_failed", f.runs_failed},
         {"failure_rate_pct", 100.0 * Ratio(f.runs_failed, f.runs_finished)},
         {"failures_by_class", f.failures_by_class},
         {"evictions", f.evictions},
         {"lost_mgpu_ms", f.lost_mgpu_ms},
         {"lost_gpu_hours", Hours(f.lost_mgpu_ms)},
         {"lost_by_kind", OpsLostByKindJson(f.lost_mgpu_ms_by_kind)},
         {"interventions", f.interventions}};
  if (r.fleet_visible && r.capacity_mgpu_ms > 0) {
    j["allocation_pct"] = 100.0 * Ratio(f.allocated_mgpu_ms, r.capacity_mgpu_ms);
  } else {
    j["allocation_pct"] = nullptr;
  }
  if (!f.tenant.empty()) j["tenant"] = f.tenant;
  return j;
}

// Builds one report over the inputs: the report so far, the tenants' figures
// by name, and what one part of the inputs tells another.
class OpsBuilder {
 public:
  explicit OpsBuilder(const OpsInputs& in);

  // Allocation, cost and measured use: from the usage records. A record not
  // clipped to the window is an invalid argument.
  Status AddRecords();
  // Waits, outcomes and evictions: from the jobs and their runs.
  void AddJobs();
  // Manual interventions: from the audit trail.
  void AddInterventions();
  // Each service's requests (those of services with no replica in the
  // window too: a service held at zero still answered).
  void AddTraffic(const std::vector<OpsTraffic>& traffic);
  OpsReport Finish() &&;

 private:
  OpsFigures& Tenant(const std::string& name);
  // The figures a record or run of (tenant, service) adds to: the total,
  // its tenant's, and for a service's replica the inference total and the
  // service's ("" service: a job).
  std::vector<OpsFigures*> Targets(const std::string& tenant, const std::string& service);
  // A job still waiting at the window's end counts, and may be the oldest.
  void AddWaiting(const store::JobRecord& job);
  // A run that finished in the window: its outcome, and its eviction if it was one.
  void AddFinishedRun(const store::JobRecord& job, const store::RunRecord& run);
  // The evicted run's GPU-time lost since its last checkpoint (else its start).
  OpsEviction EvictionOf(const store::JobRecord& job, const store::RunRecord& run) const;
  // The wait figures of the jobs that first started in the window.
  void AddWaits(std::map<OpsFigures*, std::vector<std::int64_t>>& waits);

  const OpsInputs& in_;
  OpsReport rep_;
  std::map<std::string, OpsFigures> tenants_;
  std::map<std::pair<std::string, std::string>, OpsServiceFigures> services_;
  std::map<std::string, std::int64_t> record_mgpu_;       // run id -> mGPU
  std::map<std::int64_t, const store::JobRecord*> jobs_;  // by id
};

OpsBuilder::OpsBuilder(const OpsInputs& in) : in_(in) {
  rep_.from = in.from;
  rep_.to = in.to;
  rep_.currency = in.currency;
  rep_.fleet_visible = in.fleet_visible;
  rep_.measured = in.utilization.has_value();
  if (in.fleet_visible) {
    rep_.gpus = in.gpus;
    rep_.capacity_mgpu_ms = in.capacity_mgpu_ms;
    if (in.utilization) rep_.fleet = in.utilization->fleet;
    if (in.alerts_raised_ms) {
      rep_.alerts_opened = std::count_if(in.alerts_raised_ms->begin(), in.alerts_raised_ms->end(),
                                         [&in](TimeMs t) { return t >= in.from && t < in.to; });
    }
  }
  if (rep_.measured) {
    rep_.total.measured = OpsMeasured{};
    rep_.inference.measured = OpsMeasured{};
  }
}

std::vector<OpsFigures*> OpsBuilder::Targets(const std::string& tenant,
                                             const std::string& service) {
  std::vector<OpsFigures*> out{&rep_.total, &Tenant(tenant)};
  if (!service.empty()) {
    OpsServiceFigures& s = services_[{tenant, service}];
    s.tenant = tenant;
    s.service = service;
    s.figures.tenant = tenant;
    if (rep_.measured && !s.figures.measured) s.figures.measured = OpsMeasured{};
    out.push_back(&rep_.inference);
    out.push_back(&s.figures);
  }
  return out;
}

// A job's service, "" for a job that is not a replica.
std::string ServiceOf(const store::JobRecord& job) {
  return job.spec.service ? job.spec.service->name : std::string();
}

OpsFigures& OpsBuilder::Tenant(const std::string& name) {
  OpsFigures& f = tenants_[name];
  f.tenant = name;
  if (rep_.measured && !f.measured) f.measured = OpsMeasured{};
  return f;
}

Status OpsBuilder::AddRecords() {
  for (const auto& r : in_.records) {
    if (r.start_ms < in_.from || r.end_ms > in_.to) {
      return std::unexpected(
          Error{Code::kInvalidArgument,
                fmt::format("usage record {} [{}, {}) is not clipped to the window", r.run_id,
                            r.start_ms, r.end_ms),
                "records"});
    }
    record_mgpu_[r.run_id] = r.mgpu;
    for (OpsFigures* f : Targets(r.tenant, r.service)) {
      f->allocated_mgpu_ms += r.mgpu_ms;
      f->cost_micros += r.cost_micros;
      ++f->records;
      if (in_.utilization) {
        auto it = in_.utilization->runs.find(r.run_id);
        if (it != in_.utilization->runs.end()) AddMeasured(*f->measured, r, it->second);
      }
    }
  }
  return Ok();
}

void OpsBuilder::AddJobs() {
  std::map<OpsFigures*, std::vector<std::int64_t>> waits;
  for (const auto& job : in_.jobs) {
    jobs_[job.id] = &job;
    const bool submitted_in = job.submitted_at_ms >= in_.from && job.submitted_at_ms < in_.to;
    const bool failed_in = job.state == model::JobState::kFailed && job.finished_at_ms &&
                           *job.finished_at_ms >= in_.from && *job.finished_at_ms < in_.to;
    if (submitted_in || failed_in) {
      for (OpsFigures* f : Targets(job.spec.tenant, ServiceOf(job))) {
        f->jobs_submitted += submitted_in ? 1 : 0;
        f->jobs_failed += failed_in ? 1 : 0;
      }
    }
    std::optional<TimeMs> first_start;
    for (const auto& run : job.runs) {
      if (run.started_at_ms && (!first_start || *run.started_at_ms < *first_start)) {
        first_start = run.started_at_ms;
      }
    }
    if (first_start && *first_start >= in_.from && *first_start < in_.to) {
      const std::int64_t wait = std::max<std::int64_t>(0, *first_start - job.submitted_at_ms);
      for (OpsFigures* f : Targets(job.spec.tenant, ServiceOf(job))) waits[f].push_back(wait);
    }
    const bool started_by_end = first_start && *first_start < in_.to;
    const bool ended_by_end = job.finished_at_ms && *job.finished_at_ms < in_.to;
    if (job.submitted_at_ms < in_.to && !started_by_end && !ended_by_end) AddWaiting(job);
    for (const auto& run : job.runs) {
      if (!run.finished_at_ms || *run.finished_at_ms < in_.from || *run.finished_at_ms >= in_.to) {
        continue;
      }
      AddFinishedRun(job, run);
    }
  }
  AddWaits(waits);
  std::sort(rep_.evictions.begin(), rep_.evictions.end(),
            [](const OpsEviction& a, const OpsEviction& b) {
              return std::tie(a.time_ms, a.run_id) < std::tie(b.time_ms, b.run_id);
            });
}

void OpsBuilder::AddWaiting(const store::JobRecord& job) {
  for (OpsFigures* f : Targets(job.spec.tenant, ServiceOf(job))) {
    ++f->wait.waiting;
    const std::int64_t w = in_.to - job.submitted_at_ms;
    if (w > f->wait.oldest_wait_ms || f->wait.oldest_job_id == 0) {
      f->wait.oldest_wait_ms = w;
      f->wait.oldest_job_id = job.id;
    }
  }
}

void OpsBuilder::AddFinishedRun(const store::JobRecord& job, const store::RunRecord& run) {
  const RunOutcome o = Classify(run);
  OpsEviction ev;
  if (model::IsEviction(run.stopped_for)) {
    ev = EvictionOf(job, run);
    rep_.evictions.push_back(ev);
  }
  for (OpsFigures* f : Targets(job.spec.tenant, ServiceOf(job))) {
    ++f->runs_finished;
    ++f->outcomes[o.outcome];
    if (o.outcome == "failed") {
      ++f->runs_failed;
      ++f->failures_by_class[o.failure_class];
    }
    if (!ev.kind.empty()) {
      ++f->evictions[ev.kind];
      f->lost_mgpu_ms += ev.lost_mgpu_ms;
      f->lost_mgpu_ms_by_kind[ev.kind] += ev.lost_mgpu_ms;
    }
  }
}

OpsEviction OpsBuilder::EvictionOf(const store::JobRecord& job, const store::RunRecord& run) const {
  OpsEviction ev;
  ev.time_ms = *run.finished_at_ms;
  ev.run_id = run.run_id;
  ev.job_id = job.id;
  ev.job_name = job.spec.name;
  ev.tenant = job.spec.tenant;
  ev.kind = model::StopCauseName(run.stopped_for);
  auto m = record_mgpu_.find(run.run_id);
  ev.mgpu = m != record_mgpu_.end() ? m->second : RunMgpu(run);
  TimeMs since = run.started_at_ms.value_or(*run.finished_at_ms);
  if (run.last_checkpoint_ms && *run.last_checkpoint_ms > since &&
      *run.last_checkpoint_ms <= *run.finished_at_ms) {
    since = *run.last_checkpoint_ms;
    ev.from_checkpoint = true;
  }
  ev.lost_from_ms = std::max(since, in_.from);
  ev.lost_mgpu_ms = ev.mgpu * (*run.finished_at_ms - ev.lost_from_ms);
  return ev;
}

void OpsBuilder::AddWaits(std::map<OpsFigures*, std::vector<std::int64_t>>& waits) {
  for (auto& [figures, list] : waits) {
    OpsFigures& f = *figures;
    std::sort(list.begin(), list.end());
    f.wait.started = static_cast<std::int64_t>(list.size());
    for (auto w : list) f.wait.total_wait_ms += w;
    // Nearest rank: the smallest wait at or above 95% of the jobs.
    const std::size_t rank = (list.size() * 95 + 99) / 100;
    f.wait.p95_wait_ms = list[rank - 1];
    f.wait.max_wait_ms = list.back();
  }
}

void OpsBuilder::AddInterventions() {
  for (const auto& e : in_.audit) {
    if (e.time_ms < in_.from || e.time_ms >= in_.to) continue;
    std::string submitter;
    if (auto id = JobIdOf(e.object)) {
      if (auto it = jobs_.find(*id); it != jobs_.end()) submitter = it->second->submitted_by;
    }
    if (!IsIntervention(e, submitter)) continue;
    if (!in_.fleet_visible && e.tenant.empty()) continue;
    rep_.interventions.push_back({e.time_ms, e.actor, e.action, e.object, e.tenant});
    ++rep_.interventions_by_action[e.action];
    ++rep_.total.interventions;
    if (!e.tenant.empty()) ++Tenant(e.tenant).interventions;
  }
  std::stable_sort(
      rep_.interventions.begin(), rep_.interventions.end(),
      [](const OpsIntervention& a, const OpsIntervention& b) { return a.time_ms < b.time_ms; });
}

void OpsBuilder::AddTraffic(const std::vector<OpsTraffic>& traffic) {
  for (const OpsTraffic& t : traffic) {
    OpsServiceFigures& s = services_[{t.tenant, t.service}];
    s.tenant = t.tenant;
    s.service = t.service;
    s.figures.tenant = t.tenant;
    if (rep_.measured && !s.figures.measured) s.figures.measured = OpsMeasured{};
    s.traffic = t;
  }
}

OpsReport OpsBuilder::Finish() && {
  for (auto& [name, f] : tenants_) rep_.tenants.push_back(std::move(f));
  for (auto& [key, s] : services_) rep_.services.push_back(std::move(s));
  return std::move(rep_);
}

}  // namespace

bool IsIntervention(const store::AuditEntry& e, const std::string& submitter) {
  if (e.outcome != "ok") return false;
  static const std::set<std::string, std::less<>> kAdmin{
      "node.cordon",  "node.drain",      "node.uncordon", "gpu.cordon",   "gpu.uncordon",
      "policy.apply", "policy.rollback", "quota.approve", "quota.reject", "price.apply",
      "budget.set",   "budget.delete",   "alert.resolve"};
  if (kAdmin.contains(e.action)) return true;
  return (e.action == "job.cancel" || e.action == "array.cancel") && !e.actor.empty() &&
         e.actor != submitter;
}

Result<OpsReport> BuildOpsReport(const OpsInputs& in) {
  if (in.to <= in.from) {
    return std::unexpected(Error{
        Code::kInvalidArgument,
        fmt::format("the window is empty: to ({}) must be after from ({})", in.to, in.from), "to"});
  }
  OpsBuilder builder(in);
  BERTH_RETURN_IF_ERROR(builder.AddRecords());
  builder.AddJobs();
  builder.AddInterventions();
  builder.AddTraffic(in.traffic);
  return std::move(builder).Finish();
}

json OpsReportJson(const OpsReport& r) {
  json tenants = json::array();
  for (const auto& t : r.tenants) tenants.push_back(FiguresJson(t, r));
  json services = json::array();
  for (const auto& s : r.services) {
    json j = FiguresJson(s.figures, r);
    j["service"] = s.service;
    j["requests"] = nullptr;
    if (s.traffic) {
      const OpsTraffic& t = *s.traffic;
      j["requests"] = json{{"requests", t.requests},
                           {"responses_2xx", t.responses_2xx},
                           {"responses_4xx", t.responses_4xx},
                           {"responses_5xx", t.responses_5xx},
                           {"held", t.held},
                           {"p50_ms", t.p50_ms},
                           {"p95_ms", t.p95_ms},
                           {"p99_ms", t.p99_ms},
                           {"max_ms", t.max_ms},
                           {"slo_windows", t.slo_windows},
                           {"slo_windows_met", t.slo_windows_met}};
    }
    services.push_back(std::move(j));
  }
  json inference = FiguresJson(r.inference, r);
  inference["services"] = std::move(services);
  json evictions = json::array();
  for (const auto& e : r.evictions) {
    evictions.push_back({{"time_ms", e.time_ms},
                         {"run_id", e.run_id},
                         {"job_id", e.job_id},
                         {"job_name", e.job_name},
                         {"tenant", e.tenant},
                         {"kind", e.kind},
                         {"mgpu", e.mgpu},
                         {"lost_from_ms", e.lost_from_ms},
                         {"lost_since", e.from_checkpoint ? "checkpoint" : "start"},
                         {"lost_mgpu_ms", e.lost_mgpu_ms},
                         {"lost_gpu_hours", Hours(e.lost_mgpu_ms)}});
  }
  json interventions = json::array();
  for (const auto& i : r.interventions) {
    interventions.push_back({{"time_ms", i.time_ms},
                             {"actor", i.actor},
                             {"action", i.action},
                             {"object", i.object},
                             {"tenant", i.tenant}});
  }
  json fleet = nullptr;
  if (r.fleet_visible) {
    fleet = {{"gpus", r.gpus},
             {"capacity_mgpu_ms", r.capacity_mgpu_ms},
             {"capacity_gpu_hours", Hours(r.capacity_mgpu_ms)},
             {"alerts_opened", r.alerts_opened ? json(*r.alerts_opened) : json(nullptr)},
             {"measured", nullptr}};
    if (r.fleet) {
      const store::UtilSummary& s = *r.fleet;
      fleet["measured"] = {
          {"samples", s.samples},
          {"util_sum", s.util_sum},
          {"avg_util_pct", Ratio(s.util_sum, s.samples)},
          {"memory_used_sum", s.memory_used_sum},
          {"memory_total_bytes", s.memory_total_bytes},
          {"avg_memory_utilization_pct",
           s.samples == 0 || s.memory_total_bytes == 0
               ? 0.0
               : 100.0 * static_cast<double>(s.memory_used_sum) /
                     (static_cast<double>(s.samples) * static_cast<double>(s.memory_total_bytes))}};
    }
  }
  return {{"from_ms", r.from},
          {"to_ms", r.to},
          {"currency", r.currency},
          {"measured", r.measured},
          {"fleet", fleet},
          {"total", FiguresJson(r.total, r)},
          {"tenants", tenants},
          {"inference", inference},
          {"evictions", evictions},
          {"interventions_by_action", r.interventions_by_action},
          {"interventions", interventions}};
}

}  // namespace berth::server
