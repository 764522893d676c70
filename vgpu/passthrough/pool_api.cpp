// The stream-ordered allocator's pools under the passthrough backend: each virtual device's own
// default and current pool (device_pools.h says why and how), the location-based forms of those
// queries (CUDA 13), and created pools, whose CUmemLocation names a virtual device.
// cuMemAllocAsync draws from the virtual device's current pool: memory_api.cpp.
#include <vector>

#include "common/log.h"
#include "front/driver/cuda_api.h"
#include "passthrough/memory_location.h"
#include "passthrough/passthrough_state.h"

using vgpu::pt::PassState;
using vgpu::pt::to_physical;

namespace {

// The state and a checked virtual device, or the real driver's error for either.
CUresult device_state(int v, PassState** s) {
  *s = PassState::get();
  if (*s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  return (*s)->device(v) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// Location-based calls name a virtual device's pool for pinned memory of a device location;
// anything else (host locations, managed memory) is the real driver's, forwarded.
bool names_device_pool(const CUmemLocation* loc, CUmemAllocationType type) {
  return loc != nullptr && loc->type == CU_MEM_LOCATION_TYPE_DEVICE && type == CU_MEM_ALLOCATION_TYPE_PINNED;
}

using GetByLocation = CUresult (*)(CUmemoryPool*, CUmemLocation*, CUmemAllocationType);

CUresult forward_get(GetByLocation real, CUmemoryPool* out, CUmemLocation* loc, CUmemAllocationType type) {
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  if (loc == nullptr) return real(out, loc, type);
  CUmemLocation phys = to_physical(*loc);
  return real(out, &phys, type);
}

}  // namespace

// ---- a device's default and current pool ----

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  PassState* s;
  if (CUresult r = device_state(dev, &s); r != CUDA_SUCCESS) return r;
  return s->pools().default_pool(dev, pool);
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  PassState* s;
  if (CUresult r = device_state(dev, &s); r != CUDA_SUCCESS) return r;
  return s->pools().current_pool(dev, pool);
}

VGPU_EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  PassState* s;
  if (CUresult r = device_state(dev, &s); r != CUDA_SUCCESS) return r;
  return s->pools().set_current_pool(dev, pool);
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool* pool, CUmemLocation* location,
                                                   CUmemAllocationType type) {
  if (!names_device_pool(location, type))
    return forward_get(VGPU_REAL("cuMemGetDefaultMemPool", GetByLocation), pool, location, type);
  PassState* s;
  if (CUresult r = device_state(location->id, &s); r != CUDA_SUCCESS) return r;
  return s->pools().default_pool(location->id, pool);
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
  if (!names_device_pool(location, type))
    return forward_get(VGPU_REAL("cuMemGetMemPool", GetByLocation), pool, location, type);
  PassState* s;
  if (CUresult r = device_state(location->id, &s); r != CUDA_SUCCESS) return r;
  return s->pools().current_pool(location->id, pool);
}

VGPU_EXPORT CUresult CUDAAPI cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
  if (!names_device_pool(location, type)) {
    using Set = CUresult (*)(CUmemLocation*, CUmemAllocationType, CUmemoryPool);
    const Set real = VGPU_REAL("cuMemSetMemPool", Set);
    if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    if (location == nullptr) return real(location, type, pool);
    CUmemLocation phys = to_physical(*location);
    return real(&phys, type, pool);
  }
  PassState* s;
  if (CUresult r = device_state(location->id, &s); r != CUDA_SUCCESS) return r;
  return s->pools().set_current_pool(location->id, pool);
}

// ---- created pools ----

// NCCL and frameworks create pools for a device by its CUmemLocation.
VGPU_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s = PassState::get();
  const bool on_device = props->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  if (on_device && s != nullptr && s->device(props->location.id) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  CUmemPoolProps real = *props;
  real.location = to_physical(props->location);
  const CUresult r = VGPU_REAL("cuMemPoolCreate", CUresult (*)(CUmemoryPool*, const CUmemPoolProps*))(pool, &real);
  if (r == CUDA_SUCCESS && on_device && s != nullptr) s->pools().pool_created(*pool, props->location.id);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  PassState* s = PassState::get();
  if (s != nullptr && s->pools().is_made_default(pool)) {
    // A device's default pool cannot be destroyed; vgpu's stand-ins for them neither.
    vgpu::log::info("cuMemPoolDestroy: {} is a virtual device's default pool", static_cast<void*>(pool));
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUresult r = VGPU_REAL("cuMemPoolDestroy", CUresult (*)(CUmemoryPool))(pool);
  if (r == CUDA_SUCCESS && s != nullptr) s->pools().pool_destroyed(pool);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  if (map == nullptr && count > 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUmemAccessDesc> real(map, map + count);
  for (CUmemAccessDesc& d : real) d.location = to_physical(d.location);
  return VGPU_REAL("cuMemPoolSetAccess", CUresult (*)(CUmemoryPool, const CUmemAccessDesc*, size_t))(
      pool, real.data(), count);
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool pool, CUmemLocation* location) {
  if (location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUmemLocation real = to_physical(*location);
  return VGPU_REAL("cuMemPoolGetAccess", CUresult (*)(CUmemAccess_flags*, CUmemoryPool, CUmemLocation*))(
      flags, pool, &real);
}
