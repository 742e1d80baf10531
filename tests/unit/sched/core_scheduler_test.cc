// Unit tests of CoreScheduler's rules one at a time; the larger stories are
// in tests/scenarios/*.yaml.
#include "sched/core_scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "unit/sched/plan_check.h"

namespace berth::sched {
namespace {

NodeView Node(std::string name, std::uint32_t gpus, std::uint32_t islands = 1) {
  NodeView n;
  n.name = std::move(name);
  n.ready = true;
  n.cpu_millis_free = 64'000;
  n.memory_bytes_free = 512ULL << 30;
  for (std::uint32_t i = 0; i < gpus; ++i) {
    GpuView g{i, n.name + "-" + std::to_string(i), "H100-80GB", 80ULL << 30, true, true};
    g.nvlink_island = i / (gpus / islands);
    n.gpus.push_back(g);
  }
  return n;
}

PendingJob Job(std::int64_t id, std::string tenant, std::uint32_t gpus,
               std::uint32_t replicas = 1) {
  PendingJob j;
  j.id = id;
  j.tenant = std::move(tenant);
  j.queue = "q";
  j.submitted_at_ms = id;
  j.replicas = replicas;
  j.resources.gpus = gpus;
  return j;
}

// A job of `tenant`'s queue `queue` running one replica on `gpus` of node
// `node` (one GPU each), with a max runtime of `max_runtime_ms` (0: none).
// The node's GPUs are the caller's to mark held.
RunningJob RunningOn(std::int64_t id, std::string tenant, std::string queue, std::string node,
                     std::vector<std::uint32_t> gpus, std::int64_t max_runtime_ms = 0) {
  RunningJob r;
  r.id = id;
  r.tenant = std::move(tenant);
  r.queue = std::move(queue);
  r.resources.gpus = static_cast<std::uint32_t>(gpus.size());
  r.max_runtime_ms = max_runtime_ms;
  r.replicas = {{0, std::move(node), std::move(gpus)}};
  return r;
}

model::Policy PolicyOf(const char* yaml) {
  auto p = model::ParsePolicy(yaml);
  EXPECT_TRUE(p.has_value()) << p.error().message;
  return p.value_or(model::DefaultPolicy());
}

const model::Reason* ReasonOf(const Plan& plan, std::int64_t id) {
  for (const auto& d : plan.pending) {
    if (d.job_id == id) return &d.reason;
  }
  return nullptr;
}

// One 8-GPU node, half held until 1h by a job with a max runtime; the head
// needs all 8, a 2-GPU job behind it would end at 30m.
Snapshot BackfillSnapshot() {
  Snapshot s;
  s.nodes = {Node("a", 8)};
  for (auto& g : s.nodes[0].gpus) g.free = g.index >= 4;
  s.running = {RunningOn(1, "default", "default", "a", {0, 1, 2, 3}, 3'600'000)};
  PendingJob head = Job(2, "default", 8);
  PendingJob shorter = Job(3, "default", 2);
  shorter.max_runtime_ms = 1'800'000;
  for (auto* j : {&head, &shorter}) j->queue = "default";
  s.pending = {head, shorter};
  return s;
}

TEST(CoreScheduler, BackfillRunsAShortJobBeforeTheReservedHead) {
  Snapshot s = BackfillSnapshot();
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 3);
  ASSERT_EQ(plan.reservations.size(), 1U);
  EXPECT_EQ(plan.reservations[0].job_id, 2);
  EXPECT_EQ(plan.reservations[0].start_ms, 3'600'000);
  const model::Reason* head = ReasonOf(plan, 2);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->counts.at(std::string(model::kEtaReserved)), 1);
}

