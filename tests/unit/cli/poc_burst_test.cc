// `berth poc`'s concurrent load: the burst and expect_burst steps parse or
// name the field at fault and the fix; the burst's figures (percentiles,
// per-tenant waits, shares under contention, unexplained waits) and the
// verdict on them are right; the report shows a burst as one row.
#include "cli/poc_burst.h"

#include <gtest/gtest.h>

#include <string>

#include "cli/poc_suite.h"

namespace berth::cli::poc {
namespace {

using nlohmann::json;

// A suite with one burst case; `burst` and `expect` are the steps' bodies.
std::string PocLoadSuite(const std::string& burst, const std::string& expect) {
  return "name: load\n"
         "version: 1\n"
         "setup:\n"
         "  tenants:\n"
         "    - {name: a, children: [{name: batch}]}\n"
         "    - {name: b, children: [{name: batch}]}\n"
         "  identities:\n"
         "    - {name: alice, tenants: {a: member}}\n"
         "    - {name: bob, tenants: {b: member}}\n"
         "groups:\n"
         "  - id: g\n"
         "    cases:\n"
         "      - id: load\n"
         "        title: load\n"
         "        capability: queues-and-quota\n"
         "        perspective: platform\n"
         "        risk: high\n"
         "        retest: berth poc run --scale 10\n"
         "        steps:\n"
         "          - burst: " +
         burst +
         "\n"
         "          - expect_burst: " +
         expect + "\n";
}

const std::string kPocGoodBurst =
    "{bind: load, job: {name: 'l-${burst.index}', command: [sleep, '1'], resources: {gpus: 1}}, "
    "tenants: [{tenant: a, as: alice, queue: batch, count: 3}, "
    "{tenant: b, as: bob, queue: batch, count: 2, job: {resources: {gpus: 2}}}]}";
const std::string kPocGoodExpect =
    "{burst: load, states: [Succeeded], within: 60s, wait_p50: 5s, wait_p95: 20s, "
    "tenant_max_wait: 30s, min_share: {a: 20%}}";

TEST(PocBurst, ABurstAndItsExpectationParse) {
  auto suite = ParseSuite(PocLoadSuite(kPocGoodBurst, kPocGoodExpect));
  ASSERT_TRUE(suite) << suite.error().message;
  const auto& steps = suite->cases[0].steps;
  ASSERT_EQ(steps.size(), 2U);
  EXPECT_EQ(steps[0].kind, StepKind::kBurst);
  EXPECT_EQ(StepKindName(steps[0].kind), "burst");
  EXPECT_EQ(steps[0].bind, "load");
  ASSERT_EQ(steps[0].burst.size(), 2U);
  EXPECT_EQ(steps[0].burst[0].tenant, "a");
  EXPECT_EQ(steps[0].burst[0].as, "alice");
  EXPECT_EQ(steps[0].burst[0].count, 3);
  // The template with tenant and queue set; b's shape laid over it.
  EXPECT_NE(steps[0].burst[0].spec.find("${tenant.a}"), std::string::npos);
  EXPECT_NE(steps[0].burst[0].spec.find("batch"), std::string::npos);
  EXPECT_NE(steps[0].burst[0].spec.find("${burst.index}"), std::string::npos);
  EXPECT_NE(steps[0].burst[1].spec.find("gpus: 2"), std::string::npos) << steps[0].burst[1].spec;
  EXPECT_NE(steps[0].burst[1].spec.find("sleep"), std::string::npos);
  const auto& e = steps[1].burst_expect;
  EXPECT_EQ(steps[1].kind, StepKind::kExpectBurst);
  EXPECT_EQ(steps[1].job, "load");
  EXPECT_EQ(e.states, std::vector<std::string>{"Succeeded"});
  EXPECT_EQ(e.within_ms, 60000);
  EXPECT_EQ(e.p50_wait_ms, 5000);
  EXPECT_EQ(e.p95_wait_ms, 20000);
  EXPECT_EQ(e.tenant_max_wait_ms, 30000);
  EXPECT_EQ(e.min_share_ppm.at("a"), 200000);
  EXPECT_TRUE(e.explained);
}

TEST(PocBurst, BadBurstsNameTheFieldAndTheFix) {
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    return s;
  };
  struct Bad {
    std::string burst;
    std::string expect;
    std::string field;
    std::string fix;
  };
  const std::string f = "groups[0].cases[0].steps[0].burst";
  const std::string x = "groups[0].cases[0].steps[1].expect_burst";
  const Bad bad[] = {
      {replace(kPocGoodBurst, "count: 3", "count: 0"), kPocGoodExpect, f + ".tenants[0].count",
       "1 to 1000"},
      {replace(kPocGoodBurst, ", count: 3", ""), kPocGoodExpect, f + ".tenants[0].count",
       "required"},
      {replace(kPocGoodBurst, "tenant: b, as: bob", "tenant: b, as: alice"), kPocGoodExpect,
       f + ".tenants[1].as", "identity of its own"},
      {replace(kPocGoodBurst, "tenant: b,", "tenant: a,"), kPocGoodExpect, f + ".tenants[1].tenant",
       "one entry"},
      {replace(kPocGoodBurst, "tenant: b,", "tenant: z,"), kPocGoodExpect, f + ".tenants[1].tenant",
       "setup.tenants"},
      {replace(kPocGoodBurst, "job: {name:", "job: {tenant: x, name:"), kPocGoodExpect,
       f + ".job.tenant", "leave it out"},
      {replace(kPocGoodBurst, "'l-${burst.index}'", "'${burst.nope}'"), kPocGoodExpect,
       f + ".tenants[0].job", "placeholder"},
      {replace(kPocGoodBurst, "tenants: [", "counts: ["), kPocGoodExpect, f + ".counts", "tenants"},
      {replace(kPocGoodBurst, ", queue: batch, count: 3", ", count: 3"), kPocGoodExpect,
       f + ".tenants[0].queue", "required"},
      {kPocGoodBurst, replace(kPocGoodExpect, "burst: load", "burst: other"), x + ".burst",
       "burst: {bind: NAME}"},
      {kPocGoodBurst, replace(kPocGoodExpect, "wait_p95: 20s", "wait_p95: fast"), x + ".wait_p95",
       "10s"},
      {kPocGoodBurst, replace(kPocGoodExpect, "wait_p50: 5s", "wait_p50: 50s"), x + ".wait_p50",
       "wait_p95"},
      {kPocGoodBurst, replace(kPocGoodExpect, "{a: 20%}", "{a: 120%}"), x + ".min_share.a",
       "0% to 100%"},
      {kPocGoodBurst, replace(kPocGoodExpect, "{a: 20%}", "{q: 20%}"), x + ".min_share.q",
       "setup.tenants"},
      {kPocGoodBurst, replace(kPocGoodExpect, ", within: 60s", ""), x + ".within", "required"},
  };
  for (const auto& b : bad) {
    auto suite = ParseSuite(PocLoadSuite(b.burst, b.expect));
    ASSERT_FALSE(suite) << b.field;
    EXPECT_EQ(suite.error().field, b.field) << suite.error().message;
    EXPECT_NE(suite.error().message.find(b.fix), std::string::npos)
        << b.field << ": " << suite.error().message;
  }
}

TEST(PocBurst, PercentilesAreNearestRank) {
  EXPECT_EQ(PercentileMs({}, 95), 0);
  EXPECT_EQ(PercentileMs({7}, 50), 7);
  EXPECT_EQ(PercentileMs({4, 1, 3, 2}, 50), 2);  // the 2nd of 4
  std::vector<std::int64_t> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(PercentileMs(hundred, 95), 95);
  EXPECT_EQ(PercentileMs(hundred, 50), 50);
  EXPECT_EQ(PercentileMs(hundred, 100), 100);
  // 20 values: the 19th smallest is the 95th percentile.
  std::vector<std::int64_t> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(i * 10);
  EXPECT_EQ(PercentileMs(twenty, 95), 190);
}

BurstJob PocJob(std::uint64_t id, const std::string& tenant, TimeMs submitted,
                std::optional<TimeMs> started, std::optional<TimeMs> finished,
                const std::string& state) {
  BurstJob j;
  j.id = id;
  j.tenant = tenant;
  j.state = state;
  j.submitted_ms = submitted;
  j.started_ms = started;
  j.finished_ms = finished;
  j.gpu_millis = 1000;
  return j;
}

TEST(PocBurst, TheAggregateHasPerTenantWaitsSharesAndUnexplainedWaits) {
  std::vector<BurstJob> jobs = {
      PocJob(1, "a", 1000, 1000, 3000, "Succeeded"),                // waited 0
      PocJob(2, "a", 1000, 2000, 4000, "Succeeded"),                // waited 1s
      PocJob(3, "b", 1000, 5000, 6000, "Succeeded"),                // waited 4s
      PocJob(4, "b", 1000, std::nullopt, std::nullopt, "Pending"),  // waiting since
  };
  jobs[3].pending_seen = 3;
  jobs[3].reasons = {"Queued"};  // waited past a look with nothing but Queued
  jobs[2].pending_seen = 2;
  jobs[2].reasons = {"Queued", "OverQuota"};
  const json agg = AggregateBurst(jobs, 11000);
  EXPECT_EQ(agg["count"], 4);
  EXPECT_EQ(agg["states"]["Succeeded"], 3);
  EXPECT_EQ(agg["states"]["Pending"], 1);
  // Waits 0, 1s, 4s and 10s (still waiting at 11000).
  EXPECT_EQ(agg["wait"]["p50_ms"], 1000);
  EXPECT_EQ(agg["wait"]["p95_ms"], 10000);
  EXPECT_EQ(agg["wait"]["max_ms"], 10000);
  EXPECT_EQ(agg["tenants"]["a"]["max_ms"], 1000);
  EXPECT_EQ(agg["tenants"]["b"]["p50_ms"], 4000);
  EXPECT_EQ(agg["tenants"]["b"]["count"], 2);
  // Contention from 1000 until a ran out of work at 4000: a held 2s + 2s
  // of GPU, b nothing.
  EXPECT_EQ(agg["contention_ms"], 3000);
  EXPECT_EQ(agg["tenants"]["a"]["share_ppm"], 1000000);
  EXPECT_EQ(agg["tenants"]["b"]["share_ppm"], 0);
  EXPECT_EQ(agg["unexplained"], json::array({4}));
  EXPECT_EQ(agg["reasons"]["OverQuota"], 1);
  EXPECT_EQ(agg["run_ms"], 10000);
}

TEST(PocBurst, TheVerdictNamesEachThresholdItMissed) {
  BurstExpectation e;
  e.states = {"Succeeded"};
  e.within_ms = 60000;
  e.p50_wait_ms = 2000;
  e.p95_wait_ms = 5000;
  e.tenant_max_wait_ms = 5000;
  e.min_share_ppm["b"] = 100000;
  std::vector<BurstJob> jobs = {PocJob(1, "a", 0, 0, 1000, "Succeeded"),
                                PocJob(2, "b", 0, 500, 1500, "Succeeded")};
  const json fine = AggregateBurst(jobs, 2000);
  const auto ok = JudgeBurst(e, fine, 1, true);
  EXPECT_TRUE(ok.ok) << ok.expected << " / " << ok.actual;
  EXPECT_NE(ok.expected.find("wait p95 <= 5s"), std::string::npos) << ok.expected;
  // Tenant b starved: its job waited 9s and is still Pending.
  jobs[1] = PocJob(2, "b", 0, std::nullopt, std::nullopt, "Pending");
  const json starved = AggregateBurst(jobs, 9000);
  const auto bad = JudgeBurst(e, starved, 1, false);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.actual.find("1 Pending"), std::string::npos) << bad.actual;
  EXPECT_NE(bad.actual.find("not all settled"), std::string::npos) << bad.actual;
  EXPECT_NE(bad.actual.find("b's longest wait 9s"), std::string::npos) << bad.actual;
  EXPECT_NE(bad.actual.find("b's share"), std::string::npos) << bad.actual;
  // The same waits pass at --scale 2, whose bounds are twice as long, but
  // for the job that never ran.
  const auto scaled = JudgeBurst(e, starved, 2, false);
  EXPECT_NE(scaled.expected.find("wait p95 <= 10s"), std::string::npos) << scaled.expected;
  EXPECT_FALSE(scaled.ok);
}

