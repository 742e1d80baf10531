// GPUs from the NVIDIA driver. NVML is loaded with dlopen at run time, so one
// agent binary runs on GPU hosts and on hosts without the driver alike: there
// it simply finds no GPUs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "agent/gpu_provider.h"

namespace berth::agent {

class NvmlProvider final : public GpuProvider {
 public:
  // Loads `library` and calls nvmlInit_v2. Never fails: without the driver the
  // provider is still usable and discovers nothing (see available()).
  explicit NvmlProvider(std::string library = "libnvidia-ml.so.1");
  ~NvmlProvider() override;
  NvmlProvider(const NvmlProvider&) = delete;
  NvmlProvider& operator=(const NvmlProvider&) = delete;

  std::string Name() const override { return "nvml"; }
  // No driver: an empty Discovery, not an error. The driver present but the
  // device count unreadable: kUnavailable. A GPU whose queries fail is
  // reported unhealthy with the failing call in health_detail.
  Result<Discovery> Discover() override;
  // Per GPU: nvmlDeviceGetUtilizationRates (gpu, memory),
  // nvmlDeviceGetMemoryInfo (used, total), nvmlDeviceGetTemperature (GPU
  // sensor), nvmlDeviceGetPowerUsage (mW) and nvmlDeviceGetTotalEccErrors
  // (volatile corrected / uncorrected). A query that is not supported, or
  // missing from an older driver, reads 0. last_xid is the last "Xid NN" the
  // health polling (Discover) saw. No driver: no samples.
  Result<std::vector<model::GpuSample>> Sample(std::span<const GpuOccupant> occupants,
                                               TimeMs now) override;

  bool available() const { return api_ != nullptr; }
  // Why NVML is not available ("libnvidia-ml.so.1: cannot open shared object
  // file"); empty when it is.
  const std::string& unavailable_reason() const { return why_; }

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  std::string why_;
  std::map<std::uint32_t, std::uint32_t> last_xid_;  // GPU index -> last Xid seen
};

// True when the NVIDIA management library loads and initialises on this host.
bool NvmlAvailable();

}  // namespace berth::agent