TEST(CoreScheduler, BackfillCanBeTurnedOffOrCappedAndTheHeadStillGetsAnEstimate) {
  for (auto* yaml : {"backfill: {enabled: false}\n", "backfill: {max_reservations: 0}\n"}) {
    Snapshot s = BackfillSnapshot();
    s.policy = PolicyOf(yaml);
    Plan plan = CoreScheduler().Schedule(s);
    ASSERT_EQ(CheckPlan(s, plan), "");
    EXPECT_TRUE(plan.placements.empty()) << yaml;
    EXPECT_TRUE(plan.reservations.empty()) << yaml;
    const model::Reason* head = ReasonOf(plan, 2);
    ASSERT_NE(head, nullptr);
    EXPECT_EQ(head->counts.at(std::string(model::kEtaMs)), 3'600'000) << yaml;
    EXPECT_EQ(head->counts.at(std::string(model::kEtaReserved)), 0) << yaml;
    const model::Reason* behind = ReasonOf(plan, 3);
    ASSERT_NE(behind, nullptr);
    EXPECT_EQ(behind->code, model::ReasonCode::kBehindInQueue) << yaml;
  }
}

TEST(CoreScheduler, AReservedGpuStillBusyNowComesFreeAtItsReservationsEnd) {
  // Node a's 4 GPUs are all busy until 1h (job 1, max runtime). Queue q1's
  // head (job 2, 4 GPUs, max runtime 1h) reserves them from 1h to 2h. Queue
  // q2's head (job 3, 4 GPUs) can start when that reservation ends: its
  // estimate replays job 1's end (the GPUs stay the reservation's) and then
  // the reservation's end, which frees them.
  Snapshot s;
  s.policy = PolicyOf(
      "queues:\n"
      "  - {name: q1, children: [{name: q}]}\n"
      "  - {name: q2, children: [{name: q}]}\n");
  s.nodes = {Node("a", 4)};
  for (auto& g : s.nodes[0].gpus) g.free = false;
  s.running = {RunningOn(1, "q1", "q", "a", {0, 1, 2, 3}, 3'600'000)};
  PendingJob first = Job(2, "q1", 4);
  first.max_runtime_ms = 3'600'000;
  PendingJob second = Job(3, "q2", 4);
  second.max_runtime_ms = 3'600'000;
  s.pending = {first, second};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  ASSERT_EQ(plan.reservations.size(), 2U);
  const model::Reason* a = ReasonOf(plan, 2);
  const model::Reason* b = ReasonOf(plan, 3);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // Whichever head fair share decided first starts at 1h, the other at 2h.
  const auto eta_a = a->counts.at(std::string(model::kEtaMs));
  const auto eta_b = b->counts.at(std::string(model::kEtaMs));
  EXPECT_EQ(std::min(eta_a, eta_b), 3'600'000);
  EXPECT_EQ(std::max(eta_a, eta_b), 7'200'000);
}

TEST(CoreScheduler, AJobThatCanNeverRunIsNotToldItWaitsBehindTheHead) {
  Snapshot s;
  s.nodes = {Node("a", 8)};
  for (auto& g : s.nodes[0].gpus) g.free = g.index >= 4;  // 4 free: the head waits
  PendingJob head = Job(1, "default", 8);
  PendingJob never = Job(2, "default", 16);  // more than any node has
  PendingJob later = Job(3, "default", 1);
  for (auto* j : {&head, &never, &later}) j->queue = "default";
  s.pending = {head, never, later};
  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_NE(ReasonOf(plan, 2), nullptr);
  EXPECT_EQ(ReasonOf(plan, 2)->code, model::ReasonCode::kNoNodeFits);
  ASSERT_NE(ReasonOf(plan, 3), nullptr);
  EXPECT_EQ(ReasonOf(plan, 3)->code, model::ReasonCode::kBehindInQueue);
  // Second in line after the head: the job that can never run holds no place.
  EXPECT_EQ(ReasonOf(plan, 3)->counts.at(std::string(model::kPosition)), 2);
  EXPECT_EQ(ReasonOf(plan, 3)->counts.at(std::string(model::kAheadJobs)), 1);
  EXPECT_EQ(CheckPlan(s, plan), "");
}

TEST(CoreScheduler, DefaultPolicyPlacesLikeTheSkeleton) {
  Snapshot s;
  s.nodes = {Node("a", 8)};
  PendingJob j = Job(1, "default", 2);
  j.queue = "default";
  s.pending = {j};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].replicas[0].gpu_indices, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(CheckPlan(s, plan), "");
}

