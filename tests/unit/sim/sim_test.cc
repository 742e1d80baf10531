// berth-sim: the ITP reader, and the engine's clock, queueing and eviction
// accounting on small workloads whose answers can be worked out by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "sched/core_scheduler.h"
#include "sched/fifo_scheduler.h"
#include "sim/baselines.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace berth::sim {
namespace {

constexpr const char* kHeader = "job_id,submission_time,duration,num_gpu\n";

TEST(ReadItp, JobsInSubmitOrderWithGangsOfWholeNodes) {
  std::istringstream in(std::string(kHeader) +
                        "b,20,700,16\n"
                        "a,10,600,2\n");
  auto jobs = ReadItp(in, {});
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 2U);
  EXPECT_EQ((*jobs)[0].name, "a");
  EXPECT_EQ((*jobs)[0].id, 1);
  EXPECT_EQ((*jobs)[0].submit_ms, 10'000);
  EXPECT_EQ((*jobs)[0].resources.gpus, 2U);
  EXPECT_EQ((*jobs)[0].replicas, 1U);
  EXPECT_EQ((*jobs)[1].replicas, 2U);
  EXPECT_EQ((*jobs)[1].resources.gpus, 8U);
  EXPECT_EQ((*jobs)[1].duration_ms, 700'000);
  EXPECT_EQ((*jobs)[1].tenant, "default");
}

TEST(ReadItp, TenantsComeFromAStableHashOfTheJobId) {
  std::string csv = kHeader;
  for (int i = 0; i < 40; ++i) {
    csv += "job-";
    csv += std::to_string(i);
    csv += ",0,600,1\n";
  }
  std::istringstream a(csv);
  std::istringstream b(csv);
  auto x = ReadItp(a, {4, 8, 0});
  auto y = ReadItp(b, {4, 8, 0});
  ASSERT_TRUE(x && y);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < x->size(); ++i) {
    EXPECT_EQ((*x)[i].tenant, (*y)[i].tenant);
    EXPECT_EQ((*x)[i].queue, "training");
    seen.insert((*x)[i].tenant);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"t00", "t01", "t02", "t03"}));
}

TEST(ReadItp, ErrorsNameTheLineAndColumn) {
  std::istringstream bad_header("id,t,d,g\n");
  EXPECT_NE(ReadItp(bad_header, {}).error().message.find("line 1"), std::string::npos);
  std::istringstream bad_number(std::string(kHeader) + "a,10,600,2\nb,x,600,2\n");
  auto e = ReadItp(bad_number, {});
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("line 3: submission_time 'x'"), std::string::npos)
      << e.error().message;
  std::istringstream ragged(std::string(kHeader) + "a,10,600,12\n");
  EXPECT_NE(ReadItp(ragged, {}).error().message.find("whole number of 8-GPU nodes"),
            std::string::npos);
}

