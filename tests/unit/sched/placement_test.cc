// The placement working copy over a snapshot's nodes: it reads them in
// place and never writes them, finds nodes by name, and orders nodes, GPUs
// and models itself when the snapshot does not.
#include "sched/placement.h"

#include <gtest/gtest.h>

#include "sched/cycle.h"

namespace berth::sched {
namespace {

NodeView Node(std::string name, std::vector<std::pair<std::uint32_t, std::string>> gpus) {
  NodeView v;
  v.name = std::move(name);
  v.ready = true;
  v.cpu_millis_free = 64'000;
  v.memory_bytes_free = 512ULL << 30;
  for (auto& [index, model] : gpus) {
    GpuView g;
    g.index = index;
    g.model = model;
    g.memory_bytes = 80ULL << 30;
    v.gpus.push_back(g);
  }
  return v;
}

JobShape Gpus(std::uint32_t gpus, std::string model = "") {
  JobShape s;
  s.resources.gpus = gpus;
  s.resources.gpu_model = std::move(model);
  s.resources.cpu_millis = 1000;
  return s;
}

TEST(Cluster, PlacesOnItsOwnCopyAndLeavesTheSnapshotsNodesAsTheyWere) {
  const std::vector<NodeView> nodes{Node("a", {{0, "A100"}, {1, "A100"}}),
                                    Node("b", {{0, "H100"}, {1, "H100"}})};
  const std::vector<NodeView> before = nodes;
  Cluster cluster(nodes);
  auto placed = cluster.PlaceGang(Gpus(2, "H100"), nullptr);
  ASSERT_TRUE(placed.has_value());
  ASSERT_EQ(placed->size(), 1U);
  EXPECT_EQ(placed->front().node, "b");
  // The cluster sees the GPUs taken, the snapshot's nodes do not.
  EXPECT_FALSE(cluster.Node(1).gpus[0].free);
  EXPECT_EQ(cluster.Node(1).cpu_millis_free, 63'000U);
  EXPECT_EQ(cluster.FreeGpus(), 2U);
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    EXPECT_EQ(nodes[n].cpu_millis_free, before[n].cpu_millis_free);
    for (const auto& g : nodes[n].gpus) EXPECT_TRUE(g.free) << nodes[n].name;
  }
  // A second H100 gang finds no room; the A100 node is still whole.
  EXPECT_FALSE(cluster.PlaceGang(Gpus(1, "H100"), nullptr).has_value());
  EXPECT_EQ(cluster.FreeEligible(0, Gpus(1, "A100")), 2U);
}

TEST(Cluster, OrdersNodesGpusAndModelsTheSnapshotGaveOutOfOrder) {
  // Names out of order, GPUs out of index order, and the models first seen
  // in the opposite of name order ("V100" before "A100").
  Cluster cluster({Node("c", {{1, "V100"}, {0, "V100"}}), Node("a", {{0, "A100"}}),
                   Node("b", {{0, "V100"}, {1, "A100"}})});
  ASSERT_EQ(cluster.size(), 3U);
  EXPECT_EQ(cluster.Node(0).name, "a");
  EXPECT_EQ(cluster.Node(2).name, "c");
  EXPECT_EQ(cluster.Node(2).gpus[0].index, 0U);
  EXPECT_EQ(cluster.Models(), (std::vector<std::string>{"A100", "V100"}));
  EXPECT_EQ(cluster.Find("a"), std::optional<std::size_t>{0});
  EXPECT_EQ(cluster.Find("b"), std::optional<std::size_t>{1});
  EXPECT_EQ(cluster.Find("c"), std::optional<std::size_t>{2});
  EXPECT_EQ(cluster.Find("d"), std::nullopt);
  EXPECT_EQ(cluster.Find(""), std::nullopt);
  // Free counts per model follow the renumbered ids.
  EXPECT_EQ(cluster.FreeEligible(0, Gpus(1, "A100")), 1U);
  EXPECT_EQ(cluster.FreeEligible(1, Gpus(1, "A100")), 1U);
  EXPECT_EQ(cluster.FreeEligible(1, Gpus(1, "V100")), 1U);
  EXPECT_EQ(cluster.FreeEligible(2, Gpus(1, "V100")), 2U);
  EXPECT_EQ(cluster.FreeEligible(2, Gpus(1, "A100")), 0U);
  // Packing by model: two V100s fit only on c.
  auto placed = cluster.PlaceGang(Gpus(2, "V100"), nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "c");
  EXPECT_EQ(placed->front().gpu_indices, (std::vector<std::uint32_t>{0, 1}));
}

TEST(Cluster, FindsEveryNodeOfALargeClusterByName) {
  std::vector<NodeView> nodes;
  for (int i = 0; i < 5000; ++i) nodes.push_back(Node("node-" + std::to_string(100000 + i), {}));
  Cluster cluster(nodes);
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    ASSERT_EQ(cluster.Find(nodes[n].name), std::optional<std::size_t>{n});
  }
  EXPECT_EQ(cluster.Find("node-99999"), std::nullopt);
  EXPECT_EQ(cluster.Find("node-1"), std::nullopt);
}

TEST(Cluster, RollbackRestoresACopiedNode) {
  const std::vector<NodeView> nodes{Node("a", {{0, "A100"}, {1, "A100"}})};
  Cluster cluster(nodes);
  const auto id = cluster.StateId();
  const auto mark = cluster.Mark();
  ASSERT_TRUE(cluster.PlaceGang(Gpus(1), nullptr).has_value());
  EXPECT_EQ(cluster.FreeGpus(), 1U);
  cluster.Rollback(mark);
  EXPECT_EQ(cluster.StateId(), id);
  EXPECT_EQ(cluster.FreeGpus(), 2U);
  EXPECT_TRUE(cluster.Node(0).gpus[0].free);
  EXPECT_EQ(cluster.Node(0).cpu_millis_free, 64'000U);
}

// FGD's score under GPU-model constraints: a replica free to use any model
// goes where it leaves the shapes asked for the most room, not simply to
// the fullest node.
TEST(Cluster, AJobFreeToUseAnyModelLeavesAScarceModelToTheShapesThatNeedIt) {
  const std::vector<NodeView> nodes{
      Node("a", {{0, "A100"}, {1, "A100"}}),
      Node("b", {{0, "H100"}, {1, "H100"}, {2, "H100"}, {3, "H100"}})};
  {
    Cluster packing(nodes);  // no demand known: the fullest node
    auto placed = packing.PlaceGang(Gpus(1), nullptr);
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->front().node, "a");
  }
  Cluster cluster(nodes);
  cluster.SetDemand({{2, "A100", 10}, {1, "", 3}});
  // On a: the A100 pair asked for no longer fits (+10 x 1 GPU left over).
  // On b: one fewer H100 that an A100 pair could never use (-10).
  EXPECT_EQ(cluster.FragmentationDelta(0, {0}), 10);
  EXPECT_EQ(cluster.FragmentationDelta(1, {0}), -10);
  auto placed = cluster.PlaceGang(Gpus(1), nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "b");
  // A job that names the model still gets it.
  placed = cluster.PlaceGang(Gpus(2, "A100"), nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "a");
}

TEST(Cluster, DemandWithoutAModelOrOnOneModelLeavesPackingAsItWas) {
  const std::vector<NodeView> one_model{Node("a", {{0, "H100"}, {1, "H100"}}),
                                        Node("b", {{0, "H100"}, {1, "H100"}, {2, "H100"}})};
  Cluster cluster(one_model);
  cluster.SetDemand({{2, "H100", 10}, {1, "", 3}});
  auto placed = cluster.PlaceGang(Gpus(1), nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "a");

  const std::vector<NodeView> two_models{Node("a", {{0, "A100"}, {1, "A100"}}),
                                         Node("b", {{0, "H100"}, {1, "H100"}, {2, "H100"}})};
  Cluster any(two_models);
  any.SetDemand({{2, "", 10}, {4, "V100", 5}});  // a model no node has: left out
  placed = any.PlaceGang(Gpus(1), nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "a");
}

TEST(Cluster, AJobThatFitsOnlyByMixingModelsStillFindsItsNode) {
  const std::vector<NodeView> nodes{Node("m", {{0, "A100"}, {1, "H100"}}),
                                    Node("b", {{0, "H100"}})};
  Cluster cluster(nodes);
  cluster.SetDemand({{1, "A100", 4}});
  auto placed = cluster.PlaceGang(Gpus(2), nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "m");
}

TEST(Cluster, ASliceFreeToUseAnyModelOpensAFreshGpuWhereTheShapesAskedForLeastNeedIt) {
  std::vector<NodeView> nodes{Node("a", {{0, "A100"}, {1, "A100"}}),
                              Node("b", {{0, "H100"}, {1, "H100"}})};
  for (auto& n : nodes) {
    for (auto& g : n.gpus) g.sharing = true;
  }
  JobShape slice = Gpus(0);
  slice.resources.gpu_share_millis = 250;
  {
    Cluster packing(nodes);
    auto placed = packing.PlaceGang(slice, nullptr);
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->front().node, "a");
  }
  Cluster cluster(nodes);
  cluster.SetDemand({{1, "A100", 5}});
  auto placed = cluster.PlaceGang(slice, nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "b");
  // The next slice fills the GPU already holding one, whatever its model.
  placed = cluster.PlaceGang(slice, nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "b");
  EXPECT_EQ(placed->front().gpu_indices, std::vector<std::uint32_t>{0});
}

