// Device enumeration, identity, memory, utilization, processes and the fixed per-device facts.
//
// Clocks, power, temperature, ECC and samples: nvml_sensors.cpp.
#include <cstdio>
#include <cstring>

#include <cuda.h>

#include <algorithm>

#include "common/log.h"
#include "nvml/device_report.h"
#include "nvml/nvml_library.h"
#include "simcore/gpu_catalog.h"

using vgpu::nvml::copy_string;
using vgpu::nvml::Library;
using vgpu::nvml::LiveDevice;

static_assert(sizeof(nvmlPciInfo_v1_t) == 52);
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(sizeof(nvmlProcessInfo_t) == 24);

namespace {

// Validates the handle (and that NVML is initialized) and the output pointer.
#define VGPU_NVML_DEVICE(device, out)                                               \
  if (nvmlReturn_t r_ = Library::get().check(device); r_ != NVML_SUCCESS) return r_; \
  if ((out) == nullptr) return NVML_ERROR_INVALID_ARGUMENT;                         \
  const nvmlDevice_st& dev = *(device)

int attribute(const nvmlDevice_st& d, CUdevice_attribute a, int fallback) {
  if (d.facts.model == nullptr) return fallback;
  auto it = d.facts.model->attributes.find(a);
  return it == d.facts.model->attributes.end() ? fallback : it->second;
}

unsigned pci_device_id(const nvmlDevice_st& d) {
  return static_cast<unsigned>(attribute(d, CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, 0x000010DE));
}
unsigned pci_subsystem_id(const nvmlDevice_st& d) {
  return static_cast<unsigned>(attribute(d, CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID, 0));
}

void fill_pci(const nvmlDevice_st& d, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  const auto& f = d.facts;
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", f.pci_domain & 0xffff,
                f.pci_bus, f.pci_device);
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", f.pci_domain, f.pci_bus, f.pci_device);
  pci->domain = f.pci_domain;
  pci->bus = f.pci_bus;
  pci->device = f.pci_device;
  pci->pciDeviceId = pci_device_id(d);
  pci->pciSubSystemId = pci_subsystem_id(d);
}

// The running-processes calls of every layout: fills up to *count entries, sets *count to the
// number of processes; NVML_ERROR_INSUFFICIENT_SIZE when they do not all fit.
template <class Info>
nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int* count, Info* infos, bool compute) {
  VGPU_NVML_DEVICE(device, count);
  std::vector<std::pair<unsigned, uint64_t>> procs;
  if (compute) procs = Library::get().live(dev).processes;  // no graphics work on a virtual GPU
  const unsigned room = *count;
  *count = static_cast<unsigned>(procs.size());
  if (procs.size() > room) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (!procs.empty() && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < procs.size(); ++i) {
    Info info{};
    info.pid = procs[i].first;
    info.usedGpuMemory = procs[i].second;
    if constexpr (sizeof(Info) >= sizeof(nvmlProcessInfo_v2_t)) {
      info.gpuInstanceId = 0xFFFFFFFFu;
      info.computeInstanceId = 0xFFFFFFFFu;
    }
    infos[i] = info;
  }
  return NVML_SUCCESS;
}

}  // namespace

