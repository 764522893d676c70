// Device memory under the passthrough backend: every allocation is the real driver's, made in
// the virtual device's real context, and is first charged to the virtual device, so that a
// virtual device refuses memory (CUDA_ERROR_OUT_OF_MEMORY) where a real GPU of its model would,
// whatever the physical GPU has left; cuMemGetInfo reports the virtual device.
// Device ordinals inside VMM structures (CUmemLocation) are translated both ways.
#include <vector>

#include "common/log.h"
#include "driver/cuda_api.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/shared_pages.h"

using vgpu::pt::PassState;

namespace {

// The calling thread's virtual device, or the error (no context, not initialized).
CUresult current(PassState** s, int* v) {
  *s = PassState::get();
  if (*s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  return (*s)->current_device(v);
}

CUresult out_of_memory(int v, size_t bytes, const char* call) {
  vgpu::log::info("{}: {} bytes do not fit on virtual device {}", call, bytes, v);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// Charge, allocate for real, remember; undo the charge when the real driver refuses.
// `shareable`: the shared-pages policy may back it (cuMemAlloc only).
template <class Alloc>
CUresult charged(CUdeviceptr* dptr, size_t bytes, const char* call, Alloc alloc, bool shareable = false) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s;
  int v;
  if (CUresult r = current(&s, &v); r != CUDA_SUCCESS) return r;
  if (!s->reserve(v, bytes)) return out_of_memory(v, bytes, call);
  const CUresult r = alloc(v);
  if (r != CUDA_SUCCESS) {
    s->release(v, bytes);
    return r;
  }
  s->add_allocation(*dptr, bytes, v, shareable && vgpu::pt::SharedPages::applies_to(bytes) ? 0 : bytes);
  return CUDA_SUCCESS;
}

CUmemLocation to_physical(CUmemLocation loc) {
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) loc.id = vgpu::pt::physical_device(loc.id);
  return loc;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return charged(dptr, bytes, "cuMemAlloc", [&](int v) {
    if (vgpu::pt::SharedPages::applies_to(bytes))
      return vgpu::pt::SharedPages::get().allocate(dptr, bytes, PassState::get()->physical(v));
    return VGPU_REAL("cuMemAlloc_v2", CUresult (*)(CUdeviceptr*, size_t))(dptr, bytes);
  }, /*shareable=*/true);
}

VGPU_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return charged(dptr, bytes, "cuMemAllocManaged", [&](int) {
    return VGPU_REAL("cuMemAllocManaged", CUresult (*)(CUdeviceptr*, size_t, unsigned))(dptr, bytes, flags);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                                size_t height, unsigned int element) {
  if (pitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The pitch is the real driver's choice: charge the widest it picks (512-byte alignment).
  const size_t bytes = ((width + 511) / 512 * 512) * height;
  return charged(dptr, bytes, "cuMemAllocPitch", [&](int) {
    return VGPU_REAL("cuMemAllocPitch_v2", CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned))(
        dptr, pitch, width, height, element);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) {
  CUresult r;
  if (!vgpu::pt::SharedPages::enabled() || !vgpu::pt::SharedPages::get().free(p, &r))
    r = VGPU_REAL("cuMemFree_v2", CUresult (*)(CUdeviceptr))(p);
  if (r == CUDA_SUCCESS)
    if (PassState* s = PassState::get()) s->remove_allocation(p);
  return r;
}

namespace {
template <class Alloc>
CUresult charged_async(CUdeviceptr* dptr, size_t bytes, const char* call, Alloc alloc) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return charged(dptr, bytes, call, alloc);
}
using FreeAsync = CUresult (*)(CUdeviceptr, CUstream);
CUresult free_async(CUdeviceptr p, CUstream stream, FreeAsync real) {
  const CUresult r = real(p, stream);
  if (r == CUDA_SUCCESS)
    if (PassState* s = PassState::get()) s->remove_allocation(p);
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return charged_async(dptr, bytes, "cuMemAllocAsync", [&](int) {
    return VGPU_REAL("cuMemAllocAsync", CUresult (*)(CUdeviceptr*, size_t, CUstream))(dptr, bytes, stream);
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return charged_async(dptr, bytes, "cuMemAllocAsync", [&](int) {
    return VGPU_REAL("cuMemAllocAsync_ptsz", CUresult (*)(CUdeviceptr*, size_t, CUstream))(dptr, bytes, stream);
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                     CUstream stream) {
  return charged_async(dptr, bytes, "cuMemAllocFromPoolAsync", [&](int) {
    return VGPU_REAL("cuMemAllocFromPoolAsync", CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream))(
        dptr, bytes, pool, stream);
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                          CUmemoryPool pool, CUstream stream) {
  return charged_async(dptr, bytes, "cuMemAllocFromPoolAsync", [&](int) {
    return VGPU_REAL("cuMemAllocFromPoolAsync_ptsz", CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream))(dptr, bytes, pool, stream);
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream stream) {
  return free_async(p, stream, VGPU_REAL("cuMemFreeAsync", FreeAsync));
}
VGPU_EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream stream) {
  return free_async(p, stream, VGPU_REAL("cuMemFreeAsync_ptsz", FreeAsync));
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s;
  int v;
  if (CUresult r = current(&s, &v); r != CUDA_SUCCESS) return r;
  s->memory_info(v, free, total);
  return CUDA_SUCCESS;
}

// ---- the VMM API (PyTorch's expandable segments) ----

VGPU_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                         const CUmemAllocationProp* prop, unsigned long long flags) {
  if (handle == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s = PassState::get();
  if (s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUmemAllocationProp real = *prop;
  real.location = to_physical(prop->location);
  const bool on_device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  const int v = prop->location.id;
  if (on_device && s->device(v) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (on_device && !s->reserve(v, size)) return out_of_memory(v, size, "cuMemCreate");
  const CUresult r = VGPU_REAL("cuMemCreate", CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                          unsigned long long))(handle, size, &real, flags);
  if (r != CUDA_SUCCESS) {
    if (on_device) s->release(v, size);
    return r;
  }
  if (on_device) s->add_handle(*handle, size, v);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  const CUresult r = VGPU_REAL("cuMemRelease", CUresult (*)(CUmemGenericAllocationHandle))(handle);
  if (r == CUDA_SUCCESS)
    if (PassState* s = PassState::get()) s->remove_handle(handle);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                      CUmemGenericAllocationHandle handle, unsigned long long flags) {
  const CUresult r = VGPU_REAL("cuMemMap", CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                                          unsigned long long))(ptr, size, offset, handle, flags);
  if (r == CUDA_SUCCESS)
    if (PassState* s = PassState::get()) s->add_mapping(ptr, size);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  const CUresult r = VGPU_REAL("cuMemUnmap", CUresult (*)(CUdeviceptr, size_t))(ptr, size);
  if (r == CUDA_SUCCESS)
    if (PassState* s = PassState::get()) s->remove_mapping(ptr);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                           CUmemAllocationGranularity_flags option) {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUmemAllocationProp real = *prop;
  real.location = to_physical(prop->location);
  return VGPU_REAL("cuMemGetAllocationGranularity", CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags))(granularity, &real, option);
}

VGPU_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                            size_t count) {
  if (desc == nullptr && count > 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUmemAccessDesc> real(desc, desc + count);
  for (CUmemAccessDesc& d : real) d.location = to_physical(d.location);
  return VGPU_REAL("cuMemSetAccess", CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))(
      ptr, size, real.data(), count);
}

// Stream-ordered pools name their device in CUmemLocation too (NCCL creates one per rank).
VGPU_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (props->location.type == CU_MEM_LOCATION_TYPE_DEVICE && PassState::get() &&
      PassState::get()->device(props->location.id) == nullptr)
    return CUDA_ERROR_INVALID_DEVICE;
  CUmemPoolProps real = *props;
  real.location = to_physical(props->location);
  return VGPU_REAL("cuMemPoolCreate", CUresult (*)(CUmemoryPool*, const CUmemPoolProps*))(pool, &real);
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

VGPU_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                                    CUmemGenericAllocationHandle handle) {
  const CUresult r = VGPU_REAL("cuMemGetAllocationPropertiesFromHandle", CUresult (*)(CUmemAllocationProp*, CUmemGenericAllocationHandle))(prop, handle);
  if (r != CUDA_SUCCESS || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return r;
  // The physical ordinal back to the virtual device the handle was made for.
  if (PassState* s = PassState::get())
    if (const int v = s->handle_device(handle); v >= 0) prop->location.id = v;
  return r;
}

// ---- pointer queries: the device ordinal is the virtual device's ----

namespace {
void virtual_ordinal(CUdeviceptr ptr, int* ordinal) {
  PassState* s = PassState::get();
  if (s == nullptr || ordinal == nullptr) return;
  int v = s->device_of_pointer(ptr);
  if (v < 0 && s->current_device(&v) != CUDA_SUCCESS) return;
  *ordinal = v;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  const CUresult r = VGPU_REAL("cuPointerGetAttribute", CUresult (*)(void*, CUpointer_attribute, CUdeviceptr))(
      data, attribute, ptr);
  if (r == CUDA_SUCCESS && attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
    virtual_ordinal(ptr, static_cast<int*>(data));
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attributes,
                                                    void** data, CUdeviceptr ptr) {
  const CUresult r = VGPU_REAL("cuPointerGetAttributes", CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr))(n, attributes, data, ptr);
  if (r != CUDA_SUCCESS || attributes == nullptr || data == nullptr) return r;
  for (unsigned i = 0; i < n; ++i)
    if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL && data[i] != nullptr)
      virtual_ordinal(ptr, static_cast<int*>(data[i]));
  return r;
}