TEST(ReadOpenb, PodsBecomeWholeSliceOrCpuJobsAndNodesShareTheirGpus) {
  std::istringstream pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p0,12000,16384,1,460,,LS,Running,100,700,100\n"
      "p1,8000,1024,2,1000,T4,BE,Succeeded,50,80,55\n"
      "p2,4000,2048,0,0,,Burstable,Pending,10,20,\n"
      "p3,4000,2048,1,1000,V100M16|V100M32,Guaranteed,Failed,30,90,31\n");
  auto jobs = ReadOpenbPods(pods, {});
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 4U);
  const SimJob& cpu = (*jobs)[0];  // creation order: p2, p3, p1, p0
  EXPECT_EQ(cpu.name, "p2");
  EXPECT_EQ(cpu.resources.gpus, 0U);
  EXPECT_FALSE(model::IsSlice(cpu.resources));
  EXPECT_EQ(cpu.resources.cpu_millis, 4000U);
  const SimJob& any_v100 = (*jobs)[1];
  EXPECT_EQ(any_v100.resources.gpu_model, "");  // a list of models leaves it free
  EXPECT_EQ(any_v100.priority, model::Priority::kHigh);
  const SimJob& t4 = (*jobs)[2];
  EXPECT_EQ(t4.resources.gpus, 2U);
  EXPECT_EQ(t4.resources.gpu_model, "T4");
  EXPECT_EQ(t4.priority, model::Priority::kLow);
  EXPECT_EQ(t4.duration_ms, 30'000);
  const SimJob& slice = (*jobs)[3];
  EXPECT_EQ(slice.resources.gpu_share_millis, 460U);
  EXPECT_EQ(slice.resources.memory_bytes, 16384ULL << 20);
  EXPECT_EQ(slice.duration_ms, 600'000);

  std::istringstream nodes(
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "n0,32000,262144,0,\n"
      "n1,96000,786432,2,T4\n");
  auto n = ReadOpenbNodes(nodes);
  ASSERT_TRUE(n.has_value()) << n.error().message;
  ASSERT_EQ(n->size(), 2U);
  EXPECT_TRUE((*n)[0].gpus.empty());
  ASSERT_EQ((*n)[1].gpus.size(), 2U);
  EXPECT_TRUE((*n)[1].gpus[0].sharing);
  EXPECT_EQ((*n)[1].gpus[0].memory_bytes, 16ULL << 30);
  EXPECT_EQ((*n)[1].cpu_millis_free, 96'000U);

  std::istringstream bad(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p0,1,1,2,500,,LS,Running,0,1,0\n");
  auto e = ReadOpenbPods(bad, {});
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("line 2"), std::string::npos) << e.error().message;
}

SimJob Job(std::int64_t id, TimeMs submit_s, TimeMs duration_s, std::uint32_t gpus,
           model::Priority priority = model::Priority::kNormal) {
  SimJob j;
  j.id = id;
  j.name = fmt::format("j{}", id);
  j.submit_ms = submit_s * 1000;
  j.duration_ms = duration_s * 1000;
  j.resources.gpus = gpus;
  j.priority = priority;
  return j;
}

TEST(Simulate, ASecondFullNodeJobWaitsForTheFirstToEnd) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 100, 8), Job(2, 5, 100, 8)};
  sched::FifoScheduler fifo;
  auto r = Simulate(nodes, jobs, model::DefaultPolicy(), fifo, {});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->jobs.size(), 2U);
  EXPECT_EQ(r->jobs[0].first_start_ms, 0);
  EXPECT_EQ(r->jobs[0].end_ms, 100'000);
  EXPECT_EQ(r->jobs[1].first_start_ms, 100'000);  // the cycle after job 1 ends
  EXPECT_EQ(r->jobs[1].end_ms, 200'000);
  auto s = Summarize("fifo", *r);
  EXPECT_DOUBLE_EQ(s.all.wait.mean_s, (0 + 95) / 2.0);
  EXPECT_DOUBLE_EQ(s.makespan_s, 200);
  EXPECT_EQ(s.cluster_gpus, 8);
}

TEST(Simulate, AnEvictedJobLosesWorkSinceItsCheckpointAndPaysTheRestart) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 100, 8, model::Priority::kLow),
                           Job(2, 50, 100, 8, model::Priority::kHigh)};
  SimOptions options;
  options.checkpoint_interval_ms = 30'000;
  options.restart_overhead_ms = 60'000;
  sched::CoreScheduler core;
  auto r = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const JobOutcome& low = r->jobs[0];
  const JobOutcome& high = r->jobs[1];
  EXPECT_EQ(high.first_start_ms, 50'000);
  EXPECT_EQ(high.end_ms, 150'000);
  EXPECT_EQ(low.evictions, 1);
  EXPECT_EQ(low.lost_gpu_ms, 20'000 * 8);  // ran 50 s, checkpointed at 30 s
  // 70 s of work left plus 60 s of restart, from 150 s.
  EXPECT_EQ(low.end_ms, 280'000);
  EXPECT_EQ(Summarize("berth", *r).evictions, 1);
}

// Tenant b borrows the whole node (a guarantees 8, b nothing); a's job
// arrives at 100 s and needs it. With a 10-minute grace it waits: when b's
// job ends within the grace a starts without an eviction; when it does not,
// a reclaims at the grace's end, one cycle at most after it.
TEST(Simulate, AReclaimWaitsOutTheGraceAndNoLonger) {
  auto policy = model::ParsePolicy(
      "reclaim_grace: 10m\n"
      "queues:\n"
      "  - {name: a, quota: {gpus: 8}, children: [{name: q}]}\n"
      "  - {name: b, children: [{name: q}]}\n");
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  auto run = [&](TimeMs borrower_s) {
    SimJob borrower = Job(1, 0, borrower_s, 8);
    borrower.tenant = "b";
    borrower.queue = "q";
    SimJob owner = Job(2, 100, 100, 8);
    owner.tenant = "a";
    owner.queue = "q";
    sched::CoreScheduler core;
    return Simulate(nodes, {borrower, owner}, *policy, core, {});
  };
  // The borrower ends at 500 s, within the grace (100 s + 600 s): no eviction.
  auto ends = run(500);
  ASSERT_TRUE(ends.has_value()) << ends.error().message;
  EXPECT_EQ(ends->jobs[0].evictions, 0);
  EXPECT_EQ(ends->jobs[1].first_start_ms, 500'000);
  EXPECT_EQ(ends->jobs[1].reclaim_waits, 1);
  EXPECT_EQ(ends->jobs[1].max_reclaim_wait_ms, 400'000);
  // It would run for an hour: reclaimed when the grace ends, at 700 s.
  auto reclaimed = run(3600);
  ASSERT_TRUE(reclaimed.has_value()) << reclaimed.error().message;
  EXPECT_EQ(reclaimed->jobs[0].evictions, 1);
  EXPECT_EQ(reclaimed->jobs[0].lost_gpu_ms, 700'000 * 8);
  EXPECT_EQ(reclaimed->jobs[1].first_start_ms, 700'000);
  EXPECT_EQ(reclaimed->jobs[1].max_reclaim_wait_ms, 600'000);
  const Summary s = Summarize("berth", *reclaimed);
  EXPECT_EQ(s.reclaim_waits, 1);
  EXPECT_DOUBLE_EQ(s.max_reclaim_wait_s, 600.0);
  // Per tenant: a waited, b (the borrower) never needed to.
  ASSERT_EQ(s.reclaim_by_tenant.size(), 1U);
  ASSERT_TRUE(s.reclaim_by_tenant.contains("a"));
  EXPECT_EQ(s.reclaim_by_tenant.at("a").waits, 1);
  EXPECT_DOUBLE_EQ(s.reclaim_by_tenant.at("a").max_s, 600.0);
  EXPECT_EQ(ToJson(s)["reclaim_by_tenant"]["a"]["max_reclaim_wait_s"], 600.0);
  EXPECT_NE(RenderTable({s}).find("RECLAIM_WAITS"), std::string::npos);
}

// Two 4-GPU nodes: a (2 GPUs) on n0, b (3) and c (1) on n1, all of them
// checkpointing. When b ends, 5 GPUs are free but no node has 4: d (4 GPUs)
// starts at once only if a job may move, and the cheapest move is c's (one
// GPU, to n0's free pair), which gives d all of n1.
TEST(Simulate, AJobThatCheckpointsMovesToMakeRoomForAGangWhenMovable) {
  auto nodes = UniformNodes(2, 4, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 1000, 2), Job(2, 0, 50, 3), Job(3, 0, 1000, 1),
                           Job(4, 60, 100, 4)};
  SimOptions options;
  options.checkpoint_interval_ms = 30'000;
  sched::CoreScheduler core;
  auto still = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  ASSERT_TRUE(still.has_value()) << still.error().message;
  EXPECT_EQ(still->jobs[3].first_start_ms, 1'000'000);  // waits for a and c to end
  EXPECT_EQ(still->jobs[2].moves, 0);

  options.movable = true;
  auto moved = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  ASSERT_TRUE(moved.has_value()) << moved.error().message;
  const JobOutcome& a = moved->jobs[0];
  const JobOutcome& c = moved->jobs[2];
  const JobOutcome& d = moved->jobs[3];
  EXPECT_EQ(d.first_start_ms, 60'000);
  ASSERT_EQ(d.first_placement.size(), 1U);
  EXPECT_EQ(d.first_placement[0].node, "node-0001");
  EXPECT_EQ(a.moves, 0);
  EXPECT_EQ(c.moves, 1);
  EXPECT_EQ(c.evictions, 1);
  EXPECT_EQ(c.lost_gpu_ms, 0);  // it had checkpointed at 60 s
  // 940 s of work left plus the 60 s restart, from 60 s.
  EXPECT_EQ(c.end_ms, 1'060'000);
  EXPECT_EQ(Summarize("berth", *moved).moves, 1);
  EXPECT_EQ(ToJson(Summarize("berth", *moved))["moves"], 1);
}

TEST(Simulate, TwoHalfGpuSlicesShareOneGpuAndAThirdWaits) {
  auto nodes = UniformNodes(1, 1, "H100-80GB");
  nodes[0].gpus[0].sharing = true;
  std::vector<SimJob> jobs{Job(1, 0, 100, 0), Job(2, 0, 100, 0), Job(3, 0, 100, 0)};
  for (auto& j : jobs) j.resources.gpu_share_millis = 500;
  sched::CoreScheduler core;
  auto r = Simulate(nodes, jobs, model::DefaultPolicy(), core, {});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->jobs[0].first_start_ms, 0);
  EXPECT_EQ(r->jobs[1].first_start_ms, 0);
  EXPECT_EQ(r->jobs[2].first_start_ms, 100'000);
  EXPECT_EQ(r->jobs[2].end_ms, 200'000);
  EXPECT_EQ(r->samples.front().allocated_mgpu, 1000);
}

TEST(Simulate, TheSameInputsGiveTheSameResult) {
  auto nodes = UniformNodes(2, 8, "H100-80GB");
  std::vector<SimJob> jobs;
  for (int i = 1; i <= 60; ++i) {
    jobs.push_back(Job(i, (i * 37) % 500, 100 + (i * 53) % 900, 1U << (i % 4),
                       i % 5 == 0 ? model::Priority::kHigh : model::Priority::kNormal));
  }
  sched::CoreScheduler core;
  auto a = Simulate(nodes, jobs, model::DefaultPolicy(), core, {});
  auto b = Simulate(nodes, jobs, model::DefaultPolicy(), core, {});
  ASSERT_TRUE(a && b);
  for (std::size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].first_start_ms, b->jobs[i].first_start_ms) << i;
    EXPECT_EQ(a->jobs[i].end_ms, b->jobs[i].end_ms) << i;
    EXPECT_TRUE(a->jobs[i].end_ms.has_value()) << "job " << i + 1 << " never finished";
  }
}

TEST(Simulate, BerthLearnsRunTimesFromFinishedJobsNotFromTheJobItself) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  // Four 4-GPU jobs of 10 s finish by 20 s: 4-GPU jobs are predicted short.
  // 8-GPU jobs 5-8 (30 s) run one at a time from 20 s; job 9 asks for 4 GPUs
  // and, unknown to any scheduler, runs 500 s.
  std::vector<SimJob> jobs{Job(1, 0, 10, 4), Job(2, 0, 10, 4),  Job(3, 0, 10, 4),
                           Job(4, 0, 10, 4), Job(5, 1, 30, 8),  Job(6, 1, 30, 8),
                           Job(7, 1, 30, 8), Job(8, 25, 30, 8), Job(9, 26, 500, 4)};
  sched::CoreScheduler core;
  SimOptions options;
  auto plain = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  options.predict_runtimes = true;
  auto predicted = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  ASSERT_TRUE(plain && predicted);
  // In submit order job 9 waits for jobs 6, 7 and 8.
  EXPECT_EQ(plain->jobs[8].first_start_ms, 140'000);
  // Predicted from the 4-GPU jobs before it (10 s), it goes first when job 5
  // ends at 50 s, ahead of the 8-GPU jobs (too few runs to predict).
  EXPECT_EQ(predicted->jobs[8].first_start_ms, 50'000);
  EXPECT_EQ(predicted->jobs[5].first_start_ms, 550'000);
}

TEST(Simulate, TheForecastGivesAJobBehindItsHeadAStartAndDecidesNothing) {
  // Jobs 2 and 3 wait behind job 1 for the whole node; every job declares
  // its run time as its max runtime. The cycle's own estimate is the
  // head's alone (job 3 hears only "not before job 2"); the forecast
  // foresees both starts, and they are the starts that came.
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 100, 8), Job(2, 10, 100, 8), Job(3, 10, 100, 8)};
  for (auto& j : jobs) j.max_runtime_ms = j.duration_ms;
  sched::CoreScheduler core;
  SimOptions options;
  auto plain = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  options.eta_forecast = true;
  auto foreseen = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  ASSERT_TRUE(plain && foreseen);
  // Without it, job 3 hears an estimate only once it is the head, at 100 s.
  EXPECT_EQ(plain->jobs[2].first_eta_given_ms, 100'000);
  for (std::size_t i : {1U, 2U}) {
    EXPECT_EQ(foreseen->jobs[i].first_eta_given_ms, 10'000) << i;
    EXPECT_EQ(foreseen->jobs[i].first_eta_ms, *foreseen->jobs[i].first_start_ms) << i;
    EXPECT_EQ(foreseen->jobs[i].first_start_ms, plain->jobs[i].first_start_ms) << i;
  }
  EXPECT_EQ(foreseen->jobs[2].first_start_ms, 200'000);
  EXPECT_GT(foreseen->forecasts, 0);
}

TEST(Baselines, TheSjfOracleRunsTheShortestWaitingJobFirst) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  // Job 1 holds the node; 2 (long) and 3 (short) wait for it.
  std::vector<SimJob> jobs{Job(1, 0, 100, 8), Job(2, 10, 1000, 8), Job(3, 20, 10, 8)};
  sched::FifoScheduler fifo;
  auto plain = Simulate(nodes, jobs, model::DefaultPolicy(), fifo, {});
  auto sjf = Simulate(nodes, jobs, model::DefaultPolicy(), fifo, {}, ShortestJobFirstOracle());
  ASSERT_TRUE(plain && sjf);
  EXPECT_EQ(plain->jobs[1].first_start_ms, 100'000);  // submit order
  EXPECT_EQ(sjf->jobs[2].first_start_ms, 100'000);    // shortest first
  EXPECT_EQ(sjf->jobs[1].first_start_ms, 110'000);
}

TEST(Baselines, LeastAttainedServicePreemptsTheJobThatHadTheMostGpuTime) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  // Job 1 has had 8 GPU-hours by the time job 2 arrives; the threshold is 1.
  std::vector<SimJob> jobs{Job(1, 0, 7200, 8), Job(2, 3600, 100, 8)};
  sched::CoreScheduler core;
  auto r =
      Simulate(nodes, jobs, model::DefaultPolicy(), core, {}, LeastAttainedService({3'600'000}));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->jobs[1].first_start_ms, 3'600'000);
  EXPECT_EQ(r->jobs[0].evictions, 1);
  // Plain Berth keeps job 1: both have the same priority.
  auto plain = Simulate(nodes, jobs, model::DefaultPolicy(), core, {});
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->jobs[0].evictions, 0);
  EXPECT_EQ(plain->jobs[1].first_start_ms, 7'200'000);
}

}  // namespace
}  // namespace berth::sim
