// The Prometheus text writer: escaping, HELP/TYPE, cumulative histogram
// buckets; and the /metrics document built from a small cluster: GPU
// states, occupants on berth_gpu_info, pending reasons and the counters.
#include <gtest/gtest.h>

#include "api/metrics_render.h"

namespace berth::server {
namespace {

TEST(MetricsWriter, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue(R"(a\b"c)"
                             "\nd"),
            R"(a\\b\"c\nd)");
  EXPECT_EQ(EscapeHelp("say \"hi\"\\\nnext"), "say \"hi\"\\\\\\nnext");
  MetricsWriter w;
  w.Family("x_total", "counter", "Two\nlines");
  w.Sample("x_total", {{"name", "quote\"d"}, {"path", "C:\\dir"}}, 3);
  EXPECT_EQ(w.text(),
            "# HELP x_total Two\\nlines\n# TYPE x_total counter\n"
            "x_total{name=\"quote\\\"d\",path=\"C:\\\\dir\"} 3\n");
}

TEST(MetricsWriter, FormatsValues) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(12), "12");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  MetricsWriter w;
  w.Sample("up", {}, 1);
  EXPECT_EQ(w.text(), "up 1\n");
}

TEST(MetricsWriter, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  HistogramData h({1, 5});
  h.Observe(0.5);
  h.Observe(1);  // le="1" includes 1
  h.Observe(3);
  h.Observe(100);
  MetricsWriter w;
  w.Histogram("wait_seconds", {{"queue", "q"}}, h);
  EXPECT_EQ(w.text(),
            "wait_seconds_bucket{queue=\"q\",le=\"1\"} 2\n"
            "wait_seconds_bucket{queue=\"q\",le=\"5\"} 3\n"
            "wait_seconds_bucket{queue=\"q\",le=\"+Inf\"} 4\n"
            "wait_seconds_sum{queue=\"q\"} 104.5\n"
            "wait_seconds_count{queue=\"q\"} 4\n");
}

store::JobRecord Holder(std::int64_t id, const std::string& tenant, const std::string& node,
                        std::vector<std::uint32_t> gpus) {
  store::JobRecord j;
  j.id = id;
  j.state = model::JobState::kRunning;
  j.spec.tenant = tenant;
  j.spec.queue = "train";
  store::RunRecord r;
  r.node = node;
  r.gpu_indices = std::move(gpus);
  r.state = model::RunState::kRunning;
  j.runs.push_back(r);
  return j;
}

TEST(RenderMetrics, CountsGpuStatesAndNamesOccupants) {
  NodeStatus n;
  n.record.info.name = "n1";
  n.record.info.hostname = "host-1";
  n.record.info.labels = {{"pool", "training"}};
  n.record.state = model::NodeState::kReady;
  for (std::uint32_t i = 0; i < 4; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.model = "H100-80GB";
    n.record.info.gpus.push_back(g);
  }
  n.record.info.gpus[2].health = model::Health::kUnhealthy;
  n.record.gpu_cordons[3] = store::Cordon{};
  std::vector<NodeStatus> nodes = {n};
  std::vector<store::JobRecord> holders = {Holder(7, "acme", "n1", {1})};
  store::JobRecord waiting;
  waiting.id = 8;
  waiting.spec.tenant = "acme";
  waiting.spec.queue = "train";
  waiting.reason.code = model::ReasonCode::kNoNodeFits;
  std::vector<store::JobRecord> pending = {waiting};
  model::Policy policy;
  policy.pools.push_back({"training", {{"pool", "training"}}});
  ServerMetrics counters;
  counters.CountOutcome("acme", "Failed", "user_code");
  counters.CountPreemption("reclaim");
  counters.ObserveQueueWait("acme", "train", 42);
  counters.ObserveCycle(0.003, 2);

  const std::string text =
      RenderMetrics(ClusterView{&nodes, &holders, &pending, &policy}, counters);
  const std::vector<std::string> wants = {
      R"(berth_gpus{pool="training",model="H100-80GB",state="free"} 1)",
      R"(berth_gpus{pool="training",model="H100-80GB",state="allocated"} 1)",
      R"(berth_gpus{pool="training",model="H100-80GB",state="unhealthy"} 1)",
      R"(berth_gpus{pool="training",model="H100-80GB",state="cordoned"} 1)",
      R"(berth_gpu_info{node="n1",gpu="1",uuid="GPU-1",model="H100-80GB",pool="training",)"
      R"(state="allocated",job="7",tenant="acme",queue="train",Hostname="host-1",)"
      R"(UUID="GPU-1"} 1)",
      R"(berth_gpu_info{node="n1",gpu="0",uuid="GPU-0",model="H100-80GB",pool="training",)"
      R"(state="free",job="",tenant="",queue="",)",
      R"(berth_nodes{state="Ready"} 1)",
      R"(berth_jobs{state="Running"} 1)",
      R"(berth_jobs{state="Pending"} 1)",
      R"(berth_pending_jobs{tenant="acme",queue="train",reason="NoNodeFits"} 1)",
      R"(berth_job_outcomes_total{tenant="acme",outcome="Failed",failure_class="user_code"} 1)",
      R"(berth_preemptions_total{reason="reclaim"} 1)",
      R"(berth_preemptions_total{reason="preempt"} 0)",
      R"(berth_queue_wait_seconds_bucket{tenant="acme",queue="train",le="30"} 0)",
      R"(berth_queue_wait_seconds_bucket{tenant="acme",queue="train",le="60"} 1)",
      R"(berth_scheduler_cycle_seconds_count 1)",
      R"(berth_scheduler_placements_total 2)",
  };
  for (const auto& want : wants) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\n" << text;
  }
}

}  // namespace
}  // namespace berth::server

namespace berth::server {
namespace {

TEST(RenderLeadershipMetrics, ASingleBerthdAndALeaderSayTheirRoleAndTerm) {
  const std::string single = RenderLeadershipMetrics(nlohmann::json::object());
  EXPECT_NE(single.find("berth_leader{role=\"single\"} 1\n"), std::string::npos) << single;
  EXPECT_NE(single.find("berth_leader_term 0\n"), std::string::npos) << single;
  const std::string leader = RenderLeadershipMetrics(
      nlohmann::json{{"role", "leader"}, {"term", 7}, {"leading_since", 1'700'000'000'500}});
  EXPECT_NE(leader.find("berth_leader{role=\"leader\"} 1\n"), std::string::npos) << leader;
  EXPECT_NE(leader.find("berth_leader_term 7\n"), std::string::npos) << leader;
  EXPECT_NE(leader.find("berth_leader_since_seconds 1700000000.5\n"), std::string::npos) << leader;
}

}  // namespace
}  // namespace berth::server
