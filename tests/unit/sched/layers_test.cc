// The node layer of a reason about something else (sched/layers.h): of the
// nodes, which could ever take a replica, and what rules out the others,
// most first; pools come from the job or its queue's chain, as in a cycle.
#include "sched/layers.h"

#include <gtest/gtest.h>

#include "unit/builders.h"

namespace berth::sched {
namespace {

model::Policy PoolsPolicy() {
  auto p = model::ParsePolicy(
      "pools:\n"
      "  - {name: training, selector: {pool: training}}\n"
      "  - {name: inference, selector: {pool: inference}}\n"
      "queues:\n"
      "  - {name: vision, pools: [training], children: [{name: train}]}\n");
  EXPECT_TRUE(p.has_value()) << p.error().message;
  return p.value_or(model::DefaultPolicy());
}

// t1, t2: training, 8 H100s; t3: training, not ready; i1: inference; a1:
// training, 8 A100s, tainted; c1: training, cordoned.
std::vector<NodeView> Nodes() {
  std::vector<NodeView> nodes;
  for (const char* name : {"t1", "t2", "t3", "i1", "a1", "c1"}) {
    NodeView n = tests::ReadyH100View(name, 8);
    n.labels["pool"] = std::string(name) == "i1" ? "inference" : "training";
    nodes.push_back(std::move(n));
  }
  nodes[2].ready = false;
  for (auto& g : nodes[4].gpus) g.model = "A100-80GB";
  nodes[4].taints.push_back({"dedicated", "ops", "NoSchedule"});
  nodes[5].cordoned = true;
  // GPUs in use change nothing: the layer is about what could ever be.
  for (auto& g : nodes[0].gpus) g.free = false;
  return nodes;
}

PendingJob Job(std::uint32_t gpus) {
  PendingJob j;
  j.id = 1;
  j.tenant = "vision";
  j.queue = "train";
  j.resources.gpus = gpus;
  return j;
}

std::int64_t Excluded(const NodeLayer& l, std::string_view cause) {
  for (const auto& [c, n] : l.excluded) {
    if (c == cause) return n;
  }
  return 0;
}

TEST(NodeLayer, CountsTheNodesThatCouldEverTakeAReplicaAndWhyNotTheOthers) {
  const NodeLayer l = NodeLayerOf(Nodes(), PoolsPolicy(), Job(4));
  EXPECT_EQ(l.nodes, 6);
  EXPECT_EQ(l.could_take, 2) << "t1 (its GPUs busy now) and t2";
  EXPECT_EQ(Excluded(l, model::kCauseNotReady), 1);
  EXPECT_EQ(Excluded(l, model::kCausePool), 1) << "i1: the queue's parent binds training";
  EXPECT_EQ(Excluded(l, model::kCauseTaint), 1);
  EXPECT_EQ(Excluded(l, model::kCauseCordoned), 1);
  EXPECT_EQ(l.excluded.size(), 4U);
}

TEST(NodeLayer, TheCauseRulingOutTheMostNodesComesFirst) {
  PendingJob j = Job(4);
  j.resources.gpu_model = "B200";
  NodeLayer l = NodeLayerOf(Nodes(), PoolsPolicy(), j);
  EXPECT_EQ(l.could_take, 0);
  ASSERT_FALSE(l.excluded.empty());
  EXPECT_EQ(l.excluded.front(), (std::pair<std::string, std::int64_t>{"gpu_model_mismatch", 2}));

  // A pool its queue is not bound to: every ready, uncordoned node is out.
  PendingJob pinned = Job(4);
  pinned.pool = "inference";
  l = NodeLayerOf(Nodes(), PoolsPolicy(), pinned);
  EXPECT_EQ(l.could_take, 0);
  EXPECT_EQ(l.excluded.front(), (std::pair<std::string, std::int64_t>{"outside_pool", 4}));

  // More GPUs per replica than any node has.
  l = NodeLayerOf(Nodes(), PoolsPolicy(), Job(16));
  EXPECT_EQ(l.could_take, 0);
  EXPECT_EQ(Excluded(l, model::kCauseTooFewGpusInTotal), 2);
}

TEST(NodeLayer, AQueueWithoutPoolsMayUseEveryPool) {
  PendingJob j = Job(1);
  j.tenant = "default";
  j.queue = "default";
  const NodeLayer l = NodeLayerOf(Nodes(), model::DefaultPolicy(), j);
  EXPECT_EQ(l.could_take, 3) << "t1, t2 and i1; t3 not ready, a1 tainted, c1 cordoned";
}

}  // namespace
}  // namespace berth::sched
