// The slice of NVML's C ABI that berth uses, declared here because no NVIDIA
// headers exist on build machines: the agent loads libnvidia-ml.so.1 with
// dlopen at run time. Layouts and values follow nvml.h (R525 and later); the
// fake library in the tests implements the same declarations.
#pragma once

extern "C" {

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlReturn_t;  // a C enum: int-sized
typedef int nvmlEnableState_t;
typedef int nvmlTemperatureSensors_t;
typedef int nvmlMemoryErrorType_t;
typedef int nvmlEccCounterType_t;

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1,
  NVML_NVLINK_MAX_LINKS = 18,
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  NVML_TEMPERATURE_GPU = 0,
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
  NVML_VOLATILE_ECC = 0,
};

// Percent of the last sample period the SMs (gpu) and the memory controller
// (memory) were busy.
typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "00000000:18:00.0"
} nvmlPciInfo_t;

}  // extern "C"
