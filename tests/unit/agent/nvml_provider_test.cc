#include "agent/nvml_provider.h"

#include <dlfcn.h>
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

// The fake library's setter, from the copy the provider loaded (dlopen of
// the same path returns the same library).
class FakeNvml {
 public:
  FakeNvml() : lib_(::dlopen(FAKE_NVML_PATH, RTLD_NOW)) {
    if (lib_ != nullptr) {
      set_ = reinterpret_cast<void (*)(unsigned, const char*, unsigned long long)>(
          ::dlsym(lib_, "fake_nvml_set"));
    }
  }
  ~FakeNvml() {
    if (lib_ != nullptr) ::dlclose(lib_);
  }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;
  bool ok() const { return set_ != nullptr; }
  void Set(unsigned gpu, const char* field, unsigned long long value) { set_(gpu, field, value); }

 private:
  void* lib_ = nullptr;
  void (*set_)(unsigned, const char*, unsigned long long) = nullptr;
};

constexpr unsigned long long kNotSupported = ~0ULL;

TEST(NvmlProvider, SamplesEveryTelemetryFieldFromTheLibrary) {
  NvmlProvider provider(FAKE_NVML_PATH);
  ASSERT_TRUE(provider.available()) << provider.unavailable_reason();
  FakeNvml fake;
  ASSERT_TRUE(fake.ok());
  fake.Set(0, "util", 87);
  fake.Set(0, "mem_util", 41);
  fake.Set(0, "used", 30ULL << 30);
  fake.Set(0, "temp", 66);
  fake.Set(0, "power", 612'345);
  fake.Set(0, "sbe", 12);
  fake.Set(0, "dbe", 1);
  // GPU 1's board supports neither power nor ECC nor utilization queries.
  fake.Set(1, "util", kNotSupported);
  fake.Set(1, "power", kNotSupported);
  fake.Set(1, "sbe", kNotSupported);
  fake.Set(1, "dbe", kNotSupported);
  fake.Set(1, "temp", 35);

  std::vector<GpuOccupant> occupants{{0, "7.0.1", 1'000, {}, 0, 0},
                                     {1, "8.0.1", 1'000, {}, 250, 0},
                                     {1, "9.0.1", 1'000, {}, 500, 0}};
  auto samples = provider.Sample(occupants, 123'456);
  ASSERT_TRUE(samples.has_value()) << samples.error().message;
  ASSERT_EQ(samples->size(), 4u);
  const auto& a = (*samples)[0];
  EXPECT_EQ(a.at_ms, 123'456);
  EXPECT_EQ(a.gpu, 0u);
  EXPECT_EQ(a.uuid, "GPU-fake-0");
  EXPECT_EQ(a.util_pct, 87u);
  EXPECT_EQ(a.mem_util_pct, 41u);
  EXPECT_EQ(a.memory_used_bytes, 30ULL << 30);
  EXPECT_EQ(a.memory_total_bytes, 81559ULL << 20);
  EXPECT_EQ(a.temperature_c, 66);
  EXPECT_EQ(a.power_mw, 612'345u);
  EXPECT_EQ(a.ecc_sbe_total, 12u);
  EXPECT_EQ(a.ecc_dbe_total, 1u);
  EXPECT_EQ(a.last_xid, 0u);
  EXPECT_EQ(a.run_ids, std::vector<std::string>{"7.0.1"});
  EXPECT_TRUE(a.node.empty());  // berthd's to fill in
  const auto& b = (*samples)[1];
  EXPECT_EQ(b.util_pct, 0u);
  EXPECT_EQ(b.power_mw, 0u);
  EXPECT_EQ(b.ecc_sbe_total, 0u);
  EXPECT_EQ(b.temperature_c, 35);
  EXPECT_EQ(b.run_ids, (std::vector<std::string>{"8.0.1", "9.0.1"}));
  EXPECT_TRUE((*samples)[2].run_ids.empty());
  // GPU 3's UUID query fails; its readings still come.
  EXPECT_EQ((*samples)[3].gpu, 3u);
  EXPECT_TRUE((*samples)[3].uuid.empty());
  for (unsigned i = 0; i < 2; ++i) {
    for (const char* f : {"util", "mem_util", "used", "temp", "power", "sbe", "dbe"}) {
      fake.Set(i, f, 0);
    }
  }
}

TEST(NvmlProvider, WithoutTheDriverSamplesNothing) {
  NvmlProvider provider("libberth-no-such-nvml.so.1");
  auto samples = provider.Sample({}, 1);
  ASSERT_TRUE(samples.has_value());
  EXPECT_TRUE(samples->empty());
}

}  // namespace
}  // namespace berth::agent
