// BuildOpsReport over constructed inputs: exact allocation, cost and
// per-tenant split; the nearest-rank p95 of queue wait; failure rate and
// failures by class; GPU-hours lost to evictions since the last checkpoint
// (or the start); only admin actions counted as interventions; measured
// utilization weighted by allocation; fleet figures hidden from members.
#include "meter/ops_report.h"

#include <gtest/gtest.h>

namespace berth::server {
namespace {

constexpr TimeMs kFrom = 1'000'000;
constexpr TimeMs kTo = kFrom + 3'600'000;  // a one-hour window

model::UsageRecord Record(std::string run_id, std::string tenant, std::int64_t mgpu, TimeMs start,
                          TimeMs end, std::int64_t cost) {
  model::UsageRecord r;
  r.run_id = std::move(run_id);
  r.tenant = std::move(tenant);
  r.mgpu = mgpu;
  r.start_ms = start;
  r.end_ms = end;
  r.mgpu_ms = mgpu * (end - start);
  r.cost_micros = cost;
  return r;
}

store::RunRecord MakeRun(std::string id, std::uint32_t gpus, std::optional<TimeMs> start,
                         std::optional<TimeMs> end) {
  store::RunRecord r;
  r.run_id = std::move(id);
  for (std::uint32_t i = 0; i < gpus; ++i) r.gpu_indices.push_back(i);
  r.started_at_ms = start;
  r.finished_at_ms = end;
  if (end) r.exit_code = 0;
  return r;
}

store::JobRecord Job(std::int64_t id, std::string tenant, TimeMs submitted,
                     std::vector<store::RunRecord> runs, std::string by = "alice") {
  store::JobRecord j;
  j.id = id;
  j.spec.name = "job" + std::to_string(id);
  j.spec.tenant = std::move(tenant);
  j.submitted_at_ms = submitted;
  j.submitted_by = std::move(by);
  j.runs = std::move(runs);
  return j;
}

store::AuditEntry Audit(TimeMs t, std::string actor, std::string action, std::string object,
                        std::string tenant = "", std::string outcome = "ok") {
  store::AuditEntry e;
  e.time_ms = t;
  e.actor = std::move(actor);
  e.action = std::move(action);
  e.object = std::move(object);
  e.tenant = std::move(tenant);
  e.outcome = std::move(outcome);
  return e;
}

const OpsFigures& Tenant(const OpsReport& r, const std::string& name) {
  for (const auto& t : r.tenants) {
    if (t.tenant == name) return t;
  }
  ADD_FAILURE() << "no tenant " << name;
  static OpsFigures none;
  return none;
}

OpsInputs Base() {
  OpsInputs in;
  in.from = kFrom;
  in.to = kTo;
  in.gpus = 16;
  in.capacity_mgpu_ms = 16 * 1000 * (kTo - kFrom);
  in.currency = "EUR";
  return in;
}

TEST(OpsReportTest, AllocationAndCostAreExactSumsSplitByTenant) {
  OpsInputs in = Base();
  in.records.push_back(Record("1.0.0", "red", 2000, kFrom, kFrom + 600'000, 1'234'567));
  in.records.push_back(Record("2.0.0", "red", 500, kFrom + 10, kFrom + 20, 7));
  in.records.push_back(Record("3.0.0", "blue", 8000, kFrom, kTo, 99'000'001));
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->total.allocated_mgpu_ms, 2000LL * 600'000 + 500 * 10 + 8000LL * 3'600'000);
  EXPECT_EQ(r->total.cost_micros, 1'234'567 + 7 + 99'000'001);
  ASSERT_EQ(r->tenants.size(), 2u);
  EXPECT_EQ(r->tenants[0].tenant, "blue");  // sorted by name
  EXPECT_EQ(Tenant(*r, "red").allocated_mgpu_ms, 2000LL * 600'000 + 500 * 10);
  EXPECT_EQ(Tenant(*r, "red").cost_micros, 1'234'574);
  EXPECT_EQ(Tenant(*r, "red").records, 2);
  EXPECT_EQ(Tenant(*r, "blue").cost_micros, 99'000'001);
  EXPECT_FALSE(r->measured);
  EXPECT_FALSE(r->total.measured.has_value());
  const auto j = OpsReportJson(*r);
  EXPECT_EQ(j["currency"], "EUR");
  EXPECT_EQ(j["fleet"]["capacity_mgpu_ms"], 16 * 1000 * 3'600'000LL);
  EXPECT_TRUE(j["total"]["measured"].is_null());
  // blue held 8 of 16 GPUs for the whole window: 50%.
  EXPECT_DOUBLE_EQ(j["tenants"][0]["allocation_pct"].get<double>(), 50.0);
}

TEST(OpsReportTest, P95IsTheNearestRankAndWaitingJobsCountUntilTheEnd) {
  OpsInputs in = Base();
  // 20 jobs started in the window, waits 1..20 s: p95 is the 19th smallest.
  for (int i = 1; i <= 20; ++i) {
    const TimeMs start = kFrom + 100'000 + i;
    in.jobs.push_back(Job(i, i % 2 ? "red" : "blue", start - i * 1000,
                          {MakeRun(std::to_string(i) + ".0.0", 1, start, std::nullopt)}));
  }
  // Started before the window: not in the wait figures.
  in.jobs.push_back(Job(30, "red", kFrom - 5000, {MakeRun("30.0.0", 1, kFrom - 1, kFrom + 5)}));
  // Still waiting at the end (submitted in and before the window).
  in.jobs.push_back(Job(31, "red", kFrom - 60'000, {}));
  in.jobs.push_back(Job(32, "blue", kTo - 1000, {}));
  // Started only after the window ended: waiting at its end.
  in.jobs.push_back(Job(33, "blue", kTo - 2000, {MakeRun("33.0.0", 1, kTo + 10, std::nullopt)}));
  // Cancelled while pending, before the end: not waiting.
  auto cancelled = Job(34, "red", kFrom, {});
  cancelled.finished_at_ms = kFrom + 10;
  in.jobs.push_back(cancelled);
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->total.wait.started, 20);
  EXPECT_EQ(r->total.wait.total_wait_ms, 210'000);  // 1 + ... + 20 seconds
  EXPECT_EQ(r->total.wait.p95_wait_ms, 19'000);
  EXPECT_EQ(r->total.wait.max_wait_ms, 20'000);
  EXPECT_EQ(r->total.wait.waiting, 3);
  EXPECT_EQ(r->total.wait.oldest_wait_ms, kTo - (kFrom - 60'000));
  EXPECT_EQ(r->total.wait.oldest_job_id, 31);
  // red: the odd waits 1, 3, ..., 19 s; ceil(0.95 x 10) = 10th: 19 s.
  EXPECT_EQ(Tenant(*r, "red").wait.started, 10);
  EXPECT_EQ(Tenant(*r, "red").wait.p95_wait_ms, 19'000);
  EXPECT_EQ(Tenant(*r, "red").wait.waiting, 1);
  EXPECT_EQ(Tenant(*r, "blue").wait.waiting, 2);
  EXPECT_EQ(Tenant(*r, "blue").wait.oldest_job_id, 33);
  // A requeued job's wait is to its first start, not its latest.
  OpsInputs again = Base();
  again.jobs.push_back(Job(1, "red", kFrom,
                           {MakeRun("1.0.0", 1, kFrom + 4000, kFrom + 9000),
                            MakeRun("1.0.1", 1, kFrom + 60'000, std::nullopt)}));
  auto r2 = BuildOpsReport(again);
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->total.wait.p95_wait_ms, 4000);
}

TEST(OpsReportTest, OutcomesFailureRateAndClasses) {
  OpsInputs in = Base();
  auto failed = MakeRun("1.0.0", 1, kFrom, kFrom + 10);
  failed.exit_code = 1;
  failed.failure_class = "gpu_out_of_memory";
  auto plain_fail = MakeRun("2.0.0", 1, kFrom, kFrom + 10);
  plain_fail.exit_code = 3;  // no class recorded: user_code
  auto timed_out = MakeRun("3.0.0", 1, kFrom, kFrom + 10);
  timed_out.stopped_for = model::StopCause::kMaxRuntime;
  timed_out.signal = 15;
  auto cancelled = MakeRun("4.0.0", 1, kFrom, kFrom + 10);
  cancelled.stopped_for = model::StopCause::kCancelled;
  cancelled.signal = 15;
  auto before = MakeRun("5.0.0", 1, kFrom - 100, kFrom - 1);  // ended before the window
  before.exit_code = 1;
  in.jobs.push_back(Job(1, "red", kFrom, {failed, plain_fail}));
  in.jobs.push_back(Job(2, "blue", kFrom, {timed_out, cancelled, before}));
  in.jobs.push_back(
      Job(3, "blue", kFrom,
          {MakeRun("6.0.0", 1, kFrom, kFrom + 5), MakeRun("7.0.0", 1, kFrom, std::nullopt)}));
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->total.runs_finished, 5);
  EXPECT_EQ(r->total.runs_failed, 3);
  EXPECT_EQ(r->total.outcomes.at("succeeded"), 1);
  EXPECT_EQ(r->total.outcomes.at("cancelled"), 1);
  EXPECT_EQ(r->total.failures_by_class,
            (std::map<std::string, std::int64_t>{
                {"gpu_out_of_memory", 1}, {"user_code", 1}, {"max_runtime", 1}}));
  EXPECT_EQ(Tenant(*r, "red").runs_failed, 2);
  EXPECT_EQ(Tenant(*r, "blue").runs_finished, 3);
  EXPECT_EQ(Tenant(*r, "blue").runs_failed, 1);
  EXPECT_DOUBLE_EQ(OpsReportJson(*r)["total"]["failure_rate_pct"].get<double>(), 60.0);
}

TEST(OpsReportTest, EvictionsLoseAllocatedTimeSinceTheCheckpointOrTheStart) {
  OpsInputs in = Base();
  auto preempted = MakeRun("1.0.0", 4, kFrom + 1000, kFrom + 61'000);
  preempted.stopped_for = model::StopCause::kPreempted;
  preempted.last_checkpoint_ms = kFrom + 41'000;  // 20 s lost on 4 GPUs
  auto reclaimed = MakeRun("2.0.0", 2, kFrom + 1000, kFrom + 11'000);
  reclaimed.stopped_for = model::StopCause::kReclaimed;  // no checkpoint: 10 s on 2 GPUs
  auto early = MakeRun("3.0.0", 1, kFrom - 30'000, kFrom + 5000);
  early.stopped_for = model::StopCause::kMoved;  // started before the window: lost from `from` only
  auto drained = MakeRun("4.0.0", 1, kFrom, kFrom + 5000);
  drained.stopped_for = model::StopCause::kDrained;  // an admin's drain: not an eviction
  in.jobs.push_back(Job(1, "red", kFrom, {preempted}));
  in.jobs.push_back(Job(2, "blue", kFrom, {reclaimed, early, drained}));
  // A slice: the record's mGPU counts, not the run's GPU list.
  auto slice = MakeRun("5.0.0", 1, kFrom, kFrom + 1000);
  slice.stopped_for = model::StopCause::kPreempted;
  in.jobs.push_back(Job(3, "blue", kFrom, {slice}));
  in.records.push_back(Record("5.0.0", "blue", 250, kFrom, kFrom + 1000, 1));
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->evictions.size(), 4u);
  EXPECT_EQ(Tenant(*r, "red").lost_mgpu_ms, 4000 * 20'000);
  EXPECT_EQ(Tenant(*r, "red").evictions.at("preempted"), 1);
  EXPECT_EQ(Tenant(*r, "blue").lost_mgpu_ms, 2000 * 10'000 + 1000 * 5000 + 250 * 1000);
  EXPECT_EQ(r->total.lost_mgpu_ms, 4000 * 20'000 + 2000 * 10'000 + 1000 * 5000 + 250 * 1000);
  EXPECT_EQ(r->total.evictions, (std::map<std::string, std::int64_t>{
                                    {"preempted", 2}, {"reclaimed", 1}, {"moved", 1}}));
  EXPECT_EQ(r->total.outcomes.at("drained"), 1);
  EXPECT_EQ(r->total.runs_failed, 0);
  // Per tenant, what each kind of eviction wasted: blue's borrowed GPUs
  // reclaimed cost it 10 s on 2 GPUs, apart from its move and its slice.
  EXPECT_EQ(Tenant(*r, "blue").lost_mgpu_ms_by_kind,
            (std::map<std::string, std::int64_t>{
                {"reclaimed", 2000 * 10'000}, {"moved", 1000 * 5000}, {"preempted", 250 * 1000}}));
  EXPECT_EQ(Tenant(*r, "red").lost_mgpu_ms_by_kind,
            (std::map<std::string, std::int64_t>{{"preempted", 4000 * 20'000}}));
  EXPECT_EQ(r->total.lost_mgpu_ms_by_kind.at("preempted"), 4000 * 20'000 + 250 * 1000);
  const auto j = OpsReportJson(*r);
  bool saw_blue = false;
  for (const auto& t : j["tenants"]) {
    if (t["tenant"] != "blue") continue;
    saw_blue = true;
    EXPECT_EQ(t["lost_by_kind"]["reclaimed"]["lost_mgpu_ms"], 2000 * 10'000);
    EXPECT_NEAR(t["lost_by_kind"]["reclaimed"]["lost_gpu_hours"].get<double>(),
                2000.0 * 10'000 / 3.6e9, 1e-12);
  }
  EXPECT_TRUE(saw_blue);
  bool saw_checkpoint = false;
  for (const auto& e : j["evictions"]) {
    if (e["run_id"] == "1.0.0") {
      EXPECT_EQ(e["lost_since"], "checkpoint");
      saw_checkpoint = true;
    } else {
      EXPECT_EQ(e["lost_since"], "start");
    }
  }
  EXPECT_TRUE(saw_checkpoint);
}

TEST(OpsReportTest, OnlySucceededAdminActionsAreInterventions) {
  OpsInputs in = Base();
  in.jobs.push_back(Job(7, "red", kFrom, {}, "alice"));
  in.audit = {
      Audit(kFrom + 1, "admin", "node.cordon", "node/a"),
      Audit(kFrom + 2, "admin", "node.drain", "node/a"),
      Audit(kFrom + 3, "alice", "job.submit", "job/7", "red"),
      Audit(kFrom + 4, "alice", "job.cancel", "job/7", "red"),  // her own job: not one
      Audit(kFrom + 5, "admin", "job.cancel", "job/7", "red"),  // someone else's
      Audit(kFrom + 6, "admin", "policy.apply", "policy/v2"),
      Audit(kFrom + 7, "bob", "policy.apply", "policy/v3", "", "denied: permission_denied"),
      Audit(kFrom + 8, "admin", "budget.set", "budget/red", "red"),
      Audit(kFrom + 9, "admin", "quota.approve", "quota-request/1", "blue"),
      Audit(kTo, "admin", "node.uncordon", "node/a"),  // after the window
  };
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->total.interventions, 6);
  EXPECT_EQ(r->interventions_by_action,
            (std::map<std::string, std::int64_t>{{"node.cordon", 1},
                                                 {"node.drain", 1},
                                                 {"job.cancel", 1},
                                                 {"policy.apply", 1},
                                                 {"budget.set", 1},
                                                 {"quota.approve", 1}}));
  ASSERT_EQ(r->interventions.size(), 6u);
  EXPECT_EQ(r->interventions[2].actor, "admin");
  EXPECT_EQ(r->interventions[2].object, "job/7");
  EXPECT_EQ(Tenant(*r, "red").interventions, 2);
  EXPECT_EQ(Tenant(*r, "blue").interventions, 1);

  // A member's report: no fleet-wide figures and no node interventions.
  in.fleet_visible = false;
  auto member = BuildOpsReport(in);
  ASSERT_TRUE(member.has_value());
  EXPECT_EQ(member->total.interventions, 3);
  EXPECT_EQ(member->capacity_mgpu_ms, 0);
  const auto j = OpsReportJson(*member);
  EXPECT_TRUE(j["fleet"].is_null());
  EXPECT_TRUE(j["total"]["allocation_pct"].is_null());
}

TEST(OpsReportTest, MeasuredUtilizationIsWeightedByAllocation) {
  OpsInputs in = Base();
  in.records.push_back(Record("1.0.0", "red", 1000, kFrom, kFrom + 1000, 0));
  in.records.push_back(Record("2.0.0", "red", 3000, kFrom, kFrom + 1000, 0));
  in.records.push_back(Record("3.0.0", "blue", 1000, kFrom, kFrom + 1000, 0));  // unsampled
  OpsUtilization u;
  store::UtilSummary a;  // 100% busy, half its memory
  a.samples = 10;
  a.util_sum = 1000;
  a.memory_used_sum = 10 * 40;
  a.memory_total_bytes = 80;
  store::UtilSummary b;  // 20% busy, a quarter of its memory
  b.samples = 5;
  b.util_sum = 100;
  b.memory_used_sum = 5 * 20;
  b.memory_total_bytes = 80;
  u.runs = {{"1.0.0", a}, {"2.0.0", b}};
  store::UtilSummary fleet;
  fleet.samples = 100;
  fleet.util_sum = 3000;
  u.fleet = fleet;
  in.utilization = u;
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_TRUE(r->measured);
  const OpsMeasured& red = *Tenant(*r, "red").measured;
  EXPECT_EQ(red.runs_sampled, 2);
  EXPECT_EQ(red.sampled_mgpu_ms, 4'000'000);
  EXPECT_EQ(red.used_mgpu_ms, 1'000'000 + 600'000);  // 100% of 1 GPU-s + 20% of 3
  EXPECT_EQ(red.memory_used_sum, 500u);
  EXPECT_EQ(red.memory_capacity_sum, 1200u);
  EXPECT_EQ(Tenant(*r, "blue").measured->runs_sampled, 0);
  const auto j = OpsReportJson(*r);
  EXPECT_DOUBLE_EQ(j["tenants"][1]["measured"]["gpu_utilization_pct"].get<double>(), 40.0);
  EXPECT_EQ(j["total"]["measured"]["unsampled_mgpu_ms"], 1'000'000);
  EXPECT_DOUBLE_EQ(j["fleet"]["measured"]["avg_util_pct"].get<double>(), 30.0);
}

// The inference section: replicas (jobs whose spec names a service) are
// summed per service and over all services, apart from training, and still
// count in their tenant's figures and the total.
TEST(OpsReportTest, ServiceReplicasHaveAnInferenceSectionOfTheirOwn) {
  OpsInputs in = Base();
  auto replica = [](std::string run, std::string service, std::int64_t mgpu) {
    model::UsageRecord r = Record(std::move(run), "red", mgpu, kFrom, kFrom + 3'600'000, 2'000'000);
    r.service = std::move(service);
    return r;
  };
  in.records.push_back(replica("1.0.0", "coder", 1000));
  in.records.push_back(replica("2.0.0", "coder", 1000));
  in.records.push_back(replica("3.0.0", "chat", 500));
  in.records.push_back(Record("4.0.0", "red", 8000, kFrom, kFrom + 3'600'000, 16'000'000));
  auto as_replica = [](store::JobRecord j, std::string service) {
    j.spec.service = model::ServiceOwner{};
    j.spec.service->name = std::move(service);
    return j;
  };
  // coder's replica 1 waited 10 s for its GPU; replica 2 was reclaimed.
  store::RunRecord reclaimed = MakeRun("2.0.0", 1, kFrom, kFrom + 600'000);
  reclaimed.stopped_for = model::StopCause::kReclaimed;
  in.jobs.push_back(as_replica(
      Job(1, "red", kFrom - 10'000, {MakeRun("1.0.0", 1, kFrom, std::nullopt)}), "coder"));
  in.jobs.push_back(as_replica(Job(2, "red", kFrom, {reclaimed}), "coder"));
  in.jobs.push_back(
      as_replica(Job(3, "red", kFrom, {MakeRun("3.0.0", 1, kFrom, std::nullopt)}), "chat"));
  in.jobs.push_back(Job(4, "red", kFrom - 60'000, {MakeRun("4.0.0", 8, kFrom, std::nullopt)}));
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;

  EXPECT_EQ(r->inference.allocated_mgpu_ms, 2500 * std::int64_t{3'600'000});
  EXPECT_EQ(r->inference.cost_micros, 6'000'000);
  EXPECT_EQ(r->inference.evictions.at("reclaimed"), 1);
  EXPECT_EQ(r->inference.wait.started, 3);
  EXPECT_EQ(r->inference.wait.max_wait_ms, 10'000);  // the training job's minute is not in it
  ASSERT_EQ(r->services.size(), 2U);
  EXPECT_EQ(r->services[0].service, "chat");
  EXPECT_EQ(r->services[0].figures.allocated_mgpu_ms, 500 * std::int64_t{3'600'000});
  EXPECT_EQ(r->services[1].service, "coder");
  EXPECT_EQ(r->services[1].tenant, "red");
  EXPECT_EQ(r->services[1].figures.records, 2);
  EXPECT_EQ(r->services[1].figures.runs_finished, 1);
  // Still in the tenant's and the total's.
  EXPECT_EQ(Tenant(*r, "red").allocated_mgpu_ms, 10'500 * std::int64_t{3'600'000});
  EXPECT_EQ(r->total.cost_micros, 22'000'000);

  const auto j = OpsReportJson(*r);
  EXPECT_DOUBLE_EQ(j["inference"]["allocated_gpu_hours"].get<double>(), 2.5);
  ASSERT_EQ(j["inference"]["services"].size(), 2U);
  EXPECT_EQ(j["inference"]["services"][1]["service"], "coder");
  EXPECT_EQ(j["inference"]["services"][1]["tenant"], "red");
  EXPECT_DOUBLE_EQ(j["inference"]["services"][1]["allocated_gpu_hours"].get<double>(), 2.0);

  EXPECT_TRUE(j["inference"]["services"][1]["requests"].is_null());

  // A service's requests join its row; one with requests but no replica in
  // the window (held at zero, answered 503) gets a row of its own.
  OpsTraffic coder{"red", "coder", 120, 118, 0, 2, 0, 40, 90, 180, 400, 30, 29};
  OpsTraffic idle{"red", "idle", 3, 0, 0, 3, 3, 30'000, 30'000, 30'000, 30'000, 0, 0};
  in.traffic = {coder, idle};
  auto with = BuildOpsReport(in);
  ASSERT_TRUE(with.has_value()) << with.error().message;
  ASSERT_EQ(with->services.size(), 3U);
  EXPECT_EQ(with->services[2].service, "idle");
  EXPECT_EQ(with->services[2].figures.allocated_mgpu_ms, 0);
  const auto jw = OpsReportJson(*with);
  const auto& coder_json = jw["inference"]["services"][1];
  EXPECT_EQ(coder_json["service"], "coder");
  EXPECT_EQ(coder_json["requests"]["requests"], 120);
  EXPECT_EQ(coder_json["requests"]["responses_5xx"], 2);
  EXPECT_DOUBLE_EQ(coder_json["requests"]["p95_ms"].get<double>(), 90);
  EXPECT_EQ(coder_json["requests"]["slo_windows_met"], 29);
  EXPECT_EQ(jw["inference"]["services"][2]["requests"]["held"], 3);
  // Requests add no GPU time: the section's totals are the replicas'.
  EXPECT_EQ(with->inference.allocated_mgpu_ms, r->inference.allocated_mgpu_ms);

  // A window without services has an empty section.
  OpsInputs none = Base();
  none.records.push_back(Record("9.0.0", "blue", 1000, kFrom, kFrom + 1000, 0));
  auto plain = BuildOpsReport(none);
  ASSERT_TRUE(plain.has_value());
  EXPECT_TRUE(plain->services.empty());
  EXPECT_EQ(OpsReportJson(*plain)["inference"]["allocated_mgpu_ms"], 0);
}

TEST(OpsReportTest, RefusesAnEmptyWindowAndUnclippedRecords) {
  OpsInputs in = Base();
  in.to = in.from;
  auto empty = BuildOpsReport(in);
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().field, "to");
  in = Base();
  in.records.push_back(Record("1.0.0", "red", 1000, kFrom - 1, kFrom + 10, 0));
  auto unclipped = BuildOpsReport(in);
  ASSERT_FALSE(unclipped.has_value());
  EXPECT_EQ(unclipped.error().field, "records");
}

TEST(OpsReportTest, JobsSubmittedJobsFailedAndAlertsOpenedInTheWindow) {
  OpsInputs in = Base();
  // Submitted in the window: 1 (red, still running), 2 (red, failed in it),
  // 3 (blue, retried to success: not a failed job).
  in.jobs.push_back(Job(1, "red", kFrom + 10, {MakeRun("1.0.0", 1, kFrom + 20, std::nullopt)}));
  auto failed = Job(2, "red", kFrom + 30, {MakeRun("2.0.0", 1, kFrom + 40, kFrom + 50)});
  failed.runs[0].exit_code = 1;
  failed.state = model::JobState::kFailed;
  failed.finished_at_ms = kFrom + 50;
  in.jobs.push_back(failed);
  auto retried = Job(
      3, "blue", kFrom + 60,
      {MakeRun("3.0.0", 1, kFrom + 70, kFrom + 80), MakeRun("3.0.1", 1, kFrom + 90, kFrom + 100)});
  retried.runs[0].exit_code = 1;
  retried.state = model::JobState::kSucceeded;
  retried.finished_at_ms = kFrom + 100;
  in.jobs.push_back(retried);
  // Submitted before the window, failed in it: a failed job, not a submitted one.
  auto old = Job(4, "blue", kFrom - 1000, {MakeRun("4.0.0", 1, kFrom - 500, kFrom + 5)});
  old.runs[0].exit_code = 2;
  old.state = model::JobState::kFailed;
  old.finished_at_ms = kFrom + 5;
  in.jobs.push_back(old);
  // Alerts raised before, in (twice) and at the end of the window.
  in.alerts_raised_ms = std::vector<TimeMs>{kFrom - 1, kFrom, kTo - 1, kTo};
  auto r = BuildOpsReport(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->total.jobs_submitted, 3);
  EXPECT_EQ(r->total.jobs_failed, 2);
  EXPECT_EQ(Tenant(*r, "red").jobs_submitted, 2);
  EXPECT_EQ(Tenant(*r, "red").jobs_failed, 1);
  EXPECT_EQ(Tenant(*r, "blue").jobs_submitted, 1);
  EXPECT_EQ(Tenant(*r, "blue").jobs_failed, 1);
  EXPECT_EQ(r->total.runs_failed, 3);  // runs, apart from jobs
  ASSERT_TRUE(r->alerts_opened.has_value());
  EXPECT_EQ(*r->alerts_opened, 2);
  auto j = OpsReportJson(*r);
  EXPECT_EQ(j["fleet"]["alerts_opened"], 2);
  EXPECT_EQ(j["total"]["jobs_submitted"], 3);
  EXPECT_EQ(j["tenants"][0]["jobs_failed"], 1);

  // A member's report counts no alert: they are the fleet's.
  in.fleet_visible = false;
  auto member = BuildOpsReport(in);
  ASSERT_TRUE(member.has_value());
  EXPECT_FALSE(member->alerts_opened.has_value());
  // Unknown (no alert store) is null, never 0.
  in.fleet_visible = true;
  in.alerts_raised_ms.reset();
  auto unknown = BuildOpsReport(in);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_TRUE(OpsReportJson(*unknown)["fleet"]["alerts_opened"].is_null());
}

}  // namespace
}  // namespace berth::server
