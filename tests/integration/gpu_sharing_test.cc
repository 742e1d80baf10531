// GPU sharing end to end: two slice jobs run at the same time on the same
// simulated sharing GPU, each sees that GPU and its memory limit, and
// `berth gpus` shows both holders with their slices while the GPU outside
// sharing mode stays free.
#include <algorithm>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

TEST_F(IntegrationTest, TwoSlicesShareOneGpu) {
  auto cluster = dir_ / "cluster.yaml";
  WriteFile(cluster,
            "nodes:\n"
            "  - name: share-1\n"
            "    cpus: 8\n"
            "    memory: 32Gi\n"
            "    shared_gpus: [1]\n"
            "    gpus: {model: L4-24GB, memory: 24Gi, count: 2}\n");
  BerthdOptions options = AllInOne();
  options.simulate = cluster;
  Berthd& berthd = NewBerthd(options);
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  // Each slice: half the card's 24Gi. Each job stays up until the test has
  // seen both hold the GPU (a release file), or 30 s pass.
  auto release = dir_ / "release";
  std::vector<std::int64_t> ids;
  for (const char* name : {"slice-a", "slice-b"}) {
    std::string script =
        "echo CVD=$CUDA_VISIBLE_DEVICES MEM=$BERTH_GPU_MEMORY_LIMIT SHARE=$BERTH_GPU_SHARE; i=0; "
        "while [ ! -e " +
        release.string() + " ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done";
    std::string error;
    auto id = berthd.Submit(
        JobSpecJson(name, Sh(script), 0, json{{"resources", {{"gpu_share", "12Gi"}}}}), &error);
    ASSERT_NE(id, 0) << error;
    ids.push_back(id);
  }

  // Both hold the sharing GPU at once.
  json shared;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto gpus = Cli(berthd, {"gpus", "-o", "json"});
        if (gpus.exit_code != 0) return false;
        json doc = json::parse(gpus.out);  // outlives the loop over its GPUs
        for (const auto& g : doc.at("gpus")) {
          if (g.at("index") == 1 && g.at("sharing").is_object() &&
              g.at("sharing").at("holders").size() == 2) {
            shared = g;
            return true;
          }
        }
        return false;
      },
      30s))
      << berthd.JobState(ids[0]) << " " << berthd.JobState(ids[1]) << " "
      << Cli(berthd, {"gpus", "-o", "json"}).out;
  std::vector<std::int64_t> holders;
  for (const auto& h : shared.at("sharing").at("holders")) {
    holders.push_back(h.at("id").get<std::int64_t>());
    EXPECT_EQ(h.at("gpu_share_mgpu"), 500) << shared.dump(2);
    EXPECT_EQ(h.at("gpu_memory_bytes"), 12ULL << 30) << shared.dump(2);
  }
  std::sort(holders.begin(), holders.end());
  EXPECT_EQ(holders, ids);
  EXPECT_EQ(shared.at("sharing").at("used_mgpu"), 1000);
  EXPECT_EQ(shared.at("sharing").at("free_memory_bytes"), 0);
  EXPECT_TRUE(shared.at("job").is_null()) << "a slice is not a whole-GPU holder";
  auto table = Cli(berthd, {"gpus"});
  EXPECT_NE(table.out.find("1 used, 0 free"), std::string::npos) << table.out;
  WriteFile(release, "");

  for (auto id : ids) {
    ASSERT_TRUE(berthd.WaitForTerminal(id, 40s)) << berthd.JobState(id);
    EXPECT_EQ(berthd.JobState(id), "Succeeded");
    auto logs = Cli(berthd, {"logs", std::to_string(id)});
    ASSERT_EQ(logs.exit_code, 0) << logs.err;
    EXPECT_EQ(logs.out, "CVD=1 MEM=12884901888 SHARE=0.5\n") << "job " << id;
  }
  auto after = Cli(berthd, {"gpus", "-o", "json"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  json after_doc = json::parse(after.out);
  for (const auto& g : after_doc.at("gpus")) {
    EXPECT_TRUE(g.at("job").is_null()) << g.dump();
    if (g.at("index") == 1) {
      EXPECT_TRUE(g.at("sharing").at("holders").empty()) << g.dump();
    } else {
      EXPECT_TRUE(g.at("sharing").is_null()) << g.dump();
    }
  }
}

}  // namespace
}  // namespace berth::it
