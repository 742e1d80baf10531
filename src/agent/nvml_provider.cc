#include "agent/nvml_provider.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>

#include "agent/gpu_model.h"
#include "agent/nvml_types.h"
#include "agent/sim_provider.h"

namespace berth::agent {

// Entry points resolved from the library. Required ones must all resolve for
// NVML to count as available; optional ones are null when the driver is older.
struct NvmlProvider::Api {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*get_pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*cuda_version)(int*) = nullptr;
  // Optional.
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*numa_node)(nvmlDevice_t, unsigned int*) = nullptr;
  // Telemetry (optional: a missing one reads 0).
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*ecc_total)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                            unsigned long long*) = nullptr;

  std::string Error(const char* call, nvmlReturn_t rc) const {
    std::string text = error_string ? error_string(rc) : "error " + std::to_string(rc);
    return std::string(call) + ": " + text;
  }
};

namespace {

template <typename Fn>
void Bind(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
}

// NVML spells bus ids with an 8-digit domain and upper-case hex; compare them
// in one canonical form.
std::string CanonicalBusId(const char* bus_id) {
  std::string s(bus_id);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// sysfs knows the NUMA node of every PCI device; used when NVML does not say.
std::int32_t NumaFromSysfs(const nvmlPciInfo_t& pci) {
  char path[96];
  std::snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.0/numa_node", pci.domain,
                pci.bus, pci.device);
  std::ifstream in(path);
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

void MarkUnhealthy(model::Gpu& gpu, std::string detail) {
  if (gpu.health == model::Health::kUnhealthy) return;  // keep the first cause
  gpu.health = model::Health::kUnhealthy;
  gpu.health_detail = std::move(detail);
}

}  // namespace

NvmlProvider::NvmlProvider(std::string library) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    why_ = err ? err : library + ": cannot load";
    return;
  }
  auto api = std::make_unique<Api>();
  api->lib = lib;
  Bind(lib, "nvmlInit_v2", api->init);
  Bind(lib, "nvmlShutdown", api->shutdown);
  Bind(lib, "nvmlDeviceGetCount_v2", api->get_count);
  Bind(lib, "nvmlDeviceGetHandleByIndex_v2", api->get_handle);
  Bind(lib, "nvmlDeviceGetName", api->get_name);
  Bind(lib, "nvmlDeviceGetUUID", api->get_uuid);
  Bind(lib, "nvmlDeviceGetMemoryInfo", api->get_memory);
  Bind(lib, "nvmlDeviceGetPciInfo_v3", api->get_pci);
  Bind(lib, "nvmlSystemGetDriverVersion", api->driver_version);
  Bind(lib, "nvmlSystemGetCudaDriverVersion_v2", api->cuda_version);
  if (!api->cuda_version) Bind(lib, "nvmlSystemGetCudaDriverVersion", api->cuda_version);
  Bind(lib, "nvmlErrorString", api->error_string);
  Bind(lib, "nvmlDeviceGetNvLinkState", api->nvlink_state);
  Bind(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api->nvlink_remote_pci);
  Bind(lib, "nvmlDeviceGetNumaNodeId", api->numa_node);
  Bind(lib, "nvmlDeviceGetUtilizationRates", api->utilization);
  Bind(lib, "nvmlDeviceGetTemperature", api->temperature);
  Bind(lib, "nvmlDeviceGetPowerUsage", api->power);
  Bind(lib, "nvmlDeviceGetTotalEccErrors", api->ecc_total);
  if (!api->init || !api->shutdown || !api->get_count || !api->get_handle || !api->get_name ||
      !api->get_uuid || !api->get_memory || !api->get_pci || !api->driver_version ||
      !api->cuda_version) {
    why_ = library + ": a required NVML entry point is missing (driver too old?)";
    ::dlclose(lib);
    return;
  }
  if (nvmlReturn_t rc = api->init(); rc != NVML_SUCCESS) {
    why_ = api->Error("nvmlInit_v2", rc);
    ::dlclose(lib);
    return;
  }
  api_ = std::move(api);
}

