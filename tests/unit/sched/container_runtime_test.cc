// A job with an image runs in a container, and only a node whose agent found
// podman can run one: placement, the waiting reason (which names the image
// and how many nodes have no container runtime), the "would run now if"
// hints, the node layer and running ahead of such a head all keep to it.
#include <gtest/gtest.h>

#include "model/reason.h"
#include "sched/core_scheduler.h"
#include "sched/fifo_scheduler.h"
#include "sched/hints.h"
#include "sched/layers.h"
#include "unit/sched/plan_check.h"

namespace berth::sched {
namespace {

constexpr const char* kImage = "registry.example/train:1.2";

NodeView PodmanTestNode(std::string name, std::uint32_t gpus, bool podman,
                        std::string model = "H100-80GB") {
  NodeView n;
  n.name = std::move(name);
  n.ready = true;
  n.container_runtime = podman;
  n.cpu_millis_free = 64'000;
  n.memory_bytes_free = 512ULL << 30;
  for (std::uint32_t i = 0; i < gpus; ++i) {
    n.gpus.push_back(GpuView{i, n.name + "-" + std::to_string(i), model, 80ULL << 30, true, true});
  }
  return n;
}

PendingJob PodmanTestJob(std::int64_t id, std::uint32_t gpus, std::string image = kImage) {
  PendingJob j;
  j.id = id;
  j.tenant = "default";
  j.queue = "default";
  j.submitted_at_ms = id;
  j.resources.gpus = gpus;
  j.image = std::move(image);
  return j;
}

const model::Reason* PodmanTestReason(const Plan& plan, std::int64_t id) {
  for (const auto& d : plan.pending) {
    if (d.job_id == id) return &d.reason;
  }
  return nullptr;
}

const Placement* PodmanTestPlacement(const Plan& plan, std::int64_t id) {
  for (const auto& p : plan.placements) {
    if (p.job_id == id) return &p;
  }
  return nullptr;
}

std::int64_t CountOf(const model::Reason& r, std::string_view key) {
  auto it = r.counts.find(key);
  return it == r.counts.end() ? 0 : it->second;
}

// Packing alone would put both jobs on "a" (the fuller node); the image job
// goes to "b", the only node with podman, and the plain job still packs.
TEST(ContainerRuntime, AJobWithAnImageLandsOnlyOnANodeWithPodman) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 2, false), PodmanTestNode("b", 8, true)};
  s.pending = {PodmanTestJob(1, 1), PodmanTestJob(2, 1, "")};
  const Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  const Placement* image = PodmanTestPlacement(plan, 1);
  const Placement* plain = PodmanTestPlacement(plan, 2);
  ASSERT_NE(image, nullptr);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(image->replicas[0].node, "b");
  EXPECT_EQ(plain->replicas[0].node, "a");
}

// With no node reporting podman the image job waits, saying why in words
// that name the image, and holds no place in line: the plain job behind it
// in the same queue runs.
TEST(ContainerRuntime, WithoutAPodmanNodeTheImageJobWaitsNamingItsImage) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 8, false), PodmanTestNode("b", 8, false)};
  s.pending = {PodmanTestJob(1, 1), PodmanTestJob(2, 1, "")};
  const Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  EXPECT_NE(PodmanTestPlacement(plan, 2), nullptr);
  const model::Reason* r = PodmanTestReason(plan, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code, model::ReasonCode::kNoNodeFits);
  EXPECT_EQ(CountOf(*r, model::kCauseNoContainerRuntime), 2);
  EXPECT_EQ(CountOf(*r, model::kNodesWithoutContainerRuntime), 2);
  EXPECT_EQ(r->detail, std::string("image=") + kImage);
  EXPECT_EQ(CountOf(*r, model::kEtaUnknown),
            static_cast<std::int64_t>(model::EtaUnknown::kInfeasible));
  const std::string text = model::RenderReason(*r);
  EXPECT_NE(text.find("2 no container runtime (podman) for the job's image"), std::string::npos)
      << text;
  EXPECT_NE(text.find(std::string("needs a node with a container runtime (podman) for image ") +
                      kImage + ": 2 of 2 nodes have none"),
            std::string::npos)
      << text;
  const std::string zh = model::RenderReason(*r, model::Lang::kZh);
  EXPECT_NE(zh.find(kImage), std::string::npos) << zh;
  EXPECT_NE(zh.find("podman"), std::string::npos) << zh;
}