namespace {
// The device's report now (nvml/device_report.h): one computation for every NVML answer.
vgpu::inspect::DeviceReport report_of(const nvmlDevice_st& d) {
  return vgpu::inspect::device_report(d.facts, Library::get().live(d).activity);
}
}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  if (nvmlReturn_t r = Library::get().check_initialized(); r != NVML_SUCCESS) return r;
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = Library::get().count();
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  Library& lib = Library::get();
  if (nvmlReturn_t r = lib.check_initialized(); r != NVML_SUCCESS) return r;
  if (device == nullptr || index >= lib.count()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = lib.handle(index);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  Library& lib = Library::get();
  if (nvmlReturn_t r = lib.check_initialized(); r != NVML_SUCCESS) return r;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < lib.devices().size(); ++i)
    if (strcasecmp(lib.devices()[i].facts.uuid.c_str(), uuid) == 0) {
      *device = lib.any(i);
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  Library& lib = Library::get();
  if (nvmlReturn_t r = lib.check_initialized(); r != NVML_SUCCESS) return r;
  if (pciBusId == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned domain, bus, dev;
  if (!vgpu::inspect::parse_pci_bus_id(pciBusId, &domain, &bus, &dev)) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < lib.devices().size(); ++i) {
    const auto& f = lib.devices()[i].facts;
    if (f.pci_domain == domain && f.pci_bus == bus && f.pci_device == dev) {
      *device = lib.any(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* pciBusId, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  VGPU_NVML_DEVICE(device, index);
  *index = Library::get().index_of(dev);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  VGPU_NVML_DEVICE(device, minorNumber);
  *minorNumber = Library::get().index_of(dev);  // /dev/nvidia<index>
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  VGPU_NVML_DEVICE(device, name);
  return copy_string(dev.facts.name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  VGPU_NVML_DEVICE(device, uuid);
  return copy_string(dev.facts.uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  VGPU_NVML_DEVICE(device, pci);
  fill_pci(dev, pci);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return nvmlDeviceGetPciInfo_v3(device, pci);
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_v1_t* pci) {
  VGPU_NVML_DEVICE(device, pci);
  nvmlPciInfo_t full;
  fill_pci(dev, &full);
  std::memset(pci, 0, sizeof *pci);
  std::memcpy(pci->busId, full.busIdLegacy, sizeof pci->busId);
  pci->domain = full.domain;
  pci->bus = full.bus;
  pci->device = full.device;
  pci->pciDeviceId = full.pciDeviceId;
  pci->pciSubSystemId = full.pciSubSystemId;
  return NVML_SUCCESS;
}

// NVML's memory, not CUDA's: total is the board's framebuffer (81559 MiB on an H100 80GB HBM3,
// where cuDeviceTotalMem says 81079 MiB), reserved what the driver and firmware keep, used what
// the job's processes hold (contexts included, as the driver charges them). The v1 query counts
// the reserved memory as used, as NVML documents.
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  VGPU_NVML_DEVICE(device, memory);
  const vgpu::inspect::DeviceReport r = report_of(dev);
  memory->total = r.memory_total;
  memory->used = r.memory_used + r.memory_reserved;
  memory->free = r.memory_free;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  VGPU_NVML_DEVICE(device, memory);
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const vgpu::inspect::DeviceReport r = report_of(dev);
  memory->total = r.memory_total;
  memory->reserved = r.memory_reserved;
  memory->used = r.memory_used;
  memory->free = r.memory_free;
  return NVML_SUCCESS;
}

// Over the status region's window of virtual time: kernels (gpu), copies and memsets (memory).
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  VGPU_NVML_DEVICE(device, utilization);
  const LiveDevice live = Library::get().live(dev);
  utilization->gpu = static_cast<unsigned>(live.activity.util_gpu * 100.0 + 0.5);
  utilization->memory = static_cast<unsigned>(live.activity.util_memory * 100.0 + 0.5);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  return running_processes(device, infoCount, infos, true);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_v2_t* infos) {
  return running_processes(device, infoCount, infos, true);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                  nvmlProcessInfo_v1_t* infos) {
  return running_processes(device, infoCount, infos, true);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                      nvmlProcessInfo_t* infos) {
  return running_processes(device, infoCount, infos, false);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int* infoCount,
                                                      nvmlProcessInfo_v2_t* infos) {
  return running_processes(device, infoCount, infos, false);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                   nvmlProcessInfo_v1_t* infos) {
  return running_processes(device, infoCount, infos, false);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  VGPU_NVML_DEVICE(device, major);
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (dev.facts.model == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *major = dev.facts.model->cc_major;
  *minor = dev.facts.model->cc_minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  VGPU_NVML_DEVICE(device, type);
  (void)dev;
  *type = NVML_BRAND_NVIDIA;  // what data-center parts report since Hopper
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  VGPU_NVML_DEVICE(device, arch);
  const int major = dev.facts.model ? dev.facts.model->cc_major : 0;
  *arch = major == 8 ? NVML_DEVICE_ARCH_AMPERE
        : major == 9 ? NVML_DEVICE_ARCH_HOPPER
        : major == 10 ? NVML_DEVICE_ARCH_BLACKWELL
                      : NVML_DEVICE_ARCH_UNKNOWN;
  return NVML_SUCCESS;
}

// CUDA cores: SMs x FP32 lanes per SM (64 on GA100, 128 on Hopper and Blackwell).
nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int* numCores) {
  VGPU_NVML_DEVICE(device, numCores);
  if (dev.facts.model == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const int per_sm = dev.facts.model->cc_major == 8 ? 64 : 128;
  *numCores = static_cast<unsigned>(dev.facts.model->sm_count * per_sm);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int* multiGpuBool) {
  VGPU_NVML_DEVICE(device, multiGpuBool);
  (void)dev;
  *multiGpuBool = 0;  // one GPU per board (SXM)
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int* boardId) {
  VGPU_NVML_DEVICE(device, boardId);
  *boardId = (dev.facts.pci_domain << 16) | (dev.facts.pci_bus << 8);  // unique per device
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  VGPU_NVML_DEVICE(device, mode);
  (void)dev;
  *mode = NVML_FEATURE_ENABLED;  // a virtual device is always "initialized"
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  VGPU_NVML_DEVICE(device, mode);
  (void)dev;
  *mode = NVML_COMPUTEMODE_DEFAULT;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode) {
  VGPU_NVML_DEVICE(device, currentMode);
  (void)dev;
  if (pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *currentMode = *pendingMode = NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* currLinkGen) {
  VGPU_NVML_DEVICE(device, currLinkGen);
  if (dev.facts.model == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *currLinkGen = static_cast<unsigned>(dev.facts.model->pcie_gen);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* maxLinkGen) {
  return nvmlDeviceGetCurrPcieLinkGeneration(device, maxLinkGen);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* currLinkWidth) {
  VGPU_NVML_DEVICE(device, currLinkWidth);
  if (dev.facts.model == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *currLinkWidth = static_cast<unsigned>(dev.facts.model->pcie_width);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* maxLinkWidth) {
  return nvmlDeviceGetCurrPcieLinkWidth(device, maxLinkWidth);
}

}  // extern "C"
