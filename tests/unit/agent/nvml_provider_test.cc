#include "agent/nvml_provider.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace berth::agent {
namespace {

TEST(NvmlProvider, WithoutTheDriverDiscoversNothingWithoutError) {
  if (std::filesystem::exists("/dev/nvidiactl")) GTEST_SKIP() << "this host has an NVIDIA driver";
  NvmlProvider provider;
  EXPECT_EQ(provider.Name(), "nvml");
  EXPECT_FALSE(provider.available());
  EXPECT_FALSE(provider.unavailable_reason().empty());
  auto found = provider.Discover();
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->gpus.empty());
  EXPECT_TRUE(found->driver_version.empty());
  EXPECT_FALSE(NvmlAvailable());
}

TEST(NvmlProvider, MissingLibraryIsUnavailable) {
  NvmlProvider provider("libberth-no-such-nvml.so.1");
  EXPECT_FALSE(provider.available());
  EXPECT_NE(provider.unavailable_reason().find("libberth-no-such-nvml"), std::string::npos);
  EXPECT_TRUE(provider.Discover()->gpus.empty());
}

TEST(NvmlProvider, ReadsGpusTopologyAndHealthFromTheLibrary) {
  NvmlProvider provider(FAKE_NVML_PATH);
  ASSERT_TRUE(provider.available()) << provider.unavailable_reason();
  auto found = provider.Discover();
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(found->driver_version, "550.54.15");
  EXPECT_EQ(found->cuda_version, "12.4");
  ASSERT_EQ(found->gpus.size(), 4u);
  const auto& g = found->gpus;
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(g[i].index, i);
    EXPECT_EQ(g[i].model, "H100-80GB");
    EXPECT_EQ(g[i].numa_node, static_cast<std::int32_t>(i / 2));
  }
  EXPECT_EQ(g[0].uuid, "GPU-fake-0");
  EXPECT_EQ(g[0].pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(g[0].health, model::Health::kHealthy);
  // Direct links: 0 <-> 1 with two links each way.
  ASSERT_EQ(g[0].nvlink_peers.size(), 1u);
  EXPECT_EQ(g[0].nvlink_peers[0].index, 1u);
  EXPECT_EQ(g[0].nvlink_peers[0].links, 2u);
  // Through the switch: 2 <-> 3, each with four switch links.
  ASSERT_EQ(g[2].nvlink_peers.size(), 1u);
  EXPECT_EQ(g[2].nvlink_peers[0].index, 3u);
  EXPECT_EQ(g[2].nvlink_peers[0].links, 4u);
  EXPECT_EQ(g[0].nvlink_island, g[1].nvlink_island);
  EXPECT_EQ(g[2].nvlink_island, g[3].nvlink_island);
  EXPECT_NE(g[0].nvlink_island, g[2].nvlink_island);
  // A failed query makes the GPU unhealthy and says which call failed.
  EXPECT_EQ(g[3].health, model::Health::kUnhealthy);
  EXPECT_EQ(g[3].health_detail, "nvmlDeviceGetUUID: Unknown Error");
}

}  // namespace
}  // namespace berth::agent