// The podman node is full: the job waits for it, and the reason counts the
// node without podman apart from the one short of free GPUs.
TEST(ContainerRuntime, ABusyPodmanNodeIsWaitedForAndTheOthersAreCounted) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 8, false), PodmanTestNode("b", 8, true)};
  for (auto& g : s.nodes[1].gpus) g.free = false;
  RunningJob r;
  r.id = 9;
  r.tenant = "default";
  r.queue = "default";
  r.resources.gpus = 8;
  r.replicas = {{0, "b", {0, 1, 2, 3, 4, 5, 6, 7}}};
  s.running = {r};
  s.pending = {PodmanTestJob(1, 1)};
  const Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  EXPECT_TRUE(plan.placements.empty());
  const model::Reason* why = PodmanTestReason(plan, 1);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->code, model::ReasonCode::kNoNodeFits);
  EXPECT_EQ(CountOf(*why, model::kCauseNoContainerRuntime), 1);
  EXPECT_EQ(CountOf(*why, model::kCauseTooFewGpus), 1);
  EXPECT_EQ(CountOf(*why, model::kNodesWithoutContainerRuntime), 1);
  EXPECT_NE(model::RenderReason(*why).find("1 of 2 nodes have none"), std::string::npos)
      << model::RenderReason(*why);
}

// A job with no image never hears about container runtimes.
TEST(ContainerRuntime, APlainJobIsNotToldAboutContainerRuntimes) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 1, false)};
  s.pending = {PodmanTestJob(1, 4, "")};
  const Plan plan = CoreScheduler().Schedule(s);
  const model::Reason* why = PodmanTestReason(plan, 1);
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(CountOf(*why, model::kCauseNoContainerRuntime), 0);
  EXPECT_FALSE(why->counts.contains(model::kNodesWithoutContainerRuntime));
  EXPECT_EQ(model::RenderReason(*why).find("podman"), std::string::npos);
}

// The only free GPUs of another model are on a node without podman: the
// reason must not promise "it would run now with gpu_model H100".
TEST(ContainerRuntime, NoHintPointsAtANodeWithoutPodman) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 8, true, "A100-80GB"), PodmanTestNode("h", 8, false)};
  for (auto& g : s.nodes[0].gpus) g.free = false;
  RunningJob r;
  r.id = 9;
  r.tenant = "default";
  r.queue = "default";
  r.resources.gpus = 8;
  r.replicas = {{0, "a", {0, 1, 2, 3, 4, 5, 6, 7}}};
  s.running = {r};
  PendingJob j = PodmanTestJob(1, 1);
  j.resources.gpu_model = "A100-80GB";
  s.pending = {j};
  const Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  const model::Reason* why = PodmanTestReason(plan, 1);
  ASSERT_NE(why, nullptr);
  EXPECT_FALSE(HintOf(*why).has_value()) << why->detail;
  EXPECT_EQ(why->detail, std::string("image=") + kImage);
  // Without the image, the same job would be told to take the H100s.
  s.pending[0].image.clear();
  const Plan plain = CoreScheduler().Schedule(s);
  const model::Reason* told = PodmanTestReason(plain, 1);
  ASSERT_NE(told, nullptr);
  ASSERT_TRUE(HintOf(*told).has_value());
  EXPECT_EQ(HintOf(*told)->value, "H100-80GB");
}

