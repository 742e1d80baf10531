// GPU sharing in the placement working copy and in quota: what a slice
// counts, and that statements undo slices exactly.
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <random>
#include <tuple>

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

// Where a slice goes without FGD, computed over every node and GPU: the
// least (room left on a GPU that holds slices, else 1001; memory left; the
// node's free GPUs; node; GPU) among the GPUs it fits on nodes that may
// take it. Cluster::BestSliceNode looks only at nodes its slice summary
// says have room, and walks fresh ones by free GPUs: it must agree.
std::optional<std::pair<std::size_t, std::size_t>> TightestSlice(const Cluster& cluster,
                                                                 const JobShape& job) {
  std::optional<std::pair<std::size_t, std::size_t>> best;
  std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::size_t, std::size_t> best_key{};
  for (std::size_t n = 0; n < cluster.size(); ++n) {
    const NodeView& node = cluster.Node(n);
    if (!cluster.StaticCause(n, job).empty() || job.resources.cpu_millis > node.cpu_millis_free) {
      continue;
    }
    std::uint32_t free = 0;
    for (const auto& g : node.gpus) free += g.free && g.healthy ? 1 : 0;
    for (std::size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuView& g = node.gpus[i];
      if (!g.sharing || !g.healthy || (!g.free && g.shared_millis == 0)) continue;
      const model::GpuSlice s = model::SliceOf(job.resources, g.memory_bytes);
      if (g.shared_millis + s.millis > 1000 || s.bytes > g.memory_bytes - g.shared_bytes) continue;
      std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::size_t, std::size_t> key{
          g.shared_millis > 0 ? 1000 - g.shared_millis - s.millis : 1001,
          g.memory_bytes - g.shared_bytes - s.bytes, free, n, i};
      if (!best || key < best_key) {
        best = {n, i};
        best_key = key;
      }
    }
  }
  return best;
}

// Random slices, whole GPUs, reservations, releases and rollbacks on a
// small cluster: every slice lands where TightestSlice says, and after
// every step each node's slice summary equals one computed afresh from the
// nodes as they are.
void PlaceSlicesAtRandom(bool uniform_memory, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<NodeView> nodes;
  for (int n = 0; n < 16; ++n) {
    std::vector<bool> sharing;
    for (int i = 0; i < 4; ++i) sharing.push_back(rng() % 5 != 0);
    const std::uint64_t memory = uniform_memory || n % 3 != 0 ? 80ULL << 30 : 40ULL << 30;
    NodeView v = Node("n" + std::to_string(100 + n), memory, sharing);
    v.cpu_millis_free = 8'000 * (1 + rng() % 6);
    if (n % 13 == 5) v.cordoned = true;
    if (n % 11 == 3) v.gpus[1].healthy = false;
    nodes.push_back(std::move(v));
  }
  Cluster cluster(std::move(nodes));
  struct Placed {
    std::size_t mark;  // the log before it
    RunningJob job;
  };
  std::vector<Placed> placed;
  std::vector<std::size_t> marks;
  int slices_placed = 0;
  int slices_refused = 0;
  for (int step = 0; step < 600; ++step) {
    const std::uint32_t op = rng() % 10;
    if (op < 4) {
      JobShape job =
          rng() % 4 == 0
              ? Slice(0, (10ULL + rng() % 30) << 30)
              : Slice(std::array<std::uint32_t, 5>{100, 250, 300, 500, 700}[rng() % 5], 0);
      job.resources.cpu_millis = 2'000 * (rng() % 4);
      const auto want = TightestSlice(cluster, job);
      const std::size_t mark = cluster.Mark();
      auto got = cluster.PlaceGang(job, nullptr);
      ASSERT_EQ(got.has_value(), want.has_value()) << "step " << step;
      if (!got) {
        ++slices_refused;
        continue;
      }
      ++slices_placed;
      EXPECT_EQ((*got)[0].node, cluster.Node(want->first).name) << "step " << step;
      EXPECT_EQ((*got)[0].gpu_indices,
                std::vector<std::uint32_t>{cluster.Node(want->first).gpus[want->second].index})
          << "step " << step;
      RunningJob r;
      r.resources = job.resources;
      r.replicas = *got;
      placed.push_back({mark, r});
    } else if (op < 6) {
      JobShape whole;
      whole.resources.gpus = 1 + rng() % 2;
      const std::size_t mark = cluster.Mark();
      if (auto got = cluster.PlaceGang(whole, nullptr)) {
        RunningJob r;
        r.resources = whole.resources;
        r.replicas = *got;
        placed.push_back({mark, r});
      }
    } else if (op == 6) {
      marks.push_back(cluster.Mark());
    } else if (op == 7 && !marks.empty()) {
      const std::size_t mark = marks.back();
      marks.pop_back();
      cluster.Rollback(mark);
      while (!placed.empty() && placed.back().mark >= mark) placed.pop_back();
    } else if (op == 8 && !placed.empty()) {
      const std::size_t k = rng() % placed.size();
      cluster.Release(placed[k].job);
      placed.erase(placed.begin() + static_cast<std::ptrdiff_t>(k));
      // Releases are not undone with the placements before them.
      marks.clear();
      for (auto& p : placed) p.mark = 0;
    } else if (op == 9) {
      // Backfill keeps slices off a reserved GPU this way.
      const std::size_t n = rng() % cluster.size();
      const std::size_t i = rng() % cluster.Node(n).gpus.size();
      if (cluster.Node(n).gpus[i].free) cluster.SetGpuSharedMillis(n, i, 1000);
    }
    std::vector<NodeView> now;
    for (std::size_t n = 0; n < cluster.size(); ++n) now.push_back(cluster.Node(n));
    const Cluster fresh(std::move(now));
    for (std::size_t n = 0; n < cluster.size(); ++n) {
      ASSERT_EQ(cluster.SliceRoom(n), fresh.SliceRoom(n)) << "step " << step << " node " << n;
    }
  }
  EXPECT_GT(slices_placed, 50);
  EXPECT_GT(slices_refused, 10);
}

TEST(GpuSharing, ASliceGoesToTheTightestFitAndTheSliceSummaryFollowsEveryChangeAndUndo) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    PlaceSlicesAtRandom(true, seed);
    PlaceSlicesAtRandom(false, seed);
  }
}

}  // namespace
}  // namespace berth::sched