TEST(CoreScheduler, UnknownQueueIsExplained) {
  Snapshot s;
  s.nodes = {Node("a", 8)};
  s.pending = {Job(1, "nobody", 1)};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_NE(ReasonOf(plan, 1), nullptr);
  EXPECT_EQ(ReasonOf(plan, 1)->code, model::ReasonCode::kQueueUnknown);
  EXPECT_NE(model::RenderReason(*ReasonOf(plan, 1)).find("nobody/q"), std::string::npos);
}

TEST(CoreScheduler, OrdersByPriorityThenSubmitTimeThenId) {
  Snapshot s;
  s.policy = PolicyOf("queues: [{name: t, children: [{name: q}]}]\n");
  s.nodes = {Node("a", 2)};
  PendingJob old = Job(1, "t", 2);
  PendingJob urgent = Job(2, "t", 2);
  urgent.priority = model::Priority::kHigh;
  PendingJob later = Job(3, "t", 1);
  s.pending = {old, urgent, later};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 2);
  const model::Reason* r1 = ReasonOf(plan, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->code, model::ReasonCode::kNoNodeFits);
  EXPECT_EQ(r1->counts.at("position"), 1);
  const model::Reason* r3 = ReasonOf(plan, 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->code, model::ReasonCode::kBehindInQueue);  // the head waits for capacity
  EXPECT_EQ(r3->counts.at("blocked_by"), 1);
  EXPECT_EQ(r3->counts.at("ahead_jobs"), 1);
  EXPECT_EQ(r3->counts.at("ahead_gpus"), 2);
}

TEST(CoreScheduler, BorrowLimitRefusesWithNumbers) {
  Snapshot s;
  s.policy = PolicyOf(
      "queues: [{name: t, quota: {gpus: {guaranteed: 2, borrow_limit: 1}}, "
      "children: [{name: q}]}]\n");
  s.nodes = {Node("a", 8)};
  s.pending = {Job(1, "t", 4), Job(2, "t", 3)};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 2);  // a quota refusal does not block the queue
  const model::Reason* r = ReasonOf(plan, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code, model::ReasonCode::kOverQuota);
  EXPECT_EQ(r->counts.at("requested_mgpu"), 4000);
  EXPECT_EQ(r->counts.at("queue_guaranteed_mgpu"), 2000);
  EXPECT_EQ(r->counts.at("queue_borrow_limit_mgpu"), 1000);
  EXPECT_EQ(r->counts.at("borrowable_now_mgpu"), 3000);
  EXPECT_EQ(r->detail, "t gpus");
  EXPECT_NE(model::RenderReason(*r).find("may borrow up to 1 GPU more"), std::string::npos)
      << model::RenderReason(*r);
}

TEST(CoreScheduler, APlacementPastTheGuaranteeIsMarkedBorrowed) {
  Snapshot s;
  s.policy =
      PolicyOf("queues: [{name: t, quota: {gpus: {guaranteed: 2}}, children: [{name: q}]}]\n");
  s.nodes = {Node("a", 8)};
  s.pending = {Job(1, "t", 2), Job(2, "t", 1)};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 2U);
  EXPECT_EQ(plan.placements[0].job_id, 1);
  EXPECT_FALSE(plan.placements[0].borrowed.has_value());  // within the guarantee
  ASSERT_TRUE(plan.placements[1].borrowed.has_value());
  EXPECT_EQ(plan.placements[1].borrowed->queue, "t");  // the level whose guarantee is passed
  EXPECT_EQ(plan.placements[1].borrowed->used_mgpu, 3000);
  EXPECT_EQ(plan.placements[1].borrowed->guaranteed_mgpu, 2000);

  // Queues without a GPU quota never borrow: nothing to mark.
  Snapshot d;
  d.nodes = {Node("a", 8)};
  d.pending = {Job(1, "default", 4)};
  d.pending[0].queue = "default";
  Plan free = CoreScheduler().Schedule(d);
  ASSERT_EQ(free.placements.size(), 1U);
  EXPECT_FALSE(free.placements[0].borrowed.has_value());
}

