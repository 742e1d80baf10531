// A stand-in for libnvidia-ml.so.1, loaded by NvmlProvider through dlopen in
// the tests: four "H100"s where 0-1 share two direct NVLinks, 2 and 3 reach
// each other through an NVSwitch, and GPU 3's UUID query fails.
//
// Telemetry readings start at 0 and are set by the tests through
// fake_nvml_set(index, field, value) (found with dlsym on the same library):
// fields "util", "mem_util", "used" (bytes), "temp", "power" (mW), "sbe",
// "dbe". The value kFakeNvmlNotSupported makes that query return
// NVML_ERROR_NOT_SUPPORTED.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "agent/nvml_types.h"

// NVML's opaque handle type, given a body here (global: the header names it).
struct nvmlDevice_st {
  unsigned index;
};

namespace {

constexpr unsigned kCount = 4;
nvmlDevice_st g_devices[kCount] = {{0}, {1}, {2}, {3}};
constexpr unsigned long long kNotSupported = ~0ULL;

struct Readings {
  unsigned long long util = 0, mem_util = 0, used = 0, temp = 0, power = 0, sbe = 0, dbe = 0;
};
Readings g_readings[kCount];

// The value of one reading, or NOT_SUPPORTED.
template <typename T>
nvmlReturn_t Read(unsigned long long value, T* out) {
  if (value == kNotSupported) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<T>(value);
  return NVML_SUCCESS;
}

void BusId(unsigned index, char* out) {
  std::snprintf(out, 32, "00000000:%02X:00.0", 0x18 + index);
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlShutdown() {
  return NVML_SUCCESS;
}
const char* nvmlErrorString(nvmlReturn_t rc) {
  return rc == 999 ? "Unknown Error" : "error";
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = kCount;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* dev) {
  if (index >= kCount) return 2;
  *dev = &g_devices[index];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned int len) {
  std::snprintf(name, len, "NVIDIA H100 80GB HBM3");
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char* uuid, unsigned int len) {
  if (dev->index == 3) return 999;
  std::snprintf(uuid, len, "GPU-fake-%u", dev->index);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t* mem) {
  mem->total = 81559ULL << 20;
  mem->used = g_readings[dev->index].used == kNotSupported ? 0 : g_readings[dev->index].used;
  mem->free = mem->total - mem->used;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t* util) {
  const Readings& r = g_readings[dev->index];
  if (r.util == kNotSupported) return NVML_ERROR_NOT_SUPPORTED;
  util->gpu = static_cast<unsigned>(r.util);
  util->memory = static_cast<unsigned>(r.mem_util);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, nvmlTemperatureSensors_t sensor,
                                      unsigned int* temp) {
  if (sensor != NVML_TEMPERATURE_GPU) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  return Read(g_readings[dev->index].temp, temp);
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int* mw) {
  return Read(g_readings[dev->index].power, mw);
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, nvmlMemoryErrorType_t type,
                                         nvmlEccCounterType_t counter, unsigned long long* count) {
  if (counter != NVML_VOLATILE_ECC) return 2;
  const Readings& r = g_readings[dev->index];
  return Read(type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? r.sbe : r.dbe, count);
}

// The tests' handle on the readings above.
void fake_nvml_set(unsigned index, const char* field, unsigned long long value) {
  if (index >= kCount) return;
  Readings& r = g_readings[index];
  std::string_view f(field);
  unsigned long long* target = f == "util"       ? &r.util
                               : f == "mem_util" ? &r.mem_util
                               : f == "used"     ? &r.used
                               : f == "temp"     ? &r.temp
                               : f == "power"    ? &r.power
                               : f == "sbe"      ? &r.sbe
                               : f == "dbe"      ? &r.dbe
                                                 : nullptr;
  if (target != nullptr) *target = value;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  pci->bus = 0x18 + dev->index;
  BusId(dev->index, pci->busId);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetDriverVersion(char* out, unsigned int len) {
  std::snprintf(out, len, "550.54.15");
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = 12040;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, unsigned int* node) {
  *node = dev->index / 2;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link,
                                      nvmlEnableState_t* active) {
  if (link >= 4) return NVML_ERROR_NOT_SUPPORTED;
  // GPUs 0 and 1: links 0-1 up. GPUs 2 and 3: links 0-3 up (to the switch).
  *active = (dev->index < 2 ? link < 2 : true) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned int,
                                                 nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  if (dev->index < 2) {
    BusId(1 - dev->index, pci->busId);
  } else {
    std::snprintf(pci->busId, sizeof pci->busId, "00000000:aa:00.0");  // an NVSwitch
  }
  return NVML_SUCCESS;
}

}  // extern "C"