NvmlProvider::~NvmlProvider() {
  if (!api_) return;
  api_->shutdown();
  ::dlclose(api_->lib);
}

Result<Discovery> NvmlProvider::Discover() {
  Discovery out;
  if (!api_) return out;
  const Api& nv = *api_;

  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (nv.driver_version(text, sizeof text) == NVML_SUCCESS) out.driver_version = text;
  int cuda = 0;
  if (nv.cuda_version(&cuda) == NVML_SUCCESS && cuda > 0) {
    out.cuda_version = std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
  }
  unsigned int count = 0;
  if (nvmlReturn_t rc = nv.get_count(&count); rc != NVML_SUCCESS) {
    return Fail(Code::kUnavailable, nv.Error("nvmlDeviceGetCount_v2", rc));
  }

  std::vector<nvmlDevice_t> handles(count, nullptr);
  std::map<std::string, std::uint32_t> index_by_bus;
  for (unsigned int i = 0; i < count; ++i) {
    model::Gpu gpu;
    gpu.index = i;
    if (nvmlReturn_t rc = nv.get_handle(i, &handles[i]); rc != NVML_SUCCESS) {
      handles[i] = nullptr;
      gpu.model = "unknown";
      MarkUnhealthy(gpu, nv.Error("nvmlDeviceGetHandleByIndex_v2", rc));
      out.gpus.push_back(std::move(gpu));
      continue;
    }
    nvmlDevice_t dev = handles[i];
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t rc = nv.get_name(dev, name, sizeof name); rc != NVML_SUCCESS) {
      MarkUnhealthy(gpu, nv.Error("nvmlDeviceGetName", rc));
    }
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t rc = nv.get_uuid(dev, uuid, sizeof uuid); rc != NVML_SUCCESS) {
      MarkUnhealthy(gpu, nv.Error("nvmlDeviceGetUUID", rc));
    }
    gpu.uuid = uuid;
    nvmlMemory_t mem{};
    if (nvmlReturn_t rc = nv.get_memory(dev, &mem); rc != NVML_SUCCESS) {
      MarkUnhealthy(gpu, nv.Error("nvmlDeviceGetMemoryInfo", rc));
    }
    gpu.memory_bytes = mem.total;
    gpu.model = NormaliseGpuModel(name, mem.total);
    nvmlPciInfo_t pci{};
    if (nvmlReturn_t rc = nv.get_pci(dev, &pci); rc != NVML_SUCCESS) {
      MarkUnhealthy(gpu, nv.Error("nvmlDeviceGetPciInfo_v3", rc));
    } else {
      gpu.pci_bus_id = pci.busId;
      index_by_bus[CanonicalBusId(pci.busId)] = i;
      unsigned int numa = 0;
      if (nv.numa_node && nv.numa_node(dev, &numa) == NVML_SUCCESS) {
        gpu.numa_node = static_cast<std::int32_t>(numa);
      } else {
        gpu.numa_node = NumaFromSysfs(pci);
      }
    }
    out.gpus.push_back(std::move(gpu));
  }

  // NVLink, best effort: a link whose far end is one of our GPUs is a direct
  // peer; any other far end is an NVSwitch, and all GPUs on the switch fabric
  // reach each other.
  if (nv.nvlink_state && nv.nvlink_remote_pci) {
    std::vector<std::uint32_t> switch_links(count, 0);
    for (unsigned int i = 0; i < count; ++i) {
      if (!handles[i]) continue;
      std::map<std::uint32_t, std::uint32_t> links_to;
      for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
        nvmlEnableState_t state = NVML_FEATURE_DISABLED;
        if (nv.nvlink_state(handles[i], link, &state) != NVML_SUCCESS) continue;
        if (state != NVML_FEATURE_ENABLED) continue;
        nvmlPciInfo_t remote{};
        if (nv.nvlink_remote_pci(handles[i], link, &remote) != NVML_SUCCESS) continue;
        auto it = index_by_bus.find(CanonicalBusId(remote.busId));
        if (it == index_by_bus.end()) {
          ++switch_links[i];
        } else if (it->second != i) {
          ++links_to[it->second];
        }
      }
      for (auto [peer, links] : links_to) out.gpus[i].nvlink_peers.push_back({peer, links});
    }
    for (unsigned int i = 0; i < count; ++i) {
      if (switch_links[i] == 0) continue;
      for (unsigned int j = 0; j < count; ++j) {
        if (j == i || switch_links[j] == 0) continue;
        auto& peers = out.gpus[i].nvlink_peers;
        bool direct = std::any_of(peers.begin(), peers.end(),
                                  [j](const model::NvlinkPeer& p) { return p.index == j; });
        if (!direct) peers.push_back({j, std::min(switch_links[i], switch_links[j])});
      }
    }
  }
  AssignNvlinkIslands(out.gpus);
  for (const auto& g : out.gpus) {
    if (auto xid = XidOf(g.health_detail); xid != 0) last_xid_[g.index] = xid;
  }
  return out;
}

