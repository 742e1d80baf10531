// Property test: random clusters, policies and job streams, with the
// randomness injected (a seeded std::mt19937). Each cycle's plan is applied
// to the next cycle's snapshot, so evictions and placements accumulate.
// Checked every cycle: no GPU handed out twice, no partial gang, every
// pending job explained, the same input gives the same plan, and no queue
// below its guarantee is left waiting while a borrower holds GPUs it could
// reclaim.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "sched/core_scheduler.h"
#include "sched/running_memo.h"
#include "unit/sched/plan_check.h"

namespace berth::sched {
namespace {

struct World {
  Snapshot s;
  std::int64_t next_id = 1;
};

std::int64_t Rand(std::mt19937& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// Tenants t0..tN-1, each one queue "q" with a GPU guarantee that together
// cover at most the cluster, some with borrow limits.
model::Policy RandomPolicy(std::mt19937& rng, std::int64_t total_gpus, int tenants) {
  model::Policy p = model::DefaultPolicy();
  std::int64_t left = total_gpus;
  for (int t = 0; t < tenants; ++t) {
    model::QueuePolicy top;
    top.path = "t" + std::to_string(t);
    top.tenant = top.path;
    model::Quota q;
    q.guaranteed = Rand(rng, 0, left / 2) * 1000;
    left -= q.guaranteed / 1000;
    if (Rand(rng, 0, 2) == 0) q.borrow_limit = Rand(rng, 0, 8) * 1000;
    q.weight = Rand(rng, 1, 3);
    top.quota[{model::ResourceKind::kGpus, ""}] = q;
    model::QueuePolicy leaf;
    leaf.path = top.path + "/q";
    leaf.tenant = top.tenant;
    leaf.parent = top.path;
    p.queues.push_back(top);
    p.queues.push_back(leaf);
  }
  p.min_runtime_ms = Rand(rng, 0, 1) * 60'000;
  p.backfill.enabled = Rand(rng, 0, 4) != 0;
  p.backfill.max_reservations = Rand(rng, 0, 4);
  return p;
}

// With `sharing`, some GPUs are in sharing mode and of two memory sizes.
World RandomWorld(std::mt19937& rng, bool single_gpu_jobs, bool sharing = false) {
  World w;
  int nodes = static_cast<int>(Rand(rng, 1, 8));
  std::int64_t total = 0;
  for (int n = 0; n < nodes; ++n) {
    NodeView v;
    v.name = "n" + std::to_string(n);
    v.ready = Rand(rng, 0, 9) != 0;
    v.cpu_millis_free = 64'000;
    v.memory_bytes_free = 512ULL << 30;
    std::uint32_t gpus = single_gpu_jobs ? 8 : static_cast<std::uint32_t>(Rand(rng, 1, 8));
    for (std::uint32_t i = 0; i < gpus; ++i) {
      GpuView g;
      g.index = i;
      g.model = Rand(rng, 0, 3) == 0 ? "A100-80GB" : "H100-80GB";
      g.memory_bytes = 80ULL << 30;
      g.healthy = single_gpu_jobs || Rand(rng, 0, 19) != 0;
      g.nvlink_island = i / 4;
      if (sharing) {
        g.sharing = Rand(rng, 0, 1) == 0;
        if (Rand(rng, 0, 3) == 0) g.memory_bytes = 40ULL << 30;
      }
      v.gpus.push_back(g);
    }
    if (single_gpu_jobs) v.ready = true;
    total += gpus;
    w.s.nodes.push_back(std::move(v));
  }
  w.s.policy = RandomPolicy(rng, total, static_cast<int>(Rand(rng, 1, 4)));
  w.s.now_ms = 1'000'000;
  return w;
}

void AddJobs(std::mt19937& rng, World& w, bool single_gpu_jobs, bool sharing = false) {
  int tenants = static_cast<int>(w.s.policy.queues.size() / 2);  // default + tN pairs
  int count = static_cast<int>(Rand(rng, 0, 4));
  for (int i = 0; i < count; ++i) {
    PendingJob j;
    j.id = w.next_id++;
    int t = static_cast<int>(Rand(rng, 0, tenants - 1));
    if (t == 0) {
      j.tenant = "default";
      j.queue = "default";
    } else {
      j.tenant = "t" + std::to_string(t - 1);
      j.queue = "q";
    }
    j.priority = static_cast<model::Priority>(Rand(rng, 0, 3));
    j.submitted_at_ms = w.s.now_ms;
    j.replicas = single_gpu_jobs ? 1 : static_cast<std::uint32_t>(Rand(rng, 1, 3));
    j.resources.gpus = single_gpu_jobs ? 1 : static_cast<std::uint32_t>(Rand(rng, 0, 4));
    if (!single_gpu_jobs && j.resources.gpus > 0 && Rand(rng, 0, 3) == 0) {
      j.resources.gpu_model = "A100-80GB";
    }
    if (!single_gpu_jobs && Rand(rng, 0, 4) == 0) j.preemptible = false;
    if (!single_gpu_jobs && Rand(rng, 0, 5) == 0) j.topology.one_node = true;
    if (Rand(rng, 0, 3) != 0) j.max_runtime_ms = Rand(rng, 1, 60) * 60'000;
    if (sharing && Rand(rng, 0, 1) == 0) {  // a slice: by share or by memory
      j.resources.gpus = 0;
      if (Rand(rng, 0, 1) == 0) {
        j.resources.gpu_share_millis = static_cast<std::uint32_t>(Rand(rng, 1, 999));
      } else {
        j.resources.gpu_share_bytes = static_cast<std::uint64_t>(Rand(rng, 1, 90)) << 30;
      }
    }
    w.s.pending.push_back(j);
  }
}

// Applies a plan: evictions free GPUs and go back to pending; placements
// start running. Some running jobs finish.
void Apply(std::mt19937& rng, World& w, const Plan& plan) {
  std::map<std::int64_t, const Placement*> placed;
  for (const auto& p : plan.placements) placed[p.job_id] = &p;
  auto free_gpus = [&](const RunningJob& r) {
    HoldGpus(w.s.nodes, r.resources, r.replicas, false);
  };
  std::set<std::int64_t> evicted;
  for (const auto& e : plan.evictions) evicted.insert(e.job_id);
  std::vector<RunningJob> still;
  for (auto& r : w.s.running) {
    bool finish = Rand(rng, 0, 9) == 0;
    if (evicted.contains(r.id) || finish) {
      free_gpus(r);
      if (evicted.contains(r.id)) {
        PendingJob j;
        j.id = r.id;
        j.tenant = r.tenant;
        j.queue = r.queue;
        j.priority = r.priority;
        j.submitted_at_ms = w.s.now_ms;
        j.replicas = static_cast<std::uint32_t>(r.replicas.size());
        j.resources = r.resources;
        j.preemptible = r.preemptible;
        j.max_runtime_ms = r.max_runtime_ms;
        w.s.pending.push_back(j);
      }
      continue;
    }
    still.push_back(std::move(r));
  }
  std::vector<PendingJob> waiting;
  for (auto& j : w.s.pending) {
    if (evicted.contains(j.id) && !placed.contains(j.id)) {
      waiting.push_back(j);
      continue;
    }
    auto it = placed.find(j.id);
    if (it == placed.end()) {
      waiting.push_back(std::move(j));
      continue;
    }
    RunningJob r;
    r.id = j.id;
    r.tenant = j.tenant;
    r.queue = j.queue;
    r.priority = j.priority;
    r.preemptible = j.preemptible;
    r.started_at_ms = w.s.now_ms;
    r.resources = j.resources;
    r.max_runtime_ms = j.max_runtime_ms;
    // A third of the jobs checkpoint: consolidation may move them (a moved
    // job was evicted above and is placed again here, by its new placement).
    r.checkpoints = j.id % 3 == 0;
    r.replicas = it->second->replicas;
    HoldGpus(w.s.nodes, r.resources, r.replicas, true);
    still.push_back(std::move(r));
  }
  w.s.running = std::move(still);
  w.s.pending = std::move(waiting);
  w.s.now_ms += 120'000;
}

bool SamePlan(const Plan& a, const Plan& b) {
  if (a.placements.size() != b.placements.size() || a.evictions.size() != b.evictions.size() ||
      a.pending.size() != b.pending.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.placements.size(); ++i) {
    if (a.placements[i].job_id != b.placements[i].job_id) return false;
    for (std::size_t r = 0; r < a.placements[i].replicas.size(); ++r) {
      const auto& x = a.placements[i].replicas[r];
      const auto& y = b.placements[i].replicas[r];
      if (x.node != y.node || x.gpu_indices != y.gpu_indices) return false;
    }
  }
  for (std::size_t i = 0; i < a.evictions.size(); ++i) {
    if (a.evictions[i].job_id != b.evictions[i].job_id) return false;
  }
  for (std::size_t i = 0; i < a.pending.size(); ++i) {
    if (a.pending[i].job_id != b.pending[i].job_id ||
        !(a.pending[i].reason == b.pending[i].reason)) {
      return false;
    }
  }
  return true;
}

TEST(SchedulerProperties, RandomClustersKeepTheInvariants) {
  std::mt19937 rng(20261129);
  int cycles = 0;
  std::size_t placed = 0;
  std::size_t evicted = 0;
  std::size_t waiting = 0;
  std::size_t reservations = 0;
  std::size_t moves = 0;
  for (int world = 0; world < 150; ++world) {
    World w = RandomWorld(rng, false);
    for (int cycle = 0; cycle < 15; ++cycle, ++cycles) {
      AddJobs(rng, w, false);
      Plan plan = CoreScheduler().Schedule(w.s);
      ASSERT_EQ(CheckPlan(w.s, plan), "") << "world " << world << " cycle " << cycle;
      ASSERT_TRUE(SamePlan(plan, CoreScheduler().Schedule(w.s))) << "not deterministic";
      for (const auto& d : plan.pending) {
        // Every job that waits on its own account says when it starts or
        // why that is unknown.
        if (d.reason.code == model::ReasonCode::kBehindInQueue ||
            d.reason.code == model::ReasonCode::kQueueUnknown) {
          continue;
        }
        ASSERT_TRUE(d.reason.counts.contains(model::kEtaMs) ||
                    d.reason.counts.contains(model::kEtaUnknown))
            << "job " << d.job_id << ": " << model::RenderReason(d.reason);
      }
      reservations += plan.reservations.size();
      moves += static_cast<std::size_t>(std::count_if(
          plan.placements.begin(), plan.placements.end(), [](const auto& p) { return p.moved; }));
      placed += plan.placements.size();
      evicted += plan.evictions.size();
      waiting += plan.pending.size();
      Apply(rng, w, plan);
    }
  }
  EXPECT_GE(cycles, 2000);
  // The streams exercise every path, not just the easy one.
  EXPECT_GT(placed, 1000U);
  EXPECT_GT(evicted, 50U);
  EXPECT_GT(waiting, 1000U);
  EXPECT_GT(reservations, 100U);
  EXPECT_GT(moves, 20U);
  std::printf(
      "%d cycles: %zu placements, %zu evictions, %zu waiting decisions, %zu reservations, %zu "
      "moves\n",
      cycles, placed, evicted, waiting, reservations, moves);
}

// A memo kept across cycles (sched/running_memo.h, as berth-sim keeps one)
// never changes a plan: the same random streams scheduled with and without
// it give the same plans, through evictions, moves, gangs, slices, and
// nodes joining in front of the others (which moves every node's position,
// so that what the memo remembers no longer holds).
TEST(SchedulerProperties, PlansAreTheSameWithARunningMemo) {
  std::mt19937 rng(11);
  std::uint64_t key = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  int joins = 0;
  std::size_t evicted = 0;
  for (int world = 0; world < 120; ++world) {
    const bool sharing = world % 2 == 0;
    World w = RandomWorld(rng, false, sharing);
    w.s.memo = std::make_shared<RunningMemo>();
    for (int cycle = 0; cycle < 15; ++cycle) {
      AddJobs(rng, w, false, sharing);
      Snapshot plain = w.s;
      plain.memo = nullptr;
      Plan plan = CoreScheduler().Schedule(w.s);
      ASSERT_TRUE(SamePlan(plan, CoreScheduler().Schedule(plain)))
          << "world " << world << " cycle " << cycle;
      ASSERT_EQ(CheckPlan(w.s, plan), "") << "world " << world << " cycle " << cycle;
      evicted += plan.evictions.size();
      Apply(rng, w, plan);
      // Each run its own key (Apply starts every placed job afresh).
      for (auto& r : w.s.running) {
        if (r.run_key == 0) r.run_key = ++key;
      }
      if (Rand(rng, 0, 5) == 0) {
        NodeView v;
        v.name = "a" + std::to_string(cycle);
        v.ready = true;
        v.cpu_millis_free = 64'000;
        v.memory_bytes_free = 512ULL << 30;
        for (std::uint32_t i = 0; i < 4; ++i) {
          GpuView g;
          g.index = i;
          g.model = "A100-80GB";
          g.memory_bytes = 80ULL << 30;
          v.gpus.push_back(g);
        }
        if (std::none_of(w.s.nodes.begin(), w.s.nodes.end(),
                         [&](const NodeView& n) { return n.name == v.name; })) {
          w.s.nodes.push_back(std::move(v));
          std::sort(w.s.nodes.begin(), w.s.nodes.end(),
                    [](const NodeView& a, const NodeView& b) { return a.name < b.name; });
          ++joins;
        }
      }
    }
    hits += w.s.memo->hits();
    misses += w.s.memo->misses();
  }
  // Both paths taken, many times each.
  EXPECT_GT(hits, 1000U);
  EXPECT_GT(misses, 500U);
  EXPECT_GT(joins, 100);
  EXPECT_GT(evicted, 50U);
  std::printf("%llu running jobs from the memo, %llu resolved, %d nodes joined\n",
              static_cast<unsigned long long>(hits), static_cast<unsigned long long>(misses),
              joins);
}

// Some GPUs in sharing mode, a mix of whole-GPU and slice jobs: CheckPlan
// holds every plan to the sharing rules (slices only on sharing GPUs, their
// shares within 1000 mGPU and their memory within the card, never a whole
// replica and a slice on one GPU); here the applied state is checked too,
// cycle after cycle, including what evictions and finished jobs give back.
TEST(SchedulerProperties, SharedGpusAreNeverOversubscribed) {
  std::mt19937 rng(3);
  std::size_t slices = 0;
  std::size_t whole_on_sharing = 0;
  std::size_t slice_waits = 0;
  for (int world = 0; world < 150; ++world) {
    World w = RandomWorld(rng, false, true);
    for (int cycle = 0; cycle < 15; ++cycle) {
      AddJobs(rng, w, false, true);
      Plan plan = CoreScheduler().Schedule(w.s);
      ASSERT_EQ(CheckPlan(w.s, plan), "") << "world " << world << " cycle " << cycle;
      ASSERT_TRUE(SamePlan(plan, CoreScheduler().Schedule(w.s))) << "not deterministic";
      std::map<std::int64_t, const PendingJob*> byid;
      for (const auto& j : w.s.pending) byid[j.id] = &j;
      for (const auto& p : plan.placements) {
        if (p.moved) continue;  // a running whole-GPU job placed again
        if (model::IsSlice(byid[p.job_id]->resources)) slices += p.replicas.size();
      }
      for (const auto& d : plan.pending) {
        if (model::IsSlice(byid[d.job_id]->resources)) ++slice_waits;
      }
      Apply(rng, w, plan);
      for (const auto& n : w.s.nodes) {
        for (const auto& g : n.gpus) {
          ASSERT_LE(g.shared_millis, 1000U) << n.name << "/" << g.index;
          ASSERT_LE(g.shared_bytes, g.memory_bytes) << n.name << "/" << g.index;
          if (g.shared_millis > 0) {
            ASSERT_TRUE(g.sharing) << n.name << "/" << g.index;
            ASSERT_FALSE(g.free);
          }
        }
      }
      // A GPU holding a whole replica holds no slice.
      for (const auto& r : w.s.running) {
        if (model::IsSlice(r.resources)) continue;
        for (const auto& rp : r.replicas) {
          for (const auto& n : w.s.nodes) {
            if (n.name != rp.node) continue;
            for (auto i : rp.gpu_indices) {
              ASSERT_EQ(n.gpus[i].shared_millis, 0U) << "whole and slice on " << n.name << "/" << i;
              if (n.gpus[i].sharing) ++whole_on_sharing;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(slices, 500U);
  EXPECT_GT(slice_waits, 100U);
  std::printf("%zu slices placed, %zu slice waits, %zu whole-GPU cycles on sharing GPUs\n", slices,
              slice_waits, whole_on_sharing);
}

// With 1-GPU jobs on identical healthy nodes nothing but the rules can stop
// a reclaim: after every cycle, a waiting job whose queue is within its
// guarantee must have no reclaimable victim left.
TEST(SchedulerProperties, NoGuaranteedDemandWaitsWhileABorrowerCouldBeReclaimed) {
  std::mt19937 rng(7);
  int cycles = 0;
  std::size_t evictions = 0;
  for (int world = 0; world < 100; ++world) {
    World w = RandomWorld(rng, true);
    w.s.policy.min_runtime_ms = 0;
    w.s.policy.reclaim_grace_ms = 0;  // the rule without a grace (reclaim_grace_test.cc)
    for (int cycle = 0; cycle < 10; ++cycle, ++cycles) {
      AddJobs(rng, w, true);
      Plan plan = CoreScheduler().Schedule(w.s);
      ASSERT_EQ(CheckPlan(w.s, plan), "");
      evictions += plan.evictions.size();
      // Usage per top-level queue after the plan.
      std::map<std::string, std::int64_t> used;
      std::set<std::int64_t> evicted;
      for (const auto& e : plan.evictions) evicted.insert(e.job_id);
      for (const auto& r : w.s.running) {
        if (!evicted.contains(r.id)) used[r.tenant] += r.resources.gpus * 1000;
      }
      std::map<std::int64_t, const PendingJob*> byid;
      for (const auto& j : w.s.pending) byid[j.id] = &j;
      for (const auto& p : plan.placements) {
        used[byid[p.job_id]->tenant] += byid[p.job_id]->resources.gpus * 1000;
      }
      auto guaranteed = [&](const std::string& tenant) -> std::optional<std::int64_t> {
        const auto* q = w.s.policy.FindQueue(tenant);
        if (q == nullptr || !q->quota.contains({model::ResourceKind::kGpus, ""})) {
          return std::nullopt;
        }
        return q->quota.at({model::ResourceKind::kGpus, ""}).guaranteed;
      };
      for (const auto& d : plan.pending) {
        const PendingJob& j = *byid[d.job_id];
        if (d.reason.code == model::ReasonCode::kBehindInQueue) continue;
        auto g = guaranteed(j.tenant);
        if (!g || used[j.tenant] + 1000 > *g) continue;
        for (const auto& r : w.s.running) {
          if (evicted.contains(r.id) || r.tenant == j.tenant) continue;
          auto rg = guaranteed(r.tenant);
          bool preemptible = !r.preemptible.has_value() || *r.preemptible;
          EXPECT_FALSE(preemptible && used[r.tenant] > rg.value_or(0))
              << "job " << j.id << " of " << j.tenant << " waits (" << model::RenderReason(d.reason)
              << ") while " << r.tenant << " borrows with job " << r.id;
        }
      }
      Apply(rng, w, plan);
    }
  }
  EXPECT_GE(cycles, 1000);
  EXPECT_GT(evictions, 20U);
  std::printf("%d cycles, %zu reclaims\n", cycles, evictions);
}

// Backfill never delays a reserved job. One queue and one priority, so the
// queue order of the jobs already waiting never changes (new jobs join at
// the back); every running job ends exactly at its max runtime (jobs
// without one at a time the scheduler is not told), and a virtual clock
// jumps from one end or arrival to the next, running a cycle at each. A job
// that was given a reserved start is running by then.

TEST(SchedulerProperties, BackfillNeverDelaysAReservedJob) {
  std::mt19937 rng(42);
  int cycles = 0;
  std::size_t reserved = 0;
  std::size_t backfilled = 0;  // placed on GPUs reserved for another job
  std::size_t kept = 0;        // reserved jobs that started, and by when
  for (int world = 0; world < 200; ++world) {
    Snapshot s;
    s.now_ms = 0;
    int nodes = static_cast<int>(Rand(rng, 1, 4));
    std::uint32_t most = 0;
    for (int n = 0; n < nodes; ++n) {
      NodeView v;
      v.name = "n" + std::to_string(n);
      v.ready = true;
      v.cpu_millis_free = 64'000;
      v.memory_bytes_free = 512ULL << 30;
      auto gpus = static_cast<std::uint32_t>(Rand(rng, 2, 8));
      most = std::max(most, gpus);
      for (std::uint32_t i = 0; i < gpus; ++i) {
        GpuView g;
        g.index = i;
        g.model = "H100-80GB";
        g.memory_bytes = 80ULL << 30;
        g.nvlink_island = i / 4;
        v.gpus.push_back(g);
      }
      s.nodes.push_back(std::move(v));
    }
    s.policy.backfill.max_reservations = Rand(rng, 1, 3);
    std::map<std::int64_t, std::int64_t> hidden_end;  // jobs without a max runtime
    std::map<std::int64_t, std::int64_t> first_eta;   // the first reserved start given
    std::int64_t next_id = 1;
    std::int64_t next_arrival = 0;
    for (int cycle = 0; cycle < 40; ++cycle, ++cycles) {
      // Arrivals due now.
      while (next_arrival <= s.now_ms) {
        PendingJob j;
        j.id = next_id++;
        j.tenant = "default";
        j.queue = "default";
        j.submitted_at_ms = next_arrival;
        j.replicas = static_cast<std::uint32_t>(Rand(rng, 1, 2));
        j.resources.gpus = static_cast<std::uint32_t>(Rand(rng, 1, most));
        if (Rand(rng, 0, 9) != 0) {
          j.max_runtime_ms = Rand(rng, 1, 30) * 60'000;
        } else {
          hidden_end[j.id] = Rand(rng, 1, 60) * 60'000;  // from its start
        }
        s.pending.push_back(j);
        next_arrival += Rand(rng, 0, 10) * 60'000;
      }
      Plan plan = CoreScheduler().Schedule(s);
      ASSERT_EQ(CheckPlan(s, plan), "") << "world " << world << " cycle " << cycle;
      ASSERT_LE(std::ssize(plan.reservations), s.policy.backfill.max_reservations);
      for (const auto& r : plan.reservations) {
        ASSERT_GE(r.start_ms, s.now_ms);
        if (first_eta.try_emplace(r.job_id, r.start_ms).second) ++reserved;
      }
      std::set<std::pair<std::string, std::uint32_t>> held;
      for (const auto& r : plan.reservations) {
        for (const auto& rp : r.replicas) {
          for (auto i : rp.gpu_indices) held.insert({rp.node, i});
        }
      }
      for (const auto& d : plan.pending) {
        auto it = first_eta.find(d.job_id);
        ASSERT_TRUE(it == first_eta.end() || s.now_ms < it->second)
            << "job " << d.job_id << " was reserved to start by " << it->second
            << " and still waits at " << s.now_ms << ": " << model::RenderReason(d.reason);
      }
      // Apply: placed jobs start now.
      std::map<std::int64_t, const Placement*> placed;
      for (const auto& p : plan.placements) placed[p.job_id] = &p;
      std::vector<PendingJob> waiting;
      for (auto& j : s.pending) {
        auto it = placed.find(j.id);
        if (it == placed.end()) {
          waiting.push_back(std::move(j));
          continue;
        }
        if (auto e = first_eta.find(j.id); e != first_eta.end()) {
          ASSERT_LE(s.now_ms, e->second) << "job " << j.id << " started after its reserved start";
          ++kept;
        }
        RunningJob r;
        r.id = j.id;
        r.tenant = j.tenant;
        r.queue = j.queue;
        r.started_at_ms = s.now_ms;
        r.resources = j.resources;
        r.max_runtime_ms = j.max_runtime_ms;
        r.replicas = it->second->replicas;
        for (const auto& rp : r.replicas) {
          for (auto index : rp.gpu_indices) backfilled += held.contains({rp.node, index}) ? 1 : 0;
        }
        HoldGpus(s.nodes, r.resources, r.replicas, true);
        s.running.push_back(std::move(r));
      }
      s.pending = std::move(waiting);
      // The next event: an arrival or a job's end; jobs end at their max runtime.
      auto end_of = [&](const RunningJob& r) {
        return r.started_at_ms + (r.max_runtime_ms > 0 ? r.max_runtime_ms : hidden_end[r.id]);
      };
      std::int64_t next = next_arrival;
      for (const auto& r : s.running) next = std::min(next, end_of(r));
      s.now_ms = std::max(next, s.now_ms + 1);
      std::vector<RunningJob> still;
      for (auto& r : s.running) {
        if (end_of(r) > s.now_ms) {
          still.push_back(std::move(r));
          continue;
        }
        HoldGpus(s.nodes, r.resources, r.replicas, false);
      }
      s.running = std::move(still);
    }
  }
  EXPECT_GE(cycles, 5000);
  // The streams reserve often, and backfill onto reserved GPUs often.
  EXPECT_GT(reserved, 300U);
  EXPECT_GT(kept, 250U);
  EXPECT_GT(backfilled, 500U);
  std::printf("%d cycles: %zu jobs reserved, %zu of them started, %zu GPUs backfilled\n", cycles,
              reserved, kept, backfilled);
}

}  // namespace
}  // namespace berth::sched
