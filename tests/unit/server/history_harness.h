// A recorded job history for the history and policy preview tests: one node
// of 8 H100 GPUs, two tenants, and jobs recorded through the store as berthd
// records them (submit, place, start, exit).
#pragma once

#include <string>
#include <vector>

#include "control/lifecycle.h"
#include "unit/builders.h"
#include "unit/server/api_harness.h"

namespace berth::server {

inline constexpr TimeMs kSec = 1000;

// Tenant b is guaranteed the whole node; a borrows what b leaves.
inline constexpr const char* kBFirst = R"(queues:
  - name: a
    children: [{name: training}]
  - name: b
    quota: {gpus: {guaranteed: 8}}
    children: [{name: training, quota: {gpus: {guaranteed: 8}}}]
)";
// The change under review: a gets the guarantee instead.
inline constexpr const char* kAFirst = R"(queues:
  - name: a
    quota: {gpus: {guaranteed: 8}}
    children: [{name: training, quota: {gpus: {guaranteed: 8}}}]
  - name: b
    children: [{name: training}]
)";

class HistoryHarness : public ApiHarness {
 protected:
  void SetUp() override {
    ApiHarness::SetUp();
    t0_ = clock_.NowMs();
    model::NodeInfo n = tests::H100Node(8, "n1", 64);
    n.memory_bytes = 512ULL << 30;
    ASSERT_TRUE(store_->UpsertNode(n, t0_).has_value());
  }

  std::int64_t Submit(const std::string& tenant, TimeMs at, std::uint32_t gpus = 8,
                      bool preemptible = false) {
    model::JobSpec s;
    s.name = tenant + "-job";
    s.tenant = tenant;
    s.queue = "training";
    s.command = {"train"};
    s.resources.gpus = gpus;
    s.preemptible = preemptible;
    return *store_->CreateJob(s, at);
  }
  // Job `id` ran on n1's first `gpus` GPUs from `start` to `end` (end 0: still running).
  void Ran(std::int64_t id, TimeMs start, TimeMs end, std::uint32_t gpus = 8) {
    sched::Placement p{id, {{0, "n1", {}}}};
    for (std::uint32_t g = 0; g < gpus; ++g) p.replicas[0].gpu_indices.push_back(g);
    sched::Plan plan;
    plan.placements.push_back(p);
    auto nodes = store_->ListNodes();
    ASSERT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, start).has_value());
    std::string run_id = store_->GetJob(id)->runs.back().run_id;
    ASSERT_TRUE(control::MarkRunStarted(*store_, run_id, 42, start, start).has_value());
    if (end == 0) return;
    store::RunExit e;
    e.run_id = run_id;
    e.started_at_ms = start;
    e.ended_at_ms = end;
    ASSERT_TRUE(control::MarkRunExited(*store_, e, end).has_value());
  }
  // Three 100 s jobs of b, then two of a, each on the whole node: a waited
  // behind all of b, as b's guarantee says.
  void RecordAWaitingBehindB() {
    ASSERT_EQ(Post("/v1/policy", kBFirst).status, 201);
    std::vector<std::int64_t> b, a;
    for (int i = 0; i < 3; ++i) b.push_back(Submit("b", t0_ + i * kSec));
    for (int i = 0; i < 2; ++i) a.push_back(Submit("a", t0_ + (3 + i) * kSec));
    TimeMs t = t0_;
    for (auto id : {b[0], b[1], b[2], a[0], a[1]}) {
      Ran(id, t, t + 100 * kSec);
      t += 100 * kSec;
    }
    clock_.Set(t0_ + 600 * kSec);
  }

  TimeMs t0_ = 0;
};

}  // namespace berth::server