TEST(CoreScheduler, QuotaIsTheReasonEvenWhenTheClusterIsFull) {
  Snapshot s;
  s.policy = PolicyOf(
      "queues: [{name: t, quota: {gpus: {guaranteed: 2, borrow_limit: 0}}, "
      "children: [{name: q}]}]\n");
  s.nodes = {Node("a", 2)};
  for (auto& g : s.nodes[0].gpus) g.free = false;
  RunningJob r = RunningOn(1, "t", "q", "a", {0, 1});
  r.priority = model::Priority::kHigh;
  s.running = {r};
  s.pending = {Job(2, "t", 1), Job(3, "t", 1)};
  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  for (std::int64_t id : {2, 3}) {  // neither blocks the other: both are quota refusals
    ASSERT_NE(ReasonOf(plan, id), nullptr);
    EXPECT_EQ(ReasonOf(plan, id)->code, model::ReasonCode::kOverQuota);
    EXPECT_EQ(ReasonOf(plan, id)->counts.at("queue_used_mgpu"), 2000);
  }
}

TEST(CoreScheduler, WaitQueuesDoNotBorrow) {
  Snapshot s;
  s.policy =
      PolicyOf("queues: [{name: t, over_quota: wait, quota: {gpus: 2}, children: [{name: q}]}]\n");
  s.nodes = {Node("a", 8)};
  s.pending = {Job(1, "t", 3)};
  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_NE(ReasonOf(plan, 1), nullptr);
  EXPECT_EQ(ReasonOf(plan, 1)->code, model::ReasonCode::kOverQuota);
}

TEST(CoreScheduler, LendingLimitKeepsPartOfAGuaranteeFree) {
  Snapshot s;
  s.policy = PolicyOf(
      "queues:\n"
      "  - {name: owner, quota: {gpus: {guaranteed: 6, lending_limit: 4}}, children: [{name: q}]}\n"
      "  - {name: borrower, children: [{name: q}]}\n");
  s.nodes = {Node("a", 8)};
  s.pending = {Job(1, "borrower", 6), Job(2, "borrower", 4)};
  Plan plan = CoreScheduler().Schedule(s);
  // 8 GPUs, 4 of which the owner never lends: job 1 (6) is refused, job 2 (4) fits.
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 2);
  ASSERT_NE(ReasonOf(plan, 1), nullptr);
  EXPECT_EQ(ReasonOf(plan, 1)->code, model::ReasonCode::kOverQuota);
  EXPECT_EQ(ReasonOf(plan, 1)->counts.at("borrowable_now_mgpu"), 4000);
}

TEST(CoreScheduler, UnhealthyGpusAndUnreadyNodesAreCounted) {
  Snapshot s;
  s.nodes = {Node("a", 2), Node("b", 2), Node("c", 2)};
  s.nodes[0].gpus[1].healthy = false;
  s.nodes[1].ready = false;
  s.nodes[2].gpus[0].free = false;
  PendingJob j = Job(1, "default", 2);
  j.queue = "default";
  s.pending = {j};
  Plan plan = CoreScheduler().Schedule(s);
  const model::Reason* r = ReasonOf(plan, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code, model::ReasonCode::kNoNodeFits);
  EXPECT_EQ(r->counts.at(std::string(model::kCauseUnhealthy)), 1);
  EXPECT_EQ(r->counts.at(std::string(model::kCauseNotReady)), 1);
  EXPECT_EQ(r->counts.at(std::string(model::kCauseTooFewGpus)), 1);
}

TEST(CoreScheduler, PacksOntoTheFullestNodeAndKeepsIslandsWhole) {
  Snapshot s;
  s.nodes = {Node("a", 8, 2), Node("b", 8, 2)};
  s.nodes[1].gpus[0].free = false;  // b: island 0 has 3 free, island 1 has 4
  PendingJob j = Job(1, "default", 2);
  j.queue = "default";
  s.pending = {j};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].replicas[0].node, "b");
  EXPECT_EQ(plan.placements[0].replicas[0].gpu_indices, (std::vector<std::uint32_t>{1, 2}));
}