TEST(PocBurst, WatchingStopsOnceTheBurstCannotPassAnyMore) {
  BurstExpectation e;
  e.states = {"Succeeded"};
  e.within_ms = 60000;
  e.tenant_max_wait_ms = 10000;
  std::vector<BurstJob> jobs = {PocJob(1, "a", 0, 0, 1000, "Succeeded"),
                                PocJob(2, "b", 0, std::nullopt, std::nullopt, "Pending")};
  EXPECT_FALSE(BurstDoomed(e, jobs, 1, 10000));
  EXPECT_TRUE(BurstDoomed(e, jobs, 1, 10001));   // b's job waited past 10s
  EXPECT_FALSE(BurstDoomed(e, jobs, 2, 10001));  // 20s at --scale 2
  jobs[1] = PocJob(2, "b", 0, 100, 200, "Failed");
  EXPECT_TRUE(BurstDoomed(e, jobs, 1, 300));  // ended in a state not wanted
  e.tenant_max_wait_ms.reset();
  jobs[1] = PocJob(2, "b", 0, std::nullopt, std::nullopt, "Pending");
  EXPECT_FALSE(BurstDoomed(e, jobs, 1, 50000));  // no bound on a tenant's wait
}

TEST(PocBurst, ObservingListsTakesStatesTimesGpusAndReasons) {
  std::vector<BurstJob> jobs(2);
  jobs[0].id = 5;
  jobs[1].id = 6;
  const json rows = json::parse(R"([
    {"id": 5, "state": "Pending", "replicas": 2, "resources": {"gpus": 1},
     "reason": {"code": "OverQuota", "message": "queue full"}, "submitted_at_ms": 100,
     "started_at_ms": null, "finished_at_ms": null},
    {"id": 6, "state": "Pending", "replicas": 1, "resources": {"gpus": 2},
     "reason": {"code": "", "message": ""}, "submitted_at_ms": 100},
    {"id": 7, "state": "Running"}])");
  ObserveBurst(jobs, rows);
  EXPECT_EQ(jobs[0].gpu_millis, 2000);
  EXPECT_EQ(jobs[0].reasons, std::vector<std::string>{"OverQuota"});
  EXPECT_FALSE(jobs[0].reason_missing);
  EXPECT_EQ(jobs[0].submitted_ms, 100);
  EXPECT_TRUE(jobs[1].reason_missing);
  EXPECT_EQ(jobs[1].gpu_millis, 2000);
}