// FGD's score (a sharing workload: slices among the shapes asked for). A
// 1-GPU job packed onto the node with the fewest free GPUs would leave it
// one GPU that the 2-GPU shapes asked for cannot use; FGD takes it from the
// node with three, and both nodes keep room for a 2-GPU job.
TEST(Cluster, FgdLeavesRoomForTheShapesAskedForWherePackingLeavesAnUnusableGpu) {
  std::vector<NodeView> nodes{Node("a", {{0, "A100"}, {1, "A100"}, {2, "A100"}}),
                              Node("b", {{0, "A100"}, {1, "A100"}})};
  for (auto& n : nodes) {
    for (auto& g : n.gpus) g.sharing = true;
  }
  {
    Cluster packing(nodes);
    auto placed = packing.PlaceGang(Gpus(1), nullptr);
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->front().node, "b") << "packing: the fewest free GPUs";
  }
  Cluster cluster(nodes);
  cluster.SetDemand({{2, "", 10}, {1, "", 1, 500}});
  ASSERT_TRUE(cluster.Fgd());
  // b would keep one free GPU that no 2-GPU shape can use (+1000 for each of
  // the 10; 1024 is the scale of a shape free to use any model); a keeps two
  // that one can.
  EXPECT_EQ(cluster.FgdDelta(1, {0}, Gpus(1).resources), 1024 * (10 * 1000 + 1 * 0));
  EXPECT_EQ(cluster.FgdDelta(0, {0}, Gpus(1).resources), 0);
  auto placed = cluster.PlaceGang(Gpus(1), nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "a");
  // Two 2-GPU jobs now fit, one on each node.
  EXPECT_TRUE(cluster.PlaceGang(Gpus(2), nullptr).has_value());
  EXPECT_TRUE(cluster.PlaceGang(Gpus(2), nullptr).has_value());
}