TEST(CoreScheduler, ReclaimIsNotUsedAboveGuarantee) {
  Snapshot s;
  s.policy = PolicyOf(
      "reclaim_grace: 0s\n"
      "queues:\n"
      "  - {name: small, quota: {gpus: 2}, children: [{name: q}]}\n"
      "  - {name: big, children: [{name: q}]}\n");
  s.nodes = {Node("a", 8)};
  for (auto& g : s.nodes[0].gpus) g.free = false;
  s.running = {RunningOn(1, "big", "q", "a", {0, 1, 2, 3, 4, 5, 6, 7})};
  s.pending = {Job(2, "small", 4), Job(3, "small", 2)};
  Plan plan = CoreScheduler().Schedule(s);
  // Job 2 asks for more than small's guarantee: no reclaim for it; it blocks
  // job 3 behind it, which is within guarantee but waits its turn.
  EXPECT_TRUE(plan.evictions.empty());
  ASSERT_NE(ReasonOf(plan, 2), nullptr);
  EXPECT_EQ(ReasonOf(plan, 2)->code, model::ReasonCode::kNoNodeFits);

  s.pending = {Job(3, "small", 2)};
  plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(plan.evictions.size(), 1U);
  EXPECT_EQ(plan.evictions[0].job_id, 1);
  EXPECT_EQ(plan.evictions[0].cause, EvictionCause::kReclaim);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].after_evicting, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(CheckPlan(s, plan), "");
}

// Nodes for the head-of-line tests: `h` all H100 and held until 3h by job 1,
// `a` all A100, `m` eight H100 (held until 2h by job 2) and four A100. The
// head (job 10) needs 8 H100s for 1h: it could use h and m, never a, nor
// m's A100s.
Snapshot AheadSnapshot(bool with_behind) {
  Snapshot s;
  s.now_ms = 3'600'000;
  NodeView h = Node("h", 8);
  NodeView a = Node("a", 8);
  NodeView m = Node("m", 12);
  for (auto& g : a.gpus) g.model = "A100-80GB";
  for (auto& g : m.gpus) g.model = g.index < 8 ? "H100-80GB" : "A100-80GB";
  s.nodes = {a, h, m};
  auto run = [&s](std::int64_t id, const std::string& node, std::vector<std::uint32_t> gpus,
                  std::int64_t until_ms) {
    RunningJob r = RunningOn(id, "default", "default", node, std::move(gpus), until_ms);
    HoldGpus(s.nodes, r.resources, r.replicas, true);
    s.running.push_back(r);
  };
  run(1, "h", {0, 1, 2, 3, 4, 5, 6, 7}, 3 * 3'600'000);
  run(2, "m", {0, 1, 2, 3, 4, 5, 6, 7}, 2 * 3'600'000);
  PendingJob head = Job(10, "default", 8);
  head.queue = "default";
  head.resources.gpu_model = "H100-80GB";
  head.resources.cpu_millis = 8000;
  head.max_runtime_ms = 3'600'000;
  s.pending = {head};
  if (with_behind) {
    std::int64_t id = 20;
    for (std::uint32_t gpus : {1U, 2U, 4U, 1U, 2U, 8U, 1U}) {
      PendingJob j = Job(id++, "default", gpus);
      j.queue = "default";
      s.pending.push_back(j);  // any model, no CPU: A100s anywhere
      PendingJob c = Job(id++, "default", gpus);
      c.queue = "default";
      c.resources.cpu_millis = 1000;  // CPU, as the head: not on m
      s.pending.push_back(c);
    }
  }
  return s;
}

// What the head's start is in a plan: its reason's estimate and reservation.
std::tuple<std::int64_t, std::int64_t, std::vector<ReplicaPlacement>> HeadStart(const Plan& plan) {
  const model::Reason* r = ReasonOf(plan, 10);
  EXPECT_NE(r, nullptr);
  if (r == nullptr) return {};
  std::vector<ReplicaPlacement> where;
  for (const auto& res : plan.reservations) {
    if (res.job_id == 10) where = res.replicas;
  }
  return {r->counts.contains("eta_ms") ? r->counts.at("eta_ms") : -1,
          r->counts.contains("eta_unknown") ? r->counts.at("eta_unknown") : -1, where};
}

