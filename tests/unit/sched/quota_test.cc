// The quota book's arithmetic at the edges: the largest quantities a spec,
// a policy or an agent's inventory can carry, summed over many jobs, never
// overflow (the asan-ubsan preset runs these) and never leave a queue with
// negative usage.
#include "sched/quota.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/checked.h"
#include "sched/core_scheduler.h"
#include "unit/sched/plan_check.h"

namespace berth::sched {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
const model::ResourceKey kMemory{model::ResourceKind::kMemory, ""};
const model::ResourceKey kGpuMemory{model::ResourceKind::kGpuMemory, ""};

// The largest amounts the policy parser accepts, guaranteed and borrowable.
model::Policy HugePolicy() {
  auto p = model::ParsePolicy(R"(
queues:
  - name: t
    quota:
      gpus: {guaranteed: 1000000, borrow_limit: 1000000}
      cpu: {guaranteed: 1000000, borrow_limit: 1000000}
      memory: {guaranteed: 4194304Ti, borrow_limit: 4194304Ti}
      gpu_memory: {guaranteed: 4194304Ti, borrow_limit: 4194304Ti}
    children:
      - name: q
        quota:
          memory: {guaranteed: 4194304Ti, borrow_limit: 4194304Ti}
)");
  EXPECT_TRUE(p.has_value()) << p.error().field << ": " << p.error().message;
  return p.value_or(model::DefaultPolicy());
}

// A node as an agent could describe it: every amount at its type's maximum.
NodeView AbsurdNode(std::string name) {
  NodeView n;
  n.name = std::move(name);
  n.ready = true;
  n.cpu_millis_free = std::numeric_limits<std::uint64_t>::max();
  n.memory_bytes_free = std::numeric_limits<std::uint64_t>::max();
  for (std::uint32_t i = 0; i < 8; ++i) {
    n.gpus.push_back(GpuView{i, n.name + "-" + std::to_string(i), "H100-80GB",
                             std::numeric_limits<std::uint64_t>::max(), true, true});
  }
  return n;
}

// The most a spec may ask: 1024 replicas of 64 GPUs, 4096 cores and 1Pi each.
model::Resources Largest() {
  model::Resources r;
  r.gpus = model::kMaxGpusPerReplica;
  r.cpu_millis = model::kMaxCpuMillis;
  r.memory_bytes = model::kMaxMemoryBytes;
  return r;
}

TEST(CheckedArithmetic, SaturatesAndChecksAtTheLimits) {
  EXPECT_EQ(CheckedAdd(kMax, std::int64_t{1}), std::nullopt);
  EXPECT_EQ(CheckedMul(std::uint64_t{1} << 32, std::uint64_t{1} << 32), std::nullopt);
  EXPECT_EQ(CheckedAdd(std::int64_t{2}, std::int64_t{3}), 5);
  EXPECT_EQ(SaturatingAdd(kMax, kMax), kMax);
  EXPECT_EQ(SaturatingSub(-kMax, kMax), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(SaturatingMul(kMax, std::int64_t{-2}), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(SaturatingCast<std::int64_t>(std::numeric_limits<std::uint64_t>::max()), kMax);
  EXPECT_EQ(SaturatingCast<std::uint32_t>(std::int64_t{-1}), 0U);
}

TEST(QuotaBook, LargestJobsOnAbsurdNodesSaturateAndNeverGoNegative) {
  const model::Policy policy = HugePolicy();
  std::vector<NodeView> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(AbsurdNode("n" + std::to_string(i)));
  Cluster cluster(nodes);
  // One replica per GPU, 1024 replicas: far more memory than 64 bits hold
  // once a few such jobs are summed.
  std::vector<ReplicaPlacement> replicas;
  for (std::uint32_t k = 0; k < model::kMaxReplicas; ++k) {
    replicas.push_back({k, "n" + std::to_string(k % 4), {k % 8}});
  }
  const Usage one = UsageOf(cluster, Largest(), replicas);
  for (const auto& [key, v] : one) EXPECT_GE(v, 0) << model::ResourceKeyName(key);
  EXPECT_EQ(one.at(kMemory), std::int64_t{1} << 60);  // 1024 x 1Pi: exact
  EXPECT_EQ(one.at(kGpuMemory), kMax);                // 1024 x 2^64-1: clamped

  QuotaBook book(policy, cluster, {});
  const auto q = book.Find("t/q");
  ASSERT_TRUE(q.has_value());
  for (int i = 0; i < 16; ++i) book.AddRunning(q, one);
  EXPECT_EQ(book.Used(*q, kMemory), kMax);
  EXPECT_EQ(book.Used(*book.Find("t"), kMemory), kMax);
  // Over every limit, and the numbers in the refusal are not negative.
  auto refusal = book.Check(*q, one, /*preemptible=*/true);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_GE(refusal->borrowable_now, 0);
  EXPECT_GE(refusal->used, 0);
  (void)book.FairKey(*q);
  (void)book.Numbers(*q, kMax);
  (void)book.WithinGuarantee(*q, kMax);
  // Taking back more than a saturated sum holds leaves zero, not less.
  for (int i = 0; i < 32; ++i) book.Remove(*q, one);
  for (const auto& [key, v] : one) EXPECT_EQ(book.Used(*q, key), 0) << model::ResourceKeyName(key);
}

TEST(QuotaBook, ACycleOverExtremeButValidInputsPlansWithinTheRules) {
  Snapshot s;
  s.now_ms = 1'700'000'000'000;
  s.policy = HugePolicy();
  for (int i = 0; i < 2; ++i) s.nodes.push_back(AbsurdNode("n" + std::to_string(i)));
  // Running jobs whose agents reported start times at both ends of time,
  // each with the longest max runtime a spec may give.
  for (int i = 0; i < 2; ++i) {
    RunningJob r;
    r.id = i + 1;
    r.tenant = "t";
    r.queue = "q";
    r.resources = Largest();
    r.resources.gpus = 1;
    r.max_runtime_ms = model::kMaxDurationMs;
    r.started_at_ms = i == 0 ? std::numeric_limits<std::int64_t>::min() : kMax;
    r.replicas = {{0, "n" + std::to_string(i), {0}}};
    s.nodes[static_cast<std::size_t>(i)].gpus[0].free = false;
    s.running.push_back(r);
  }
  PendingJob big;
  big.id = 10;
  big.tenant = "t";
  big.queue = "q";
  big.replicas = model::kMaxReplicas;
  big.resources = Largest();
  big.max_runtime_ms = model::kMaxDurationMs;
  PendingJob small = big;
  small.id = 11;
  small.replicas = 2;
  small.resources.gpus = 2;
  s.pending = {big, small};
  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_EQ(CheckPlan(s, plan), "");
}

}  // namespace
}  // namespace berth::sched