// Where another model on a podman node has room, the hint names it, the
// cycle agrees (HintHolds), and the reason speaks of "its image".
TEST(ContainerRuntime, AHintToAPodmanNodeHoldsAndTheReasonStillSaysWhy) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 8, true, "A100-80GB"), PodmanTestNode("h", 8, false)};
  PendingJob j = PodmanTestJob(1, 1);
  j.resources.gpu_model = "H100-80GB";
  s.pending = {j};
  const CoreScheduler core;
  Plan plan = core.Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  const model::Reason* why = PodmanTestReason(plan, 1);
  ASSERT_NE(why, nullptr);
  auto hint = HintOf(*why);
  ASSERT_TRUE(hint.has_value()) << why->detail;
  EXPECT_EQ(hint->value, "A100-80GB");
  Snapshot scratch = s;
  EXPECT_TRUE(HintHolds(core, scratch, 1, *hint));
  const std::string text = model::RenderReason(*why);
  EXPECT_NE(text.find("container runtime (podman) for its image: 1 of 2 nodes have none"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("it would run now with gpu_model A100-80GB"), std::string::npos) << text;
  Plan unchecked = plan;
  const HintCheck check = VerifyHints(core, s, plan, 8);
  EXPECT_EQ(check.verified, 1U);
  // A hint left unchecked is dropped, and the image takes its place.
  EXPECT_EQ(VerifyHints(core, s, unchecked, 0).unchecked, 1U);
  const model::Reason* dropped = PodmanTestReason(unchecked, 1);
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(dropped->detail, std::string("image=") + kImage);
}

// The head waits for the podman node; the node without podman is capacity
// it could never use, so a plain job behind it runs there now.
TEST(ContainerRuntime, AJobBehindAnImageHeadRunsOnANodeWithoutPodman) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 8, true), PodmanTestNode("b", 8, false)};
  for (auto& g : s.nodes[0].gpus) g.free = g.index >= 4;
  RunningJob r;
  r.id = 9;
  r.tenant = "default";
  r.queue = "default";
  r.resources.gpus = 4;
  r.replicas = {{0, "a", {0, 1, 2, 3}}};
  s.running = {r};
  s.pending = {PodmanTestJob(1, 8), PodmanTestJob(2, 2, "")};
  const Plan plan = CoreScheduler().Schedule(s);
  ASSERT_EQ(CheckPlan(s, plan), "");
  EXPECT_EQ(PodmanTestPlacement(plan, 1), nullptr);
  const Placement* behind = PodmanTestPlacement(plan, 2);
  ASSERT_NE(behind, nullptr);
  EXPECT_EQ(behind->replicas[0].node, "b");
}

TEST(ContainerRuntime, TheNodeLayerCountsNodesWithoutPodman) {
  std::vector<NodeView> nodes = {PodmanTestNode("a", 8, true), PodmanTestNode("b", 8, false),
                                 PodmanTestNode("c", 8, false)};
  const NodeLayer image = NodeLayerOf(nodes, model::DefaultPolicy(), PodmanTestJob(1, 1));
  EXPECT_EQ(image.nodes, 3);
  EXPECT_EQ(image.could_take, 1);
  ASSERT_EQ(image.excluded.size(), 1U);
  EXPECT_EQ(image.excluded[0].first, model::kCauseNoContainerRuntime);
  EXPECT_EQ(image.excluded[0].second, 2);
  const NodeLayer plain = NodeLayerOf(nodes, model::DefaultPolicy(), PodmanTestJob(1, 1, ""));
  EXPECT_EQ(plain.could_take, 3);
  const std::string text =
      model::RenderNodeLayer(3, 1, image.excluded, image.alone, model::Lang::kEn);
  EXPECT_NE(text.find("2 no container runtime (podman)"), std::string::npos) << text;
  EXPECT_NE(text.find(": a container runtime (podman) on the node alone would open 2"),
            std::string::npos)
      << text;
}

// The FIFO baseline (berth-sim's comparison) keeps the rule too.
TEST(ContainerRuntime, TheFifoBaselinePlacesImagesOnlyWherePodmanIs) {
  Snapshot s;
  s.nodes = {PodmanTestNode("a", 8, false), PodmanTestNode("b", 8, true)};
  s.pending = {PodmanTestJob(1, 1)};
  Plan plan = FifoScheduler().Schedule(s);
  ASSERT_EQ(plan.placements.size(), 1U);
  EXPECT_EQ(plan.placements[0].replicas[0].node, "b");
  s.nodes[1].container_runtime = false;
  plan = FifoScheduler().Schedule(s);
  ASSERT_EQ(plan.pending.size(), 1U);
  EXPECT_EQ(CountOf(plan.pending[0].reason, model::kCauseNoContainerRuntime), 2);
}

}  // namespace
}  // namespace berth::sched
