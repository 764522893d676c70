// Device memory under the passthrough backend: every allocation is the real driver's, made in
// the virtual device's real context, and is first charged to the virtual device, so that a
// virtual device refuses memory (CUDA_ERROR_OUT_OF_MEMORY) where a real GPU of its model would,
// whatever the physical GPU has left; cuMemGetInfo reports the virtual device.
// Device ordinals inside VMM structures (CUmemLocation) are translated both ways.
//
// Frees take the accounting record out before the real free and put it back if the real driver
// refuses: once the real free returns, another thread may be handed the same address (or VMM
// handle) and record its own charge under it. Allocations made in a context go back with the
// context (allocations_destroyed_with); a VMM handle's charge stays until it is released and its
// last mapping is unmapped, as the real driver keeps its memory that long.
#include <cstdint>
#include <vector>

#include "common/log.h"
#include "front/driver/cuda_api.h"
#include "front/driver/query_lines.h"
#include "passthrough/memory_location.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/shared_pages.h"

using vgpu::pt::PassState;
using vgpu::pt::to_physical;

namespace {

// The calling thread's virtual device and current context, or the error (no context, not
// initialized).
CUresult current(PassState** s, int* v, CUcontext* ctx = nullptr) {
  *s = PassState::get();
  if (*s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  return (*s)->current_device(v, ctx);
}

CUresult out_of_memory(int v, size_t bytes, const char* call) {
  vgpu::log::info("{}: {} bytes do not fit on virtual device {}", call, bytes, v);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// Charge, allocate for real, remember; undo the charge when the real driver refuses.
// `shareable`: the shared-pages policy may back it (cuMemAlloc only).
// The real context the allocation goes with, or nullptr (`in_context` false: pool memory).
// `on_device`: the virtual device charged (-1: the current context's).
template <class Alloc>
CUresult charged(CUdeviceptr* dptr, size_t bytes, const char* call, Alloc alloc, bool shareable = false,
                 bool in_context = true, int on_device = -1) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s;
  int v = on_device;
  CUcontext current_ctx = nullptr;  // found with the device (no second driver call)
  if (v < 0) {
    if (CUresult r = current(&s, &v, &current_ctx); r != CUDA_SUCCESS) return r;
  } else if ((s = PassState::get()) == nullptr) {
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  if (!s->reserve(v, bytes)) return out_of_memory(v, bytes, call);
  const CUresult r = alloc(v);
  if (r != CUDA_SUCCESS) {
    s->release(v, bytes);
    return r;
  }
  CUcontext ctx = nullptr;
  if (in_context) {
    // The context current when the allocation was made (the real allocation does not change it).
    if (on_device < 0)
      ctx = current_ctx;
    else
      VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx);
  }
  s->add_allocation(*dptr, bytes, v, shareable && vgpu::pt::SharedPages::applies_to(bytes) ? 0 : bytes, ctx);
  return CUDA_SUCCESS;
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
  // An extent past 2^64 bytes is charged as 2^64 - 1: refused as out of memory.
  const unsigned __int128 wide = static_cast<unsigned __int128>((width + 511ull) / 512 * 512) * height;
  const size_t bytes = width > SIZE_MAX - 511 || wide > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(wide);
  return charged(dptr, bytes, "cuMemAllocPitch", [&](int) {
    return VGPU_REAL("cuMemAllocPitch_v2", CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned))(
        dptr, pitch, width, height, element);
  });
}

namespace {
// Takes `p`'s record out, frees for real, then gives its bytes back or puts the record back.
template <class Free>
CUresult uncharged_free(CUdeviceptr p, Free free) {
  PassState* s = PassState::get();
  PassState::Charge c;
  const bool known = s != nullptr && p != 0 && s->take_allocation(p, &c);
  const CUresult r = free();
  if (known) {
    if (r == CUDA_SUCCESS) s->give_back(c);
    else s->put_back_allocation(p, c);
  }
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) {
  return uncharged_free(p, [p] {
    CUresult r;
    if (!vgpu::pt::SharedPages::enabled() || !vgpu::pt::SharedPages::get().free(p, &r))
      r = VGPU_REAL("cuMemFree_v2", CUresult (*)(CUdeviceptr))(p);
    return r;
  });
}

// ---- the 32-bit entry points of programs built against old headers ----
// Served by the charged 64-bit paths above, as the sim backend serves them; an address that does
// not fit 32 bits is freed again and refused, as there.

namespace {
CUresult narrow(CUdeviceptr p, CUdeviceptr_v1* out, const char* call) {
  if (p > UINT32_MAX) {
    cuMemFree_v2(p);
    vgpu::log::info("{} (32-bit ABI): the address {:#x} does not fit 32 bits", call, p);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  *out = static_cast<CUdeviceptr_v1>(p);
  return CUDA_SUCCESS;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytes) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  if (CUresult r = cuMemAlloc_v2(&p, bytes); r != CUDA_SUCCESS) return r;
  return narrow(p, dptr, "cuMemAlloc");
}

VGPU_EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch, unsigned int width,
                                             unsigned int height, unsigned int element) {
  if (dptr == nullptr || pitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  size_t wide_pitch = 0;
  if (CUresult r = cuMemAllocPitch_v2(&p, &wide_pitch, width, height, element); r != CUDA_SUCCESS) return r;
  if (wide_pitch > UINT32_MAX) {
    cuMemFree_v2(p);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (CUresult r = narrow(p, dptr, "cuMemAllocPitch"); r != CUDA_SUCCESS) return r;
  *pitch = static_cast<unsigned int>(wide_pitch);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 p) { return cuMemFree_v2(p); }

namespace {
// The virtual device whose work `stream` holds (-1: the current context's, or unknown).
int stream_device(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return -1;
  PassState* s = PassState::get();
  CUcontext ctx = nullptr;
  if (s == nullptr || VGPU_REAL("cuStreamGetCtx", CUresult (*)(CUstream, CUcontext*))(stream, &ctx) != CUDA_SUCCESS)
    return -1;
  return s->device_of(ctx);
}

// Stream-ordered memory is charged to the stream's virtual device; `alloc(v)` allocates it.
template <class Alloc>
CUresult charged_async(CUdeviceptr* dptr, size_t bytes, CUstream stream, const char* call, Alloc alloc) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return charged(dptr, bytes, call, alloc, /*shareable=*/false, /*in_context=*/false, stream_device(stream));
}

// cuMemAllocAsync: from virtual device v's current pool when the GPU's current pool is another
// virtual device's (device_pools.h).
template <class Real>
CUresult alloc_async(int v, CUdeviceptr* dptr, size_t bytes, CUstream stream, Real real, const char* from_pool) {
  CUmemoryPool pool = nullptr;
  if (PassState* s = PassState::get(); s != nullptr && s->pools().redirect_alloc(v, &pool)) {
    using FromPool = CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
    const FromPool from = reinterpret_cast<FromPool>(vgpu::pt::real_symbol(from_pool));
    if (from == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    return from(dptr, bytes, pool, stream);
  }
  return real(dptr, bytes, stream);
}
using FreeAsync = CUresult (*)(CUdeviceptr, CUstream);
CUresult free_async(CUdeviceptr p, CUstream stream, FreeAsync real) {
  return uncharged_free(p, [&] { return real(p, stream); });
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return charged_async(dptr, bytes, stream, "cuMemAllocAsync", [&](int v) {
    return alloc_async(v, dptr, bytes, stream, VGPU_REAL("cuMemAllocAsync", CUresult (*)(CUdeviceptr*, size_t, CUstream)),
                       "cuMemAllocFromPoolAsync");
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return charged_async(dptr, bytes, stream, "cuMemAllocAsync", [&](int v) {
    return alloc_async(v, dptr, bytes, stream,
                       VGPU_REAL("cuMemAllocAsync_ptsz", CUresult (*)(CUdeviceptr*, size_t, CUstream)),
                       "cuMemAllocFromPoolAsync_ptsz");
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                     CUstream stream) {
  return charged_async(dptr, bytes, stream, "cuMemAllocFromPoolAsync", [&](int) {
    return VGPU_REAL("cuMemAllocFromPoolAsync", CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream))(
        dptr, bytes, pool, stream);
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                          CUmemoryPool pool, CUstream stream) {
  return charged_async(dptr, bytes, stream, "cuMemAllocFromPoolAsync", [&](int) {
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
  if (vgpu::query_trace::enabled()) vgpu::query_trace::mem_info(CUDA_SUCCESS, free, total);
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
  // No multiple of a granularity lies within a page of 2^64: the real driver's answer to a size
  // that is not one, given before the charge's page rounding could pass 2^64.
  if (size > SIZE_MAX - ((2u << 20) - 1)) return CUDA_ERROR_INVALID_VALUE;
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
  PassState* s = PassState::get();
  auto charge = s != nullptr ? s->take_handle(handle) : nullptr;
  const CUresult r = VGPU_REAL("cuMemRelease", CUresult (*)(CUmemGenericAllocationHandle))(handle);
  if (charge == nullptr) return r;
  if (r == CUDA_SUCCESS) s->handle_released(charge);
  else s->put_back_handle(handle, std::move(charge));
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                      CUmemGenericAllocationHandle handle, unsigned long long flags) {
  const CUresult r = VGPU_REAL("cuMemMap", CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                                          unsigned long long))(ptr, size, offset, handle, flags);
  if (r == CUDA_SUCCESS)
    if (PassState* s = PassState::get()) s->add_mapping(ptr, size, handle);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  const CUresult r = VGPU_REAL("cuMemUnmap", CUresult (*)(CUdeviceptr, size_t))(ptr, size);
  if (r == CUDA_SUCCESS)
    if (PassState* s = PassState::get()) s->remove_mapping(ptr, size);
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
  if (attribute == CU_POINTER_ATTRIBUTE_CONTEXT) return vgpu::pt::program_context_out(r, static_cast<CUcontext*>(data));
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attributes,
                                                    void** data, CUdeviceptr ptr) {
  const CUresult r = VGPU_REAL("cuPointerGetAttributes", CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr))(n, attributes, data, ptr);
  if (r != CUDA_SUCCESS || attributes == nullptr || data == nullptr) return r;
  for (unsigned i = 0; i < n; ++i)
    if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL && data[i] != nullptr)
      virtual_ordinal(ptr, static_cast<int*>(data[i]));
    else if (attributes[i] == CU_POINTER_ATTRIBUTE_CONTEXT)
      vgpu::pt::program_context_out(r, static_cast<CUcontext*>(data[i]));
  return r;
}
