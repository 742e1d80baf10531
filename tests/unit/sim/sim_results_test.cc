// berth-sim's results beyond completion times: node failures and the work
// they throw away, finish-time fairness, the time series and its plot, the
// OpenB fill mode with its placement baselines, and the DLRM reader. Each
// workload is small enough to work its answer out by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <vector>

#include "sched/core_scheduler.h"
#include "sched/fifo_scheduler.h"
#include "sim/baselines.h"
#include "sim/engine.h"
#include "sim/fill.h"
#include "sim/plot.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace berth::sim {
namespace {

SimJob Job(std::int64_t id, TimeMs submit_s, TimeMs duration_s, std::uint32_t gpus,
           const std::string& tenant = "default") {
  SimJob j;
  j.id = id;
  j.name = fmt::format("j{}", id);
  j.tenant = tenant;
  j.submit_ms = submit_s * 1000;
  j.duration_ms = duration_s * 1000;
  j.resources.gpus = gpus;
  return j;
}

// Wraps a scheduler and keeps what each cycle saw and decided.
class Recording : public sched::Scheduler {
 public:
  explicit Recording(const sched::Scheduler& inner) : inner_(inner) {}
  sched::Plan Schedule(const sched::Snapshot& snapshot) const override {
    snapshots.push_back(snapshot);
    plans.push_back(inner_.Schedule(snapshot));
    return plans.back();
  }
  mutable std::vector<sched::Snapshot> snapshots;
  mutable std::vector<sched::Plan> plans;

 private:
  const sched::Scheduler& inner_;
};

TEST(NodeFailures, AJobOnAFailedNodeRestartsElsewhereAndLosesWorkSinceItsCheckpoint) {
  auto nodes = UniformNodes(2, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 1000, 8)};
  sched::CoreScheduler core;
  Recording rec(core);
  // Find where the job lands first, then fail that node at 250 s for a day.
  auto dry = Simulate(nodes, jobs, model::DefaultPolicy(), rec, {});
  ASSERT_TRUE(dry.has_value()) << dry.error().message;
  ASSERT_EQ(rec.plans.front().placements.size(), 1U);
  const std::string first = rec.plans.front().placements.front().replicas.front().node;
  rec.snapshots.clear();
  rec.plans.clear();