TEST(PocBurst, ABurstIsOneReportRowOfAggregates) {
  std::vector<BurstJob> jobs;
  for (std::uint64_t i = 1; i <= 200; ++i) {
    jobs.push_back(PocJob(i, i % 2 == 0 ? "a" : "b", 0, static_cast<TimeMs>(i * 10),
                          static_cast<TimeMs>(i * 10 + 1000), "Succeeded"));
  }
  BurstSubmission sa{"a", "poc-x-alice", "batch", {}, 0, "", 0, 800};
  BurstSubmission sb{"b", "poc-x-bob", "batch", {}, 1, "too many", 0, 900};
  const json s = BurstSample("load", {sa, sb}, jobs, "all 200 Succeeded within 1m", 5, true, 5000,
                             {{"a", "poc-x-a"}, {"b", "poc-x-b"}});
  EXPECT_EQ(s["kind"], "burst");
  EXPECT_EQ(s["figures"]["count"], 200);
  const auto cells = BurstSampleCells(s);
  ASSERT_EQ(cells.size(), 11U);
  EXPECT_EQ(cells[0], "load (burst, scale 5)");
  EXPECT_EQ(cells[1], "200 jobs (ids in report.json evidence.bursts)");
  EXPECT_EQ(cells[2], "poc-x-a / poc-x-alice / batch; poc-x-b / poc-x-bob / batch");
  EXPECT_EQ(cells[5], "200 Succeeded");
  EXPECT_NE(cells[6].find("a: p50"), std::string::npos) << cells[6];
  EXPECT_NE(cells[8].find("1 refused: too many"), std::string::npos) << cells[8];
}

}  // namespace
}  // namespace berth::cli::poc
