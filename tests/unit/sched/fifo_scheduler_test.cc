#include "sched/fifo_scheduler.h"

#include <gtest/gtest.h>

#include <set>

namespace berth::sched {
namespace {

NodeView Node(std::string name, std::uint32_t gpus, std::string model = "H100-80GB",
              std::uint64_t mem = 80ULL << 30) {
  NodeView n;
  n.name = std::move(name);
  n.ready = true;
  n.cpu_millis_free = 64'000;
  n.memory_bytes_free = 512ULL << 30;
  for (std::uint32_t i = 0; i < gpus; ++i) {
    n.gpus.push_back({i, n.name + "-" + std::to_string(i), model, mem, true, true});
  }
  return n;
}

PendingJob Job(std::int64_t id, std::uint32_t replicas, std::uint32_t gpus, TimeMs at = 0) {
  PendingJob j;
  j.id = id;
  j.tenant = "default";
  j.queue = "default";
  j.submitted_at_ms = at == 0 ? id : at;
  j.replicas = replicas;
  j.resources.gpus = gpus;
  return j;
}

TEST(FifoScheduler, PlacesFirstFitAndTakesLowestIndices) {
  Snapshot s;
  s.nodes = {Node("a", 8)};
  s.pending = {Job(1, 1, 2)};
  Plan plan = FifoScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].replicas[0].node, "a");
  EXPECT_EQ(plan.placements[0].replicas[0].gpu_indices, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_TRUE(plan.pending.empty());
}

TEST(FifoScheduler, GangIsAllOrNothing) {
  Snapshot s;
  s.nodes = {Node("a", 4), Node("b", 2)};
  s.pending = {Job(1, 2, 4)};  // needs two nodes of 4 free GPUs: only one exists
  Plan plan = FifoScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.pending.size(), 1U);
  EXPECT_EQ(plan.pending[0].reason.code, model::ReasonCode::kNoNodeFits);
  EXPECT_EQ(plan.pending[0].reason.counts.at(std::string(model::kCauseGang)), 1);
  EXPECT_NE(model::RenderReason(plan.pending[0].reason).find("only 1 of 2 replicas"),
            std::string::npos);
}

TEST(FifoScheduler, HeadOfQueueBlocksLaterJobsWithAReason) {
  Snapshot s;
  s.nodes = {Node("a", 2)};
  s.pending = {Job(2, 1, 1), Job(1, 1, 4)};  // job 1 is older and does not fit
  Plan plan = FifoScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.pending.size(), 2U);
  EXPECT_EQ(plan.pending[0].job_id, 1);
  EXPECT_EQ(plan.pending[1].reason.code, model::ReasonCode::kBehindInQueue);
  EXPECT_EQ(plan.pending[1].reason.counts.at("blocked_by"), 1);
}

TEST(FifoScheduler, CountsRejectionsPerCause) {
  Snapshot s;
  s.nodes = {Node("a", 8, "A100-40GB", 40ULL << 30), Node("b", 8), Node("c", 8)};
  s.nodes[1].ready = false;
  for (auto& g : s.nodes[2].gpus) g.free = false;
  PendingJob j = Job(1, 1, 2);
  j.resources.gpu_model = "H100-80GB";
  s.pending = {j};
  Plan plan = FifoScheduler().Schedule(s);
  ASSERT_EQ(plan.pending.size(), 1U);
  const auto& c = plan.pending[0].reason.counts;
  EXPECT_EQ(c.at(std::string(model::kCauseGpuModel)), 1);
  EXPECT_EQ(c.at(std::string(model::kCauseNotReady)), 1);
  EXPECT_EQ(c.at(std::string(model::kCauseTooFewGpus)), 1);
  EXPECT_EQ(c.at("nodes"), 3);
  EXPECT_NE(model::RenderReason(plan.pending[0].reason).find("0/3 nodes"), std::string::npos);
}

TEST(FifoScheduler, NeverHandsOutAGpuTwice) {
  Snapshot s;
  s.nodes = {Node("a", 8), Node("b", 8)};
  for (int i = 1; i <= 10; ++i) s.pending.push_back(Job(i, 1, 3));
  Plan plan = FifoScheduler().Schedule(s);
  std::set<std::pair<std::string, std::uint32_t>> used;
  for (const auto& p : plan.placements) {
    for (const auto& r : p.replicas) {
      for (auto g : r.gpu_indices) EXPECT_TRUE(used.insert({r.node, g}).second);
    }
  }
  EXPECT_EQ(plan.placements.size(), 4U);  // 2 per node (6 of 8 GPUs)
}

TEST(FifoScheduler, SameInputSamePlan) {
  Snapshot s;
  s.nodes = {Node("b", 8), Node("a", 4)};
  for (int i = 1; i <= 6; ++i) s.pending.push_back(Job(i, 1 + i % 2, 2));
  Plan p1 = FifoScheduler().Schedule(s);
  Plan p2 = FifoScheduler().Schedule(s);
  ASSERT_EQ(p1.placements.size(), p2.placements.size());
  for (std::size_t i = 0; i < p1.placements.size(); ++i) {
    EXPECT_EQ(p1.placements[i].job_id, p2.placements[i].job_id);
    EXPECT_EQ(p1.placements[i].replicas[0].node, p2.placements[i].replicas[0].node);
    EXPECT_EQ(p1.placements[i].replicas[0].gpu_indices, p2.placements[i].replicas[0].gpu_indices);
  }
}

TEST(FifoScheduler, NoScheduleTaintKeepsJobsOff) {
  Snapshot s;
  s.nodes = {Node("a", 8), Node("b", 8)};
  s.nodes[0].taints.push_back({"dedicated", "inference", "NoSchedule"});
  s.nodes[1].taints.push_back({"spot", "", "PreferNoSchedule"});
  s.pending = {Job(1, 1, 1), Job(2, 1, 8)};
  Plan plan = FifoScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].replicas[0].node, "b");
  ASSERT_EQ(plan.pending.size(), 1U);
  EXPECT_EQ(plan.pending[0].reason.counts.at(std::string(model::kCauseTaint)), 1);
}

TEST(FifoScheduler, UnhealthyGpusAreNotUsed) {
  Snapshot s;
  s.nodes = {Node("a", 2)};
  s.nodes[0].gpus[0].healthy = false;
  s.pending = {
      Job(1, 1, 2),
  };
  Plan plan = FifoScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  s.pending = {Job(1, 1, 1)};
  plan = FifoScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].replicas[0].gpu_indices, (std::vector<std::uint32_t>{1}));
}

}  // namespace
}  // namespace berth::sched