// Slices count by their share: with half-GPU slices asked for, a quarter
// slice goes to the GPU where it leaves half a GPU free (b's, three
// quarters free), not to the tightest fit (a's, half free), which would
// leave a quarter no half slice can use.
TEST(Cluster, FgdCountsSlicesByTheirShareAndChoosesTheGpuByTheDemand) {
  std::vector<NodeView> nodes{Node("a", {{0, "A100"}}), Node("b", {{0, "A100"}})};
  for (auto& n : nodes) {
    for (auto& g : n.gpus) {
      g.sharing = true;
      g.free = false;
    }
  }
  nodes[0].gpus[0].shared_millis = 500;
  nodes[1].gpus[0].shared_millis = 250;
  JobShape quarter = Gpus(0);
  quarter.resources.gpu_share_millis = 250;
  {
    Cluster packing(nodes);
    packing.SetDemand({{1, "", 5, 250}});  // only quarters asked for: tightest fit
    auto placed = packing.PlaceGang(quarter, nullptr);
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->front().node, "a");
  }
  Cluster cluster(nodes);
  cluster.SetDemand({{1, "", 5, 500}, {1, "", 1, 250}});
  // a: 500 free -> 250, which the half slices cannot use (5 x 250).
  EXPECT_EQ(cluster.FgdDelta(0, {0}, quarter.resources), 1024 * (5 * 250 + 1 * 0));
  // b: 750 free -> 500, all of it usable by both shapes.
  EXPECT_EQ(cluster.FgdDelta(1, {0}, quarter.resources), 0);
  auto placed = cluster.PlaceGang(quarter, nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "b");
  // And on one node with both GPUs, the same choice among its GPUs.
  std::vector<NodeView> one{Node("c", {{0, "A100"}, {1, "A100"}})};
  for (auto& g : one[0].gpus) {
    g.sharing = true;
    g.free = false;
  }
  one[0].gpus[0].shared_millis = 500;
  one[0].gpus[1].shared_millis = 250;
  Cluster node(one);
  node.SetDemand({{1, "", 5, 500}, {1, "", 1, 250}});
  placed = node.PlaceGang(quarter, nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().gpu_indices, std::vector<std::uint32_t>{1});
}