Result<std::vector<model::GpuSample>> NvmlProvider::Sample(std::span<const GpuOccupant> occupants,
                                                           TimeMs now) {
  std::vector<model::GpuSample> out;
  if (!api_) return out;
  const Api& nv = *api_;
  unsigned int count = 0;
  if (nvmlReturn_t rc = nv.get_count(&count); rc != NVML_SUCCESS) {
    return Fail(Code::kUnavailable, nv.Error("nvmlDeviceGetCount_v2", rc));
  }
  out.reserve(count);
  for (unsigned int i = 0; i < count; ++i) {
    model::GpuSample s;
    s.at_ms = now;
    s.gpu = i;
    for (const auto& o : occupants) {
      if (o.gpu == i) s.run_ids.push_back(o.run_id);
    }
    if (auto it = last_xid_.find(i); it != last_xid_.end()) s.last_xid = it->second;
    nvmlDevice_t dev = nullptr;
    if (nv.get_handle(i, &dev) != NVML_SUCCESS) {
      out.push_back(std::move(s));  // a lost GPU: its health polling says why
      continue;
    }
    // Each query on its own: one that fails (not supported on this board,
    // or an error) leaves its fields at 0 and the others still count.
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nv.get_uuid(dev, uuid, sizeof uuid) == NVML_SUCCESS) s.uuid = uuid;
    nvmlUtilization_t util{};
    if (nv.utilization && nv.utilization(dev, &util) == NVML_SUCCESS) {
      s.util_pct = std::min(util.gpu, 100U);
      s.mem_util_pct = std::min(util.memory, 100U);
    }
    nvmlMemory_t mem{};
    if (nv.get_memory(dev, &mem) == NVML_SUCCESS) {
      s.memory_used_bytes = mem.used;
      s.memory_total_bytes = mem.total;
    }
    unsigned int temp = 0;
    if (nv.temperature && nv.temperature(dev, NVML_TEMPERATURE_GPU, &temp) == NVML_SUCCESS) {
      s.temperature_c = static_cast<std::int32_t>(temp);
    }
    unsigned int mw = 0;
    if (nv.power && nv.power(dev, &mw) == NVML_SUCCESS) s.power_mw = mw;
    unsigned long long errors = 0;
    if (nv.ecc_total && nv.ecc_total(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
                                     &errors) == NVML_SUCCESS) {
      s.ecc_sbe_total = errors;
    }
    errors = 0;
    if (nv.ecc_total && nv.ecc_total(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                     &errors) == NVML_SUCCESS) {
      s.ecc_dbe_total = errors;
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool NvmlAvailable() {
  return NvmlProvider().available();
}

}  // namespace berth::agent
