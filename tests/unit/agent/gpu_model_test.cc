#include "agent/gpu_model.h"

#include <gtest/gtest.h>

namespace berth::agent {
namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;

TEST(NormaliseGpuModel, DropsBrandAndRoundsToMarketedMemory) {
  // Memory sizes are what NVML reports, a little under the label.
  EXPECT_EQ(NormaliseGpuModel("NVIDIA H100 80GB HBM3", 81559 * kMiB), "H100-80GB");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA A100-SXM4-40GB", 40960 * kMiB), "A100-40GB");
  EXPECT_EQ(NormaliseGpuModel("Tesla V100-SXM2-32GB", 32510 * kMiB), "V100-32GB");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA H200", 143771 * kMiB), "H200-141GB");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA L40S", 46068 * kMiB), "L40S-48GB");
  EXPECT_EQ(NormaliseGpuModel("Tesla T4", 15360 * kMiB), "T4-16GB");
}

TEST(NormaliseGpuModel, KeepsSeriesWordWithItsNumber) {
  EXPECT_EQ(NormaliseGpuModel("NVIDIA GeForce RTX 4090", 24564 * kMiB), "RTX4090-24GB");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA RTX A6000", 49140 * kMiB), "RTXA6000-48GB");
}

TEST(NormaliseGpuModel, WithoutMemoryOrNameStillAnswers) {
  EXPECT_EQ(NormaliseGpuModel("NVIDIA H100 PCIe", 0), "H100");
  EXPECT_EQ(NormaliseGpuModel("", 0), "unknown");
  EXPECT_EQ(NormaliseGpuModel("NVIDIA", 80ULL << 30), "unknown-80GB");
}

TEST(AssignNvlinkIslands, ConnectedComponentsNumberedInGpuOrder) {
  std::vector<model::Gpu> gpus(5);
  for (std::uint32_t i = 0; i < 5; ++i) gpus[i].index = i;
  // 0-1 and 1-3 linked (transitively one island); 2 and 4 alone. Peers may be
  // listed on one side only.
  gpus[0].nvlink_peers = {{1, 2}};
  gpus[3].nvlink_peers = {{1, 2}};
  gpus[4].nvlink_peers = {{9, 1}};  // unknown index: ignored
  AssignNvlinkIslands(gpus);
  EXPECT_EQ(gpus[0].nvlink_island, 0u);
  EXPECT_EQ(gpus[1].nvlink_island, 0u);
  EXPECT_EQ(gpus[3].nvlink_island, 0u);
  EXPECT_EQ(gpus[2].nvlink_island, 1u);
  EXPECT_EQ(gpus[4].nvlink_island, 2u);
}

}  // namespace
}  // namespace berth::agent