TEST(CoreScheduler, JobsAheadOfABlockedHeadUseOnlyWhatItCannotAndNeverMoveItsStart) {
  Snapshot alone = AheadSnapshot(false);
  Plan without = CoreScheduler().Schedule(alone);
  ASSERT_EQ(CheckPlan(alone, without), "");
  ASSERT_TRUE(without.placements.empty());
  const auto start = HeadStart(without);
  EXPECT_EQ(std::get<0>(start), 2 * 3'600'000);  // when job 2 leaves m

  Snapshot s = AheadSnapshot(true);
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  EXPECT_EQ(HeadStart(plan), start);
  ASSERT_FALSE(plan.placements.empty());
  std::uint32_t on_m = 0;
  for (const auto& p : plan.placements) {
    ASSERT_TRUE(p.ahead_of.has_value()) << "job " << p.job_id;
    EXPECT_EQ(p.ahead_of->head_job, 10);
    for (const auto& rp : p.replicas) {
      ASSERT_NE(rp.node, "h") << "job " << p.job_id << " took the head's node";
      if (rp.node != "m") continue;
      ++on_m;
      // Only m's A100s, and only jobs that ask for no CPU (the head does).
      for (auto g : rp.gpu_indices) EXPECT_GE(g, 8U) << "job " << p.job_id;
      EXPECT_EQ(p.job_id % 2, 0) << "job " << p.job_id << " takes CPU on the head's node";
    }
  }
  EXPECT_GT(on_m, 0U);

  // Next cycle, with the jobs that ran ahead running (no max runtime): the
  // head starts when it did.
  Snapshot next = AheadSnapshot(false);
  for (const auto& p : plan.placements) {
    RunningJob r;
    r.id = p.job_id;
    r.tenant = "default";
    r.queue = "default";
    r.started_at_ms = next.now_ms;
    for (const auto& j : s.pending) {
      if (j.id == p.job_id) r.resources = j.resources;
    }
    r.replicas = p.replicas;
    HoldGpus(next.nodes, r.resources, r.replicas, true);
    for (auto& n : next.nodes) {
      for (const auto& rp : r.replicas) {
        if (n.name == rp.node) n.cpu_millis_free -= r.resources.cpu_millis;
      }
    }
    next.running.push_back(r);
  }
  Plan later = CoreScheduler().Schedule(next);
  ASSERT_EQ(CheckPlan(next, later), "");
  EXPECT_EQ(HeadStart(later), start);
}

TEST(CoreScheduler, AJobAheadOfTheHeadLeavesTheHeadItsRoomInQuota) {
  // The queue may hold 12 GPUs; the head needs 8 H100s, which are busy. A
  // 4-GPU A100 job behind it leaves room for the head and runs; a second
  // one would not, and waits.
  Snapshot s = AheadSnapshot(false);
  s.policy = PolicyOf(
      "queues: [{name: t, quota: {gpus: {guaranteed: 12, borrow_limit: 0}}, "
      "children: [{name: q}]}]\n");
  s.running.clear();
  s.nodes = AheadSnapshot(false).nodes;
  for (auto& g : s.nodes[1].gpus) g.free = false;  // h: held outside any queue
  for (auto& g : s.nodes[2].gpus) g.free = g.index >= 8;
  PendingJob head = s.pending[0];
  head.tenant = "t";
  head.queue = "q";
  PendingJob first = Job(11, "t", 4);
  first.resources.gpu_model = "A100-80GB";
  PendingJob second = Job(12, "t", 4);
  second.resources.gpu_model = "A100-80GB";
  s.pending = {head, first, second};
  Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].job_id, 11);
  const model::Reason* r = ReasonOf(plan, 12);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code, model::ReasonCode::kBehindInQueue);
}

}  // namespace
}  // namespace berth::sched
