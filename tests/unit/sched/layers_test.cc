// The node layer of a reason about something else (sched/layers.h): of the
// nodes, which could ever take a replica, and what rules out the others,
// every cause of each node, ranked by the nodes one change alone would open;
// pools come from the job or its queue's chain, as in a cycle.
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

std::int64_t Alone(const NodeLayer& l, std::string_view cause) {
  auto it = l.alone.find(cause);
  return it == l.alone.end() ? -1 : it->second;
}

using CauseCount = std::pair<std::string, std::int64_t>;

TEST(NodeLayer, ANodeCountsUnderEachOfItsCausesAndOpensOnlyWhenItsOnlyOneIsLifted) {
  PendingJob j = Job(4);
  j.resources.gpu_model = "B200";
  NodeLayer l = NodeLayerOf(Nodes(), PoolsPolicy(), j);
  EXPECT_EQ(l.could_take, 0);
  // No node has a B200: the model rules all six out, and alone it keeps out
  // t1 and t2; the others each have a cause of their own beside it.
  EXPECT_EQ(Excluded(l, model::kCauseGpuModel), 6);
  EXPECT_EQ(Alone(l, model::kCauseGpuModel), 2);
  EXPECT_EQ(Excluded(l, model::kCauseTaint), 1);
  EXPECT_EQ(Alone(l, model::kCauseTaint), 0) << "a1 also has no B200";
  EXPECT_EQ(Alone(l, model::kCauseNotReady), 0);
  ASSERT_FALSE(l.excluded.empty());
  EXPECT_EQ(l.excluded.front(), (CauseCount{"gpu_model_mismatch", 6}));

  // A pool its queue is not bound to rules out every node; alone it keeps
  // out the three that are ready, uncordoned and untainted.
  PendingJob pinned = Job(4);
  pinned.pool = "inference";
  l = NodeLayerOf(Nodes(), PoolsPolicy(), pinned);
  EXPECT_EQ(l.could_take, 0);
  EXPECT_EQ(l.excluded.front(), (CauseCount{"outside_pool", 6}));
  EXPECT_EQ(Alone(l, model::kCausePool), 3) << "t1, t2 and i1";

  // More GPUs per replica than any node has.
  l = NodeLayerOf(Nodes(), PoolsPolicy(), Job(16));
  EXPECT_EQ(l.could_take, 0);
  EXPECT_EQ(Excluded(l, model::kCauseTooFewGpusInTotal), 6);
  EXPECT_EQ(Alone(l, model::kCauseTooFewGpusInTotal), 2);
}

// s1, s2: tainted only; m1..m4: A100s and no `zone: a` label. The selector
// and the model each rule out four nodes, the taint two; but lifting the
// taint alone opens two nodes, while the selector or the model alone opens
// none: the taint is the least change and comes first.
TEST(NodeLayer, TheCauseWhoseLiftingAloneOpensTheMostNodesComesFirst) {
  std::vector<NodeView> nodes;
  for (const char* name : {"s1", "s2", "m1", "m2", "m3", "m4"}) {
    NodeView n = tests::ReadyH100View(name, 8);
    if (name[0] == 's') {
      n.labels["zone"] = "a";
      n.taints.push_back({"dedicated", "ops", "NoSchedule"});
    } else {
      for (auto& g : n.gpus) g.model = "A100-80GB";
    }
    nodes.push_back(std::move(n));
  }
  PendingJob j = Job(4);
  j.tenant = "default";
  j.queue = "default";
  j.resources.gpu_model = "H100-80GB";
  j.node_selector["zone"] = "a";
  const NodeLayer l = NodeLayerOf(nodes, model::DefaultPolicy(), j);
  EXPECT_EQ(l.nodes, 6);
  EXPECT_EQ(l.could_take, 0);
  EXPECT_EQ(l.excluded, (std::vector<CauseCount>{{"untolerated_taint", 2},
                                                 {"gpu_model_mismatch", 4},
                                                 {"node_selector_mismatch", 4}}));
  EXPECT_EQ(Alone(l, model::kCauseTaint), 2);
  EXPECT_EQ(Alone(l, model::kCauseGpuModel), 0);
  EXPECT_EQ(Alone(l, model::kCauseSelector), 0);

  // Drop the selector: now the model is the only cause on m1..m4, and
  // lifting it alone opens four nodes, more than the taint's two.
  j.node_selector.clear();
  const NodeLayer only_model = NodeLayerOf(nodes, model::DefaultPolicy(), j);
  EXPECT_EQ(only_model.excluded,
            (std::vector<CauseCount>{{"gpu_model_mismatch", 4}, {"untolerated_taint", 2}}));
  EXPECT_EQ(Alone(only_model, model::kCauseGpuModel), 4);
}

// A node without the model and without the memory names both: lifting the
// model alone would still leave its GPUs too small.
TEST(NodeLayer, ANodeShortOfBothTheModelAndTheMemoryNamesBoth) {
  std::vector<NodeView> nodes{tests::ReadyH100View("small", 8), tests::ReadyH100View("big", 8)};
  for (auto& g : nodes[0].gpus) {
    g.model = "A100-40GB";
    g.memory_bytes = 40ULL << 30;
  }
  for (auto& g : nodes[1].gpus) g.model = "A100-80GB";
  PendingJob j = Job(2);
  j.tenant = "default";
  j.queue = "default";
  j.resources.gpu_model = "H100-80GB";
  j.resources.gpu_memory_bytes = 80ULL << 30;
  const NodeLayer l = NodeLayerOf(nodes, model::DefaultPolicy(), j);
  EXPECT_EQ(l.could_take, 0);
  EXPECT_EQ(Excluded(l, model::kCauseGpuModel), 2);
  EXPECT_EQ(Alone(l, model::kCauseGpuModel), 1) << "big: 80 GB A100s";
  EXPECT_EQ(Excluded(l, model::kCauseGpuMemory), 1);
  EXPECT_EQ(Alone(l, model::kCauseGpuMemory), 0) << "small also lacks the model";
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
