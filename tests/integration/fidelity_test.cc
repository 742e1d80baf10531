// Fidelity: the same small workload through a real berthd (simulated GPUs,
// real processes) and through berth-sim replaying berthd's own history
// export. Where the timing is the same the two must agree on every job's
// placement (nodes and GPUs) and on the order jobs are placed in; the workload's
// events are at least half a second apart, so the simulator's 100 ms cycle
// grid and berthd's pass latency cannot reorder them (docs/evaluation.md).
#include <algorithm>

#include "integration/fixture.h"
#include "model/policy.h"
#include "sched/core_scheduler.h"
#include "sim/engine.h"
#include "sim/history.h"

namespace berth::it {
namespace {

using nlohmann::json;

struct Start {
  std::int64_t berth_id = 0;
  TimeMs at = 0;
  std::vector<std::string> where;  // "node:gpu,gpu" per replica
};

std::vector<std::int64_t> Order(std::vector<Start> starts) {
  std::stable_sort(starts.begin(), starts.end(),
                   [](const Start& a, const Start& b) { return a.at < b.at; });
  std::vector<std::int64_t> out;
  for (const auto& s : starts) out.push_back(s.berth_id);
  return out;
}

std::string Where(const std::string& node, const std::vector<std::uint32_t>& gpus) {
  std::string out = node + ":";
  for (std::size_t i = 0; i < gpus.size(); ++i) out += (i ? "," : "") + std::to_string(gpus[i]);
  return out;
}

TEST_F(IntegrationTest, BerthSimPlacesAndOrdersASmallWorkloadAsBerthdDid) {
  BerthdOptions options = AllInOne();
  options.simulate = WriteCluster(std::vector<std::string>{"f1", "f2"}, 4);
  Berthd& berthd = NewBerthd(options);
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  // name, GPUs, seconds. Expected: a and b start at once on f1 and f2; c
  // waits for a, d for c (e behind it), e for b.
  const std::vector<std::tuple<std::string, int, std::string>> workload{
      {"a", 4, "1"}, {"b", 4, "2.5"}, {"c", 2, "1"}, {"d", 4, "1"}, {"e", 2, "1.5"}};
  std::vector<std::int64_t> ids;
  for (const auto& [name, gpus, secs] : workload) {
    std::string error;
    ids.push_back(berthd.Submit(JobSpecJson(name, {"sleep", secs}, gpus), &error));
    ASSERT_NE(ids.back(), 0) << error;
  }
  for (auto id : ids) {
    ASSERT_TRUE(berthd.WaitForTerminal(id, 60s)) << berthd.Job(id).dump(2);
    ASSERT_EQ(berthd.JobState(id), "Succeeded") << berthd.Job(id).dump(2);
  }

  // What berthd did.
  std::vector<Start> real;
  for (auto id : ids) {
    json job = berthd.Job(id);
    // Placed at: the pass that scheduled it (processes placed in one pass
    // start a few milliseconds apart, in no particular order).
    TimeMs placed_at = 0;
    for (const auto& e : job["timeline"]) {
      if (e["event"] == "Scheduled") {
        placed_at = e["time_ms"].get<TimeMs>();
        break;
      }
    }
    ASSERT_GT(placed_at, 0) << job.dump(2);
    Start s{id, placed_at, {}};
    for (const auto& r : job["placement"]) {
      s.where.push_back(Where(r["node"], r["gpus"].get<std::vector<std::uint32_t>>()));
    }
    real.push_back(std::move(s));
  }

  // What berth-sim does with berthd's own history.
  Reply export_reply = berthd.http().Get("/v1/history?since=1h");
  ASSERT_EQ(export_reply.status, 200) << export_reply.text;
  auto history = sim::ReadHistory(export_reply.body);
  ASSERT_TRUE(history.has_value()) << history.error().message;
  ASSERT_EQ(history->jobs.size(), ids.size());
  model::Policy policy = model::DefaultPolicy();
  if (!history->policy_yaml.empty()) {
    auto parsed = model::ParsePolicy(history->policy_yaml);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    policy = *parsed;
  }
  sim::SimOptions sim_options;
  sim_options.cycle_ms = 100;
  sim_options.restart_overhead_ms = 0;
  sched::CoreScheduler core;
  auto result = sim::Simulate(history->nodes, history->jobs, policy, core, sim_options);
  ASSERT_TRUE(result.has_value()) << result.error().message;
  std::vector<Start> replay;
  for (const auto& o : result->jobs) {
    const auto& job = history->jobs.at(static_cast<std::size_t>(o.id - 1));
    ASSERT_TRUE(o.first_start_ms.has_value()) << "job " << job.name << " never started";
    Start s{std::stoll(job.name), *o.first_start_ms, {}};
    for (const auto& r : o.first_placement) s.where.push_back(Where(r.node, r.gpu_indices));
    replay.push_back(std::move(s));
  }

  EXPECT_EQ(Order(replay), Order(real));
  std::map<std::int64_t, std::vector<std::string>> real_where;
  for (const auto& s : real) real_where[s.berth_id] = s.where;
  for (const auto& s : replay) {
    EXPECT_EQ(s.where, real_where[s.berth_id]) << "job " << s.berth_id;
  }
  // And the expected story, so that agreeing on something else fails too.
  std::map<std::int64_t, std::string> node_of;
  for (const auto& s : real) node_of[s.berth_id] = s.where.front().substr(0, 2);
  EXPECT_EQ(node_of[ids[0]], "f1");
  EXPECT_EQ(node_of[ids[1]], "f2");
  EXPECT_EQ(node_of[ids[2]], "f1");
  EXPECT_EQ(node_of[ids[3]], "f1");
  EXPECT_EQ(node_of[ids[4]], "f2");
  EXPECT_EQ(Order(real), ids);
}

}  // namespace
}  // namespace berth::it