// A node's free GPUs count for a shape only as far as its free CPU can still
// serve replicas of it: b's CPU holds one more 8-CPU replica whether or not
// a half slice takes 4 of its 12 CPUs, so the slice costs the 1-GPU shape
// nothing there, while on a (64 CPUs) it takes half a GPU that shape could
// have used. Without the bound both nodes score alike and a wins by index.
TEST(Cluster, FgdCountsOnlyTheGpusANodesFreeCpuCanStillServe) {
  std::vector<NodeView> nodes{Node("a", {{0, "A100"}, {1, "A100"}}),
                              Node("b", {{0, "A100"}, {1, "A100"}})};
  for (auto& n : nodes) {
    for (auto& g : n.gpus) g.sharing = true;
  }
  nodes[1].cpu_millis_free = 12'000;
  JobShape half = Gpus(0);
  half.resources.gpu_share_millis = 500;
  half.resources.cpu_millis = 4000;
  Cluster cluster(nodes);
  DemandShape whole{1, "", 10};
  whole.cpu_millis = 8000;
  cluster.SetDemand({whole, {1, "", 1, 500}});
  EXPECT_EQ(cluster.FgdDelta(1, {0}, half.resources), 1024 * 10 * -500);
  EXPECT_EQ(cluster.FgdDelta(0, {0}, half.resources), 1024 * 10 * 500);
  auto placed = cluster.PlaceGang(half, nullptr);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->front().node, "b");
}

