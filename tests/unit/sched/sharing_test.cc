// GPU sharing in the placement working copy and in quota: what a slice
// counts, and that statements undo slices exactly.
#include <gtest/gtest.h>

#include "sched/quota.h"

namespace berth::sched {
namespace {

NodeView Node(std::string name, std::uint64_t gpu_memory, std::vector<bool> sharing) {
  NodeView v;
  v.name = std::move(name);
  v.ready = true;
  v.cpu_millis_free = 64'000;
  v.memory_bytes_free = 512ULL << 30;
  for (std::uint32_t i = 0; i < sharing.size(); ++i) {
    GpuView g;
    g.index = i;
    g.model = "H100-80GB";
    g.memory_bytes = gpu_memory;
    g.sharing = sharing[i];
    v.gpus.push_back(g);
  }
  return v;
}

JobShape Slice(std::uint32_t millis, std::uint64_t bytes, std::uint32_t replicas = 1) {
  JobShape s;
  s.replicas = replicas;
  s.resources.gpu_share_millis = millis;
  s.resources.gpu_share_bytes = bytes;
  return s;
}

TEST(GpuSharing, QuotaCountsASliceInMilliGpusAndBytes) {
  Cluster cluster({Node("a", 80ULL << 30, {true}), Node("b", 40ULL << 30, {true})});
  const model::ResourceKey h100{model::ResourceKind::kGpus, "H100-80GB"};
  const model::ResourceKey mem{model::ResourceKind::kGpuMemory, ""};
  model::Resources by_memory;
  by_memory.gpu_share_bytes = 20ULL << 30;
  Usage u = UsageOf(cluster, by_memory, {{0, "a", {0}}, {1, "b", {0}}});
  EXPECT_EQ(u[kGpusKey], 250 + 500);  // 20Gi of 80Gi, then of 40Gi
  EXPECT_EQ(u[h100], 750);
  EXPECT_EQ(u[mem], 40LL << 30);
  model::Resources by_share;
  by_share.gpu_share_millis = 300;
  u = UsageOf(cluster, by_share, {{0, "b", {0}}});
  EXPECT_EQ(u[kGpusKey], 300);
  EXPECT_EQ(u[mem], static_cast<std::int64_t>((40ULL << 30) * 3 / 10));
  model::Resources whole;
  whole.gpus = 1;
  EXPECT_EQ(UsageOf(cluster, whole, {{0, "a", {0}}})[kGpusKey], 1000);
}

TEST(GpuSharing, RollbackUndoesSlicesAndReleaseGivesThemBack) {
  Cluster cluster({Node("a", 80ULL << 30, {false, true})});
  const auto id = cluster.StateId();
  const auto mark = cluster.Mark();
  auto placed = cluster.PlaceGang(Slice(0, 30ULL << 30, 2), nullptr);
  ASSERT_TRUE(placed.has_value());
  ASSERT_EQ(placed->size(), 2U);
  EXPECT_EQ((*placed)[0].gpu_indices, std::vector<std::uint32_t>{1});
  EXPECT_EQ((*placed)[1].gpu_indices, std::vector<std::uint32_t>{1});
  const GpuView* g = cluster.Gpu(0, 1);
  EXPECT_EQ(g->shared_millis, 750U);
  EXPECT_EQ(g->shared_bytes, 60ULL << 30);
  EXPECT_FALSE(g->free);
  // A whole GPU is still there (GPU 0), but not GPU 1.
  JobShape two;
  two.resources.gpus = 2;
  EXPECT_EQ(cluster.FreeEligible(0, two), 1U);
  EXPECT_EQ(cluster.Cause(0, two), model::kCauseHeldBySlices);
  // A third 30Gi slice would overflow the card's 80Gi.
  EXPECT_FALSE(cluster.PlaceGang(Slice(0, 30ULL << 30), nullptr).has_value());
  EXPECT_EQ(cluster.Cause(0, Slice(0, 30ULL << 30)), model::kCauseSharedFull);
  cluster.Rollback(mark);
  EXPECT_EQ(cluster.StateId(), id);
  EXPECT_EQ(g->shared_millis, 0U);
  EXPECT_EQ(g->shared_bytes, 0U);
  EXPECT_TRUE(g->free);
  EXPECT_EQ(cluster.FreeEligible(0, two), 2U);

  // A running slice job released gives back its slice only.
  placed = cluster.PlaceGang(Slice(500, 0), nullptr);
  ASSERT_TRUE(placed.has_value());
  auto other = cluster.PlaceGang(Slice(250, 0), nullptr);
  ASSERT_TRUE(other.has_value());
  RunningJob r;
  r.resources.gpu_share_millis = 500;
  r.replicas = *placed;
  cluster.Release(r);
  EXPECT_EQ(g->shared_millis, 250U);
  EXPECT_EQ(g->shared_bytes, 20ULL << 30);
  EXPECT_FALSE(g->free);
}

TEST(GpuSharing, StaticCausesForASlice) {
  Cluster cluster({Node("a", 80ULL << 30, {false, false}), Node("b", 40ULL << 30, {true})});
  EXPECT_EQ(cluster.StaticCause(0, Slice(250, 0)), model::kCauseNotSharing);
  EXPECT_EQ(cluster.StaticCause(1, Slice(250, 0)), "");
  EXPECT_EQ(cluster.StaticCause(1, Slice(0, 60ULL << 30)), model::kCauseGpuMemory);
  JobShape other_model = Slice(250, 0);
  other_model.resources.gpu_model = "A100-80GB";
  EXPECT_EQ(cluster.StaticCause(1, other_model), model::kCauseGpuModel);
}

}  // namespace
}  // namespace berth::sched
