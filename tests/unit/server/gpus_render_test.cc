// GET /v1/gpus as the API renders it (GpusJson): each GPU names the live
// run that holds it on its own node, never a run of the same GPU index on
// another node or one that has exited, and slices of a sharing GPU add up.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/render.h"

namespace berth::server {
namespace {

NodeStatus Node(std::string name, std::uint32_t gpus, bool sharing = false) {
  NodeStatus n;
  n.record.info.name = std::move(name);
  for (std::uint32_t i = 0; i < gpus; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = n.record.info.name + "-" + std::to_string(i);
    g.model = "H100-80GB";
    g.memory_bytes = std::uint64_t{80} << 30;
    g.sharing = sharing;
    n.record.info.gpus.push_back(g);
  }
  return n;
}

store::JobRecord Holder(
    std::int64_t id, std::string tenant,
    std::vector<std::tuple<std::string, std::vector<std::uint32_t>, model::RunState, std::uint64_t>>
        runs) {
  store::JobRecord j;
  j.id = id;
  j.spec.name = "job-" + std::to_string(id);
  j.spec.tenant = std::move(tenant);
  j.spec.queue = "default";
  std::uint32_t replica = 0;
  for (auto& [node, gpus, state, share] : runs) {
    store::RunRecord r;
    r.run_id = "r" + std::to_string(id) + "-" + std::to_string(replica);
    r.replica = replica++;
    r.node = node;
    r.gpu_indices = gpus;
    r.state = state;
    r.gpu_share_millis = share;
    r.gpu_share_bytes = share == 0 ? 0 : std::uint64_t{10} << 30;
    j.runs.push_back(std::move(r));
  }
  return j;
}

const nlohmann::json& Gpu(const nlohmann::json& all, std::string_view node, int index) {
  for (const auto& g : all) {
    if (g["node"] == node && g["index"] == index) return g;
  }
  static const nlohmann::json kMissing;
  ADD_FAILURE() << node << "/" << index << " is not in the answer";
  return kMissing;
}

TEST(GpusRender, EachGpuNamesTheLiveRunOnItsOwnNode) {
  const std::vector<NodeStatus> nodes = {Node("a", 2), Node("b", 2), Node("c", 1, true)};
  const std::vector<store::JobRecord> holders = {
      // A gang over both nodes: replica 0 on a/0, replica 1 on b/1.
      Holder(1, "red",
             {{"a", {0}, model::RunState::kRunning, 0}, {"b", {1}, model::RunState::kStarting, 0}}),
      // Its earlier attempt held b/0 and exited: b/0 is free.
      Holder(2, "red", {{"b", {0}, model::RunState::kExited, 0}}),
      // Two slices of c/0, one of a tenant the caller cannot read.
      Holder(3, "red", {{"c", {0}, model::RunState::kRunning, 250}}),
      Holder(4, "blue", {{"c", {0}, model::RunState::kRunning, 500}}),
  };
  const auto all = GpusJson(nodes, holders, [](std::string_view t) { return t == "red"; });
  ASSERT_EQ(all.size(), 5U);
  EXPECT_EQ(Gpu(all, "a", 0)["job"]["id"], 1);
  EXPECT_EQ(Gpu(all, "a", 0)["job"]["replica"], 0);
  EXPECT_TRUE(Gpu(all, "a", 1)["job"].is_null());
  EXPECT_TRUE(Gpu(all, "b", 0)["job"].is_null());
  EXPECT_EQ(Gpu(all, "b", 1)["job"]["id"], 1);
  EXPECT_EQ(Gpu(all, "b", 1)["job"]["replica"], 1);
  EXPECT_TRUE(Gpu(all, "a", 0)["sharing"].is_null());

  const auto& shared = Gpu(all, "c", 0);
  EXPECT_TRUE(shared["job"].is_null());
  EXPECT_EQ(shared["sharing"]["used_mgpu"], 750);
  ASSERT_EQ(shared["sharing"]["holders"].size(), 2U);
  EXPECT_EQ(shared["sharing"]["holders"][0]["id"], 3);
  EXPECT_TRUE(shared["sharing"]["holders"][1]["id"].is_null());
  EXPECT_EQ(shared["sharing"]["holders"][1]["name"], "another tenant");
  EXPECT_EQ(all.dump().find("job-4"), std::string::npos);
}

}  // namespace
}  // namespace berth::server
