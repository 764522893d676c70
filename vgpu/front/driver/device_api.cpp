// Initialization and device queries: cuInit, versions, device enumeration, identity,
// attributes, peer queries. All answers come from the virtual devices (front/device/device.h), which
// come from the cluster configuration, so every query agrees with every other one.
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "front/device/device_registry.h"
#include "front/driver/entry_points.h"
#include "front/driver/query_lines.h"

using vgpu::DeviceRegistry;

// VGPU_NEUTRAL_CALL_SCOPE() of sim/core/virtual_clock.h, for a file that is built into both
// backends: the sim backend defines these two (CPU time spent inside the driver is not charged to
// the calling thread's virtual clock, and a device query neither asks about work nor does any, so
// it does not end a polling: timing/thread_clock.h); the passthrough library keeps no virtual
// clocks and does not, so the weak references are null there and the scope does nothing.
namespace vgpu::vclock {
[[gnu::weak, gnu::visibility("hidden")]] void enter_neutral_call();
[[gnu::weak, gnu::visibility("hidden")]] void leave_call();
}  // namespace vgpu::vclock

namespace {

class CallScope {
 public:
  CallScope() {
    if (vgpu::vclock::enter_neutral_call != nullptr) vgpu::vclock::enter_neutral_call();
  }
  ~CallScope() {
    if (vgpu::vclock::leave_call != nullptr) vgpu::vclock::leave_call();
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
};
#define VGPU_CALL_SCOPE() const CallScope vgpu_call_scope_

// The device behind `dev`, or the error the real driver gives.
CUresult lookup(CUdevice dev, vgpu::Device** out) {
  const DeviceRegistry* d = vgpu::device_registry();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  vgpu::Device* device = d->device(dev);
  if (device == nullptr) {
    vgpu::log::warn("invalid device ordinal {} (have {})", dev, d->device_count());
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *out = device;
  return CUDA_SUCCESS;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuInit(unsigned int flags) { VGPU_CALL_SCOPE(); return vgpu::backend_initialize(flags); }

VGPU_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* version) {
  VGPU_CALL_SCOPE();
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = vgpu::backend_driver_version();
  if (vgpu::query_trace::enabled()) vgpu::query_trace::line("cuDriverGetVersion", {}, CUDA_SUCCESS, fmt::format("{}", *version));
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* count) {
  VGPU_CALL_SCOPE();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const DeviceRegistry* d = vgpu::device_registry();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  *count = d->device_count();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  VGPU_CALL_SCOPE();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* dev;
  if (CUresult r = lookup(ordinal, &dev); r != CUDA_SUCCESS) return r;
  *device = ordinal;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* device;
  if (CUresult r = lookup(dev, &device); r != CUDA_SUCCESS) return r;
  std::snprintf(name, static_cast<size_t>(len), "%s", device->name().c_str());
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* device;
  if (CUresult r = lookup(dev, &device); r != CUDA_SUCCESS) return r;
  *uuid = device->uuid();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  VGPU_CALL_SCOPE();
  return cuDeviceGetUuid_v2(uuid, dev);
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* device;
  if (CUresult r = lookup(dev, &device); r != CUDA_SUCCESS) return r;
  *bytes = device->capacity();
  if (vgpu::query_trace::enabled())
    vgpu::query_trace::line("cuDeviceTotalMem", fmt::format("dev={}", dev), CUDA_SUCCESS, fmt::format("{}", *bytes));
  return CUDA_SUCCESS;
}

// The 32-bit ABI of CUDA 2.x: the size is clamped as the real driver does.
VGPU_EXPORT CUresult CUDAAPI cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t full = 0;
  if (CUresult r = cuDeviceTotalMem_v2(&full, dev); r != CUDA_SUCCESS) return r;
  *bytes = full > 0xffffffffull ? 0xffffffffu : static_cast<unsigned int>(full);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* device;
  CUresult r = lookup(dev, &device);
  if (r == CUDA_SUCCESS) r = device->attribute(attrib, value);
  if (vgpu::query_trace::enabled()) vgpu::query_trace::device_attribute(dev, attrib, r, value);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* device;
  if (CUresult r = lookup(dev, &device); r != CUDA_SUCCESS) return r;
  *major = device->model().cc_major;
  *minor = device->model().cc_minor;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* device;
  if (CUresult r = lookup(dev, &device); r != CUDA_SUCCESS) return r;
  auto attr = [&](CUdevice_attribute a) { int v = 0; device->attribute(a, &v); return v; };
  *prop = CUdevprop{};
  prop->maxThreadsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  prop->maxThreadsDim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  prop->maxThreadsDim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  prop->maxThreadsDim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  prop->maxGridSize[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  prop->maxGridSize[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  prop->maxGridSize[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  prop->sharedMemPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  prop->totalConstantMemory = attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
  prop->SIMDWidth = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  prop->memPitch = attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH);
  prop->regsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  prop->clockRate = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  prop->textureAlign = attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device* device;
  if (CUresult r = lookup(dev, &device); r != CUDA_SUCCESS) return r;
  std::snprintf(pciBusId, static_cast<size_t>(len), "%s", device->pci().to_string().c_str());
  return CUDA_SUCCESS;
}

// Accepts "domain:bus:device.function" and "bus:device.function", hex, any case.
VGPU_EXPORT CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  VGPU_CALL_SCOPE();
  if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const DeviceRegistry* d = vgpu::device_registry();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    domain = 0;
    if (std::sscanf(pciBusId, "%x:%x.%x", &bus, &device, &function) != 3)
      return CUDA_ERROR_INVALID_VALUE;
  }
  for (int i = 0; i < d->device_count(); ++i) {
    const vgpu::PciAddress& p = d->device(i)->pci();
    if (static_cast<unsigned>(p.domain) == domain && static_cast<unsigned>(p.bus) == bus &&
        static_cast<unsigned>(p.device) == device) {
      *dev = i;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

// Virtual GPUs of one node reach each other over NVLink; across nodes only through the network.
VGPU_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  VGPU_CALL_SCOPE();
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  vgpu::Device *a, *b;
  if (CUresult r = lookup(dev, &a); r != CUDA_SUCCESS) return r;
  if (CUresult r = lookup(peerDev, &b); r != CUDA_SUCCESS) return r;
  *canAccessPeer = (a != b && a->node() == b->node() &&
                    vgpu::device_registry()->nvlink()) ? 1 : 0;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib,
                                                     CUdevice srcDevice, CUdevice dstDevice) {
  VGPU_CALL_SCOPE();
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int peer = 0;
  if (CUresult r = cuDeviceCanAccessPeer(&peer, srcDevice, dstDevice); r != CUDA_SUCCESS) return r;
  if (srcDevice == dstDevice) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *value = peer; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}