// Bounded FGD (above SetFgdExactNodes' size; 0 here) scores a few
// candidates, not every node: for a replica free to use any model, the
// first fit of each model as well as of the cluster, so that a scarce
// model first in index order is not the only one scored. T4 is scarce and
// asked for by 2-GPU shapes: a whole GPU or a slice free to use any model
// goes to a V100 node, as exact FGD would send it, though nine T4 nodes
// come first.
TEST(Cluster, BoundedFgdScoresTheFirstFitOfEachModelForAReplicaFreeToUseAny) {
  std::vector<NodeView> nodes;
  for (int n = 0; n < 9; ++n)
    nodes.push_back(Node("a" + std::to_string(n), {{0, "T4"}, {1, "T4"}}));
  nodes.push_back(Node("b", {{0, "V100"}, {1, "V100"}}));
  nodes.push_back(Node("c", {{0, "V100"}, {1, "V100"}}));
  for (auto& n : nodes) {
    for (auto& g : n.gpus) g.sharing = true;
  }
  JobShape quarter = Gpus(0);
  quarter.resources.gpu_share_millis = 250;
  for (std::size_t exact_nodes : {std::size_t{0}, Cluster::kFgdExactNodes}) {
    Cluster cluster(nodes);
    cluster.SetFgdExactNodes(exact_nodes);
    cluster.SetDemand({{2, "T4", 10}, {1, "", 1, 250}});
    ASSERT_TRUE(cluster.Fgd());
    auto placed = cluster.PlaceGang(Gpus(1), nullptr);
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->front().node, "b") << "exact above " << exact_nodes << " nodes";
    placed = cluster.PlaceGang(quarter, nullptr);
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->front().node.front(), 'b') << "exact above " << exact_nodes << " nodes";
  }
}

TEST(DemandOf, CountsReplicasPerShapeASliceByItsShareAndLeavesOutCpuOnlyJobs) {
  std::vector<PendingJob> pending(4);
  pending[0].resources.gpus = 2;
  pending[0].resources.gpu_model = "A100";
  pending[0].replicas = 3;
  pending[1].resources.gpus = 1;
  pending[2].resources.gpus = 0;  // CPU only
  pending[3].resources.gpus = 1;
  pending[3].resources.gpu_share_millis = 500;  // a slice: a shape of its own
  std::vector<RunningJob> running(1);
  running[0].resources.gpus = 2;
  running[0].resources.gpu_model = "A100";
  running[0].replicas.resize(2);
  EXPECT_EQ(DemandOf(pending, running),
            (std::vector<DemandShape>{{1, "", 1}, {1, "", 1, 500}, {2, "A100", 5}}));
  EXPECT_EQ(DemandOf(pending, {}, 1), (std::vector<DemandShape>{{2, "A100", 3}}))
      << "only the first pending jobs are counted";
}

TEST(IdsByNode, KeepsEachNodesIdsInOrderAndErasesEveryCopy) {
  IdsByNode ids(3);
  ids.Add(1, 10);
  ids.Add(0, 5);
  ids.Add(1, 11);
  ids.Add(1, 10);
  ids.Add(1, 12);
  auto of = [&](std::size_t n) {
    std::vector<std::int64_t> out;
    ids.ForEach(n, [&](std::int64_t id) { out.push_back(id); });
    return out;
  };
  EXPECT_EQ(of(0), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(of(1), (std::vector<std::int64_t>{10, 11, 10, 12}));
  EXPECT_TRUE(of(2).empty());
  ids.Erase(1, 10);  // the first, a middle one
  EXPECT_EQ(of(1), (std::vector<std::int64_t>{11, 12}));
  ids.Erase(1, 12);  // the last: adding goes on after the one before it
  ids.Add(1, 13);
  EXPECT_EQ(of(1), (std::vector<std::int64_t>{11, 13}));
  ids.Erase(1, 11);
  ids.Erase(1, 13);
  EXPECT_TRUE(of(1).empty());
  ids.Add(1, 14);
  EXPECT_EQ(of(1), (std::vector<std::int64_t>{14}));
  ids.Erase(2, 14);  // not there: nothing changes
  EXPECT_EQ(of(0), (std::vector<std::int64_t>{5}));
}

}  // namespace
}  // namespace berth::sched