  SimOptions options;
  options.checkpoint_interval_ms = 100'000;
  options.restart_overhead_ms = 60'000;
  options.node_failures = {{250'000, first, 86'400'000}};
  auto r = Simulate(nodes, jobs, model::DefaultPolicy(), rec, options);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const JobOutcome& o = r->jobs[0];
  EXPECT_EQ(o.failures, 1);
  EXPECT_EQ(o.evictions, 0);
  EXPECT_EQ(o.lost_gpu_ms, 0);
  EXPECT_EQ(o.lost_gpu_ms_to_failures, 50'000 * 8);  // ran 250 s, checkpointed at 200 s
  // Restarted at once on the other node: 800 s of work left plus 60 s of restart.
  EXPECT_EQ(o.end_ms, 250'000 + 800'000 + 60'000);
  EXPECT_EQ(r->node_failures, 1);

  // The scheduler saw the failed node down, with unhealthy GPUs, and placed
  // the job on the other one.
  ASSERT_EQ(rec.snapshots.size(), 3U);  // the start, the failure, the end
  const sched::Snapshot& after = rec.snapshots[1];
  EXPECT_EQ(after.now_ms, 250'000);
  for (const auto& n : after.nodes) {
    for (const auto& g : n.gpus) EXPECT_EQ(g.healthy, n.name != first) << n.name;
    EXPECT_EQ(n.ready, n.name != first);
  }
  ASSERT_EQ(rec.plans[1].placements.size(), 1U);
  EXPECT_NE(rec.plans[1].placements.front().replicas.front().node, first);

  auto s = Summarize("berth", *r);
  EXPECT_EQ(s.failures, 1);
  EXPECT_EQ(s.evictions, 0);
  EXPECT_DOUBLE_EQ(s.lost_gpu_hours_to_failures, 400.0 / 3600.0);
}

TEST(NodeFailures, AJobWaitsForItsOnlyNodeToReturn) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 100, 8)};
  SimOptions options;  // never checkpoints: loses all 40 s
  options.restart_overhead_ms = 0;
  options.node_failures = {{40'000, "node-0000", 300'000}};
  sched::FifoScheduler fifo;
  auto r = Simulate(nodes, jobs, model::DefaultPolicy(), fifo, options);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->jobs[0].lost_gpu_ms_to_failures, 40'000 * 8);
  EXPECT_EQ(r->jobs[0].end_ms, 340'000 + 100'000);
  // The cycle at the failure saw the node's GPUs down and the job waiting.
  bool saw_down = false;
  for (const auto& s : r->samples) {
    if (s.t_ms == 40'000) {
      saw_down = true;
      EXPECT_EQ(s.down_gpus, 8);
      EXPECT_EQ(s.pending_jobs, 1);
      EXPECT_EQ(s.allocated_mgpu, 0);
    }
  }
  EXPECT_TRUE(saw_down);
}

TEST(NodeFailures, AnUnknownNodeIsAnError) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  SimOptions options;
  options.node_failures = {{10'000, "nope", 1000}};
  sched::FifoScheduler fifo;
  auto r = Simulate(nodes, {Job(1, 0, 100, 8)}, model::DefaultPolicy(), fifo, options);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("no node named 'nope'"), std::string::npos);
}

TEST(NodeFailures, RandomFailuresFollowTheSeed) {
  auto nodes = UniformNodes(4, 8, "H100-80GB");
  std::vector<SimJob> jobs;
  for (int i = 1; i <= 40; ++i) jobs.push_back(Job(i, i * 600, 20'000, 1U << (i % 4)));
  SimOptions options;
  options.random_failures = {10 * 3'600'000, 30 * 60'000, 7};
  sched::CoreScheduler core;
  auto a = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  auto b = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  options.random_failures.seed = 8;
  auto c = Simulate(nodes, jobs, model::DefaultPolicy(), core, options);
  ASSERT_TRUE(a && b && c);
  EXPECT_GT(a->node_failures, 0);
  EXPECT_EQ(a->node_failures, b->node_failures);
  bool differs = a->node_failures != c->node_failures;
  for (std::size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].end_ms, b->jobs[i].end_ms);
    EXPECT_EQ(a->jobs[i].failures, b->jobs[i].failures);
    EXPECT_TRUE(a->jobs[i].end_ms.has_value());
    differs = differs || a->jobs[i].end_ms != c->jobs[i].end_ms;
  }
  EXPECT_TRUE(differs);
}

TEST(NodeFailures, TheCsvReaderNamesTheBadLine) {
  std::istringstream ok("time_s,node,down_s\n100,node-0001,600\n");
  auto rows = ReadNodeFailures(ok);
  ASSERT_TRUE(rows.has_value()) << rows.error().message;
  ASSERT_EQ(rows->size(), 1U);
  EXPECT_EQ((*rows)[0].at_ms, 100'000);
  EXPECT_EQ((*rows)[0].node, "node-0001");
  EXPECT_EQ((*rows)[0].down_ms, 600'000);
  std::istringstream bad("time_s,node,down_s\n100,n,600\n200,n,0\n");
  auto e = ReadNodeFailures(bad);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("line 3"), std::string::npos) << e.error().message;
}

TEST(Fairness, RhoIsSharedOverIsolatedCompletionTimePerTenant) {
  // Two tenants on 8 GPUs: each one's isolated share is 4 GPUs. a's 8-GPU
  // job would take twice as long on its share (200 s); b's 4-GPU job 100 s.
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 100, 8, "a"), Job(2, 0, 100, 4, "b")};
  sched::FifoScheduler fifo;
  auto r = Simulate(nodes, jobs, model::DefaultPolicy(), fifo, {}, OneQueue());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->jobs[1].end_ms, 200'000);  // behind a's job
  EXPECT_DOUBLE_EQ(IsolatedSeconds(100'000, 8, 8, 2), 200);
  EXPECT_DOUBLE_EQ(IsolatedSeconds(100'000, 4, 8, 2), 100);
  auto s = Summarize("fifo", *r);
  EXPECT_DOUBLE_EQ(s.fairness_by_tenant.at("a").mean_rho, 0.5);
  EXPECT_DOUBLE_EQ(s.fairness_by_tenant.at("a").share_over_1, 0);
  EXPECT_DOUBLE_EQ(s.fairness_by_tenant.at("b").mean_rho, 2);
  EXPECT_DOUBLE_EQ(s.fairness_by_tenant.at("b").max_rho, 2);
  EXPECT_DOUBLE_EQ(s.fairness_by_tenant.at("b").share_over_1, 1);
  EXPECT_DOUBLE_EQ(s.fairness.mean_rho, 1.25);
  auto j = ToJson(s);
  EXPECT_DOUBLE_EQ(j["fairness_by_tenant"]["b"]["mean_rho"].get<double>(), 2);
  EXPECT_NE(RenderTable({s}).find("RHO_AVG"), std::string::npos);

  // A job submitted between cycles starts at the next one, alone or not:
  // that wait is in the isolated time too, so a lone job has rho 1.
  std::vector<SimJob> late{Job(1, 0, 100, 4, "a"), Job(2, 3, 100, 4, "b")};
  auto l = Simulate(nodes, late, model::DefaultPolicy(), fifo, {}, OneQueue());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->jobs[1].first_start_ms, 10'000);
  auto ls = Summarize("fifo", *l);
  EXPECT_DOUBLE_EQ(ls.fairness_by_tenant.at("b").mean_rho, 1.0);
  EXPECT_DOUBLE_EQ(ls.fairness.share_over_1, 0.0);
}

TEST(TimeSeries, OneCsvRowPerSample) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 100, 8), Job(2, 5, 100, 4)};
  sched::FifoScheduler fifo;
  auto r = Simulate(nodes, jobs, model::DefaultPolicy(), fifo, {});
  ASSERT_TRUE(r.has_value());
  const std::string csv = TimeSeriesCsv(r->samples);
  std::vector<std::string> lines;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), r->samples.size() + 1);
  EXPECT_EQ(lines[0],
            "t_s,allocated_gpus,pending_jobs,pending_gpus,idle_gpus_while_waiting,down_gpus");
  // Cycle at 10 s: job 1 holds 8 GPUs, job 2 (4 GPUs) waits.
  EXPECT_EQ(lines[2], "10,8.000,1,4.000,0,0");
  // Cycle at 100 s: job 1 ended, job 2 started.
  EXPECT_EQ(lines[3], "100,4.000,0,0.000,0,0");
}

// A tiny XML check: every tag closes in order, attributes quoted.
bool WellFormed(const std::string& xml, int* elements) {
  std::vector<std::string> open;
  *elements = 0;
  for (std::size_t i = 0; i < xml.size(); ++i) {
    if (xml[i] != '<') continue;
    const std::size_t end = xml.find('>', i);
    if (end == std::string::npos) return false;
    std::string tag = xml.substr(i + 1, end - i - 1);
    i = end;
    if (tag.starts_with("?")) continue;
    if (tag.starts_with("/")) {
      if (open.empty() || open.back() != tag.substr(1)) return false;
      open.pop_back();
      continue;
    }
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return false;
    ++*elements;
    const bool self_closing = tag.ends_with("/");
    std::string name = tag.substr(0, tag.find_first_of(" /"));
    if (!self_closing) open.push_back(name);
  }
  return open.empty();
}

TEST(TimeSeries, TheSvgIsWellFormedWithOneLinePerSchedulerAndPanel) {
  auto nodes = UniformNodes(1, 8, "H100-80GB");
  std::vector<SimJob> jobs{Job(1, 0, 100, 8), Job(2, 5, 100, 4), Job(3, 7, 3600, 2)};
  sched::FifoScheduler fifo;
  sched::CoreScheduler core;
  auto a = Simulate(nodes, jobs, model::DefaultPolicy(), fifo, {});
  auto b = Simulate(nodes, jobs, model::DefaultPolicy(), core, {});
  ASSERT_TRUE(a && b);
  const std::string svg =
      RenderSvg({{"fifo", &a->samples}, {"berth <core>", &b->samples}}, 8, "t & t");
  int elements = 0;
  EXPECT_TRUE(WellFormed(svg, &elements)) << svg;
  EXPECT_GT(elements, 10);
  std::size_t polylines = 0;
  for (std::size_t p = svg.find("<polyline"); p != std::string::npos;
       p = svg.find("<polyline", p + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 4U);  // two schedulers, two panels
  EXPECT_NE(svg.find(">fifo</text>"), std::string::npos);
  EXPECT_NE(svg.find(">berth &lt;core&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find("allocated GPUs"), std::string::npos);
  EXPECT_NE(svg.find("pending jobs"), std::string::npos);
  EXPECT_TRUE(svg.starts_with("<?xml"));
}

// The plot escapes with the one HTML escaper (common/text_escape.h), which
// also writes ' as an entity: a name is inert in an attribute quoted either way.
TEST(TimeSeries, TheSvgEscapesApostrophesInNamesAndTitle) {
  const std::vector<Sample> none;
  const std::string svg = RenderSvg({{"o'brien", &none}}, 8, "it's <t>");
  EXPECT_NE(svg.find(">o&#39;brien</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("it&#39;s &lt;t&gt;"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("o'brien"), std::string::npos) << svg;
}

TEST(Fill, BestFitPacksSlicesWhereSpreadStrandsAWholeGpuPod) {
  // Two 1-GPU sharing nodes; pods: half a GPU, half a GPU, one whole GPU.
  auto nodes = UniformNodes(2, 1, "T4");
  for (auto& n : nodes) n.gpus[0].sharing = true;
  std::vector<SimJob> pods{Job(1, 0, 1, 0), Job(2, 1, 1, 0), Job(3, 2, 1, 1)};
  pods[0].resources.gpu_share_millis = 500;
  pods[1].resources.gpu_share_millis = 500;
  FillOptions options;
  options.milestones = {0.5, 1.0};
  PlacementBaseline best(PlacementRule::kBestFit);
  PlacementBaseline spread(PlacementRule::kSpread);
  auto b = Fill(nodes, pods, best, "best-fit", options);
  auto s = Fill(nodes, pods, spread, "spread", options);
  ASSERT_TRUE(b && s);
  ASSERT_EQ(b->points.size(), 2U);
  ASSERT_EQ(s->points.size(), 2U);
  EXPECT_EQ(b->cluster_gpus, 2);
  EXPECT_EQ(b->points[0].arrived_pods, 2);  // 1 GPU arrived = 50%
  EXPECT_DOUBLE_EQ(b->points[0].allocated_gpus, 1.0);
  EXPECT_DOUBLE_EQ(b->points[1].unallocated_gpus, 0.0);
  EXPECT_FALSE(b->first_failure_share.has_value());
  EXPECT_DOUBLE_EQ(s->points[1].unallocated_gpus, 1.0);
  EXPECT_EQ(s->points[1].failed_pods, 1);
  EXPECT_EQ(s->points[1].failed_model_pods, 0);
  ASSERT_TRUE(s->first_failure_share.has_value());
  EXPECT_DOUBLE_EQ(*s->first_failure_share, 0.5);
  // Spread leaves half a GPU on each node: the half-GPU pods (2 of 3) could
  // use it, the whole-GPU pod (1 of 3) not: 2 x 0.5 x 1/3 fragmented.
  EXPECT_NEAR(s->points[1].fragmented_gpus, 1.0 / 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(b->points[1].fragmented_gpus, 0.0);
  EXPECT_NE(RenderFillTable({*b, *s}).find("UNALLOCATED"), std::string::npos);
  EXPECT_DOUBLE_EQ(ToJson(*s)["points"][1]["unallocated_gpus"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(ToJson(*s)["first_failure_arrived_share"].get<double>(), 0.5);
}

TEST(ReadDlrm, InstancesBecomeServingJobsThatLastToTheWindowsEnd) {
  std::istringstream in(
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
      "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
      "creation_time,scheduled_time,deletion_time\n"
      "i0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n"
      "i1,CN,app_1,64,64,0,0,0,0,320.0,320.0,100.0,100.0,-1,1000.5,1001.0,5000.0000000001\n"
      "i2,CN,app_1,16,16,0,0,0,0,64.0,64.0,100.0,100.0,-1,2000.0,2000.0,\n");
  auto jobs = ReadDlrm(in, {4, 0});
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 3U);
  const SimJob& hn = (*jobs)[0];  // pre-exists the window: submitted at 0
  EXPECT_EQ(hn.name, "i0");
  EXPECT_EQ(hn.submit_ms, 0);
  EXPECT_EQ(hn.duration_ms, 5'000'000);  // to the window's end (the last time in the file)
  EXPECT_EQ(hn.resources.gpus, 1U);
  EXPECT_EQ(hn.resources.cpu_millis, 12'000U);
  EXPECT_EQ(hn.resources.memory_bytes, 120ULL << 30);
  EXPECT_EQ(hn.queue, "serving");
  const SimJob& cn = (*jobs)[1];
  EXPECT_EQ(cn.submit_ms, 1'000'500);
  EXPECT_EQ(cn.duration_ms, 4'000'000 - 500);
  EXPECT_EQ(cn.resources.gpus, 0U);
  EXPECT_EQ((*jobs)[2].tenant, cn.tenant);  // an app's instances share a tenant
  EXPECT_EQ((*jobs)[2].duration_ms, 3'000'000);

  std::istringstream bad(
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
      "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
      "creation_time,scheduled_time,deletion_time\n"
      "i0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n"
      "i1,XN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n");
  auto e = ReadDlrm(bad, {});
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("line 3: role 'XN'"), std::string::npos) << e.error().message;
  auto nodes = DlrmNodes(2, 3);
  ASSERT_EQ(nodes.size(), 5U);
  EXPECT_EQ(nodes[0].gpus.size(), 8U);
  EXPECT_TRUE(nodes[4].gpus.empty());
}

std::filesystem::path TracesDir() {
  const char* env = std::getenv("BERTH_TRACES_DIR");
  return env != nullptr ? std::filesystem::path(env) : std::filesystem::path(BERTH_TRACES_DIR);
}

TEST(ReadDlrm, TheShippedTraceHasItsDocumentedShape) {
  const auto path = TracesDir() / "alibaba-dlrm-2025" / "disaggregated_DLRM_trace.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto jobs = ReadDlrmFile(path, {4, 0});
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 23'871U);
  std::size_t gpu = 0;
  std::size_t at_zero = 0;
  for (const auto& j : *jobs) {
    if (j.resources.gpus == 1) ++gpu;
    if (j.submit_ms == 0) ++at_zero;
    EXPECT_GT(j.duration_ms, 0) << j.name;
  }
  EXPECT_EQ(gpu, 7'386U);      // HN instances
  EXPECT_EQ(at_zero, 7'280U);  // pre-exist the window
}

TEST(ReadItp, TheShippedClustersHaveTheirRowCounts) {
  const auto dir = TracesDir() / "msft-itp-2021";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir;
  const std::map<std::string, std::size_t> rows{
      {"cluster01", 1'595},  {"cluster02", 5'778},  {"cluster03", 3'011},
      {"cluster04", 15'802}, {"cluster05", 3'629},  {"cluster06", 2'396},
      {"cluster08", 13'047}, {"cluster09", 11'134}, {"cluster10", 260}};
  for (const auto& [name, count] : rows) {
    auto jobs = ReadItpFile(dir / (name + ".csv"), {4, 8, 0});
    ASSERT_TRUE(jobs.has_value()) << name << ": " << jobs.error().message;
    EXPECT_EQ(jobs->size(), count) << name;
    for (const auto& j : *jobs) {
      ASSERT_GT(j.replicas * std::max<std::uint32_t>(j.resources.gpus, 1), 0U) << name;
      ASSERT_GE(j.duration_ms, 0) << name << " job " << j.name;
    }
  }
}

TEST(ReadOpenb, TheShippedListsHaveTheirRowCounts) {
  const auto dir = TracesDir() / "alibaba-openb-2023";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir;
  auto nodes = ReadOpenbNodesFile(dir / "openb_node_list_all_node.csv");
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message;
  EXPECT_EQ(nodes->size(), 1'523U);
  for (const char* list : {"openb_pod_list_default.csv", "openb_pod_list_gpuspec33.csv"}) {
    auto pods = ReadOpenbPodsFile(dir / list, {});
    ASSERT_TRUE(pods.has_value()) << list << ": " << pods.error().message;
    EXPECT_EQ(pods->size(), 8'152U) << list;
  }
}

}  // namespace
}  // namespace berth::sim
