// Allocation entry points of the sim backend: device memory (cuMemAlloc, pitch), pinned and
// registered host memory, cuMemGetInfo, cuMemGetAddressRange and the pointer attributes.
#include <sys/mman.h>

#include <climits>
#include <cstring>

#include <unistd.h>

#include "front/driver/entry_points.h"
#include "front/driver/query_lines.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace {

bool is_host_kind(AllocKind k) { return k == AllocKind::pinned_host || k == AllocKind::registered_host; }

// Old 32-bit ABIs: an address that does not fit is refused (vgpu's addresses are 64-bit).
template <class Narrow> bool fits(uint64_t v) { return v <= static_cast<uint64_t>(std::numeric_limits<Narrow>::max()); }

}  // namespace

// ---- device memory -----------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuMemAlloc", &c); r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || bytesize == 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc: null pointer or size 0");
  std::shared_ptr<Allocation> a;
  if (CUresult r = c.mem->allocate(AllocKind::device, c.ctx->device(), bytesize, c.ctx->handle(), &a); r != CUDA_SUCCESS)
    return r;
  *dptr = a->base;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  VGPU_CALL_SCOPE();
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  if (CUresult r = cuMemAlloc_v2(&p, bytesize); r != CUDA_SUCCESS) return r;
  if (!fits<CUdeviceptr_v1>(p)) {
    cuMemFree_v2(p);
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuMemAlloc (32-bit ABI): the address does not fit 32 bits");
  }
  *dptr = static_cast<CUdeviceptr_v1>(p);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                                size_t Height, unsigned int ElementSizeBytes) {
  VGPU_CALL_SCOPE();
  if (dptr == nullptr || pPitch == nullptr || WidthInBytes == 0 || Height == 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAllocPitch: null pointer or empty extent");
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAllocPitch: element size {} is not 4, 8 or 16", ElementSizeBytes);
  // Rows aligned to 512 bytes, the texture pitch alignment of the real devices.
  uint64_t pitch;
  if (!round_up_checked(WidthInBytes, 512, &pitch) || Height > UINT64_MAX / pitch)
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAllocPitch: extent too large");
  if (CUresult r = cuMemAlloc_v2(dptr, pitch * Height); r != CUDA_SUCCESS) return r;
  *pPitch = pitch;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pPitch, unsigned int WidthInBytes,
                                             unsigned int Height, unsigned int ElementSizeBytes) {
  VGPU_CALL_SCOPE();
  if (dptr == nullptr || pPitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  size_t pitch = 0;
  if (CUresult r = cuMemAllocPitch_v2(&p, &pitch, WidthInBytes, Height, ElementSizeBytes); r != CUDA_SUCCESS) return r;
  if (!fits<CUdeviceptr_v1>(p)) {
    cuMemFree_v2(p);
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuMemAllocPitch (32-bit ABI): the address does not fit 32 bits");
  }
  *dptr = static_cast<CUdeviceptr_v1>(p);
  *pPitch = static_cast<unsigned int>(pitch);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;  // freeing NULL is a no-op, as on the real driver
  auto a = c.mem->index_remove(dptr, [](const Allocation& x) {
    return x.kind == AllocKind::device || x.kind == AllocKind::managed || x.kind == AllocKind::pool;
  });
  if (!a) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemFree: {:#x} is not the start of a device allocation", dptr);
  if (a->kind == AllocKind::pool) {
    // Stream-ordered memory freed synchronously (allowed, as on the real driver): its block goes
    // back to its pool at once; the program has made sure no queued work still uses it.
    c.mem->pool_return(a->pool_owner, a->pool_block, a->mapping);
    return CUDA_SUCCESS;
  }
  c.mem->uncharge(*a);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr) { VGPU_CALL_SCOPE(); return cuMemFree_v2(dptr); }

VGPU_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuMemGetInfo", &c); r != CUDA_SUCCESS) return r;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* dev = c.driver->device(c.ctx->device());
  *total = dev->capacity();
  *free = dev->free_bytes();
  if (vgpu::query_trace::enabled()) vgpu::query_trace::mem_info(CUDA_SUCCESS, free, total);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetInfo(unsigned int* free, unsigned int* total) {
  VGPU_CALL_SCOPE();
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t f, t;
  if (CUresult r = cuMemGetInfo_v2(&f, &t); r != CUDA_SUCCESS) return r;
  *free = static_cast<unsigned int>(std::min<size_t>(f, UINT_MAX));
  *total = static_cast<unsigned int>(std::min<size_t>(t, UINT_MAX));
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  auto a = c.mem->find(dptr);
  if (!a || is_host_kind(a->kind))
    return fail(CUDA_ERROR_NOT_FOUND, "cuMemGetAddressRange: {:#x} is in no device allocation", dptr);
  if (pbase) *pbase = a->base;
  if (psize) *psize = a->size;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr_v1* pbase, unsigned int* psize, CUdeviceptr_v1 dptr) {
  VGPU_CALL_SCOPE();
  CUdeviceptr b;
  size_t s;
  if (CUresult r = cuMemGetAddressRange_v2(&b, &s, dptr); r != CUDA_SUCCESS) return r;
  if (pbase) *pbase = static_cast<CUdeviceptr_v1>(b);
  if (psize) *psize = static_cast<unsigned int>(s);
  return CUDA_SUCCESS;
}

// ---- pinned and registered host memory ---------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuMemHostAlloc", &c); r != CUDA_SUCCESS) return r;
  if (pp == nullptr || bytesize == 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc: null pointer or size 0");
  if (Flags & ~7u) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc: unknown flags {:#x}", Flags);
  // Pinned memory is locked physical RAM: the real driver cannot pin more than the machine has
  // (the sim backend's reservation would succeed for any size, 64 TiB included).
  static const uint64_t ram = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  if (bytesize > ram)
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemHostAlloc: {} bytes exceed this host's {} bytes of RAM", bytesize, ram);
  std::shared_ptr<Allocation> a;
  // Portable pinned memory outlives the context that made it.
  CUcontext owner = (Flags & CU_MEMHOSTALLOC_PORTABLE) ? nullptr : c.ctx->handle();
  if (CUresult r = c.mem->allocate(AllocKind::pinned_host, -1, bytesize, owner, &a); r != CUDA_SUCCESS)
    return r;
  a->host_flags = Flags;
  a->device = -1;
  *pp = a->host;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) { VGPU_CALL_SCOPE(); return cuMemHostAlloc(pp, bytesize, 0); }
VGPU_EXPORT CUresult CUDAAPI cuMemAllocHost(void** pp, unsigned int bytesize) { VGPU_CALL_SCOPE(); return cuMemHostAlloc(pp, bytesize, 0); }

VGPU_EXPORT CUresult CUDAAPI cuMemFreeHost(void* p) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_SUCCESS;
  auto a = c.mem->index_remove(reinterpret_cast<uintptr_t>(p),
                               [](const Allocation& x) { return x.kind == AllocKind::pinned_host; });
  if (!a) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost: {} is not pinned memory from cuMemHostAlloc", p);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuMemHostRegister", &c); r != CUDA_SUCCESS) return r;
  if (p == nullptr || bytesize == 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister: null pointer or size 0");
  if (Flags & ~15u) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister: unknown flags {:#x}", Flags);
  const auto base = reinterpret_cast<uintptr_t>(p);
  if (base > UINTPTR_MAX - bytesize) return CUDA_ERROR_INVALID_VALUE;
  auto a = std::make_shared<Allocation>();
  a->kind = AllocKind::registered_host;
  a->base = base;
  a->size = bytesize;
  a->host = static_cast<char*>(p);
  a->ctx = (Flags & CU_MEMHOSTREGISTER_PORTABLE) ? nullptr : c.ctx->handle();
  a->host_flags = Flags;
  a->buffer_id = c.mem->next_buffer_id++;
  {
    // Registering over any known range is refused, checked and inserted under one lock.
    std::unique_lock l(c.mem->index_mu);
    auto it = c.mem->index.lower_bound(base);
    bool overlap = it != c.mem->index.end() && it->first < base + bytesize;
    if (it != c.mem->index.begin()) {
      auto prev = std::prev(it);
      overlap = overlap || prev->second->base + prev->second->size > base;
    }
    if (overlap)
      return fail(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "cuMemHostRegister: {} overlaps a known range", p);
    c.mem->index[base] = a;
  }
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  VGPU_CALL_SCOPE();
  return cuMemHostRegister_v2(p, bytesize, Flags);
}

VGPU_EXPORT CUresult CUDAAPI cuMemHostUnregister(void* p) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->index_remove(reinterpret_cast<uintptr_t>(p),
                               [](const Allocation& x) { return x.kind == AllocKind::registered_host; });
  if (!a) return fail(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "cuMemHostUnregister: {} is not registered", p);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuMemHostGetDevicePointer", &c); r != CUDA_SUCCESS) return r;
  if (pdptr == nullptr || p == nullptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(reinterpret_cast<uintptr_t>(p));
  if (!a || !is_host_kind(a->kind))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostGetDevicePointer: {} is not pinned or registered", p);
  *pdptr = reinterpret_cast<uintptr_t>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr_v1* pdptr, void* p, unsigned int Flags) {
  VGPU_CALL_SCOPE();
  if (pdptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr d;
  if (CUresult r = cuMemHostGetDevicePointer_v2(&d, p, Flags); r != CUDA_SUCCESS) return r;
  if (!fits<CUdeviceptr_v1>(d)) return CUDA_ERROR_NOT_SUPPORTED;
  *pdptr = static_cast<CUdeviceptr_v1>(d);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (pFlags == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(reinterpret_cast<uintptr_t>(p));
  if (!a || a->kind != AllocKind::pinned_host)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostGetFlags: {} is not from cuMemHostAlloc", p);
  // Every pinned allocation is device-mapped under unified addressing.
  *pFlags = a->host_flags | CU_MEMHOSTALLOC_DEVICEMAP;
  return CUDA_SUCCESS;
}

// ---- pointer attributes ------------------------------------------------------------------------

namespace {

// One attribute of `ptr`; `a` is the allocation containing it (nullptr: unknown memory, which
// cuPointerGetAttributes answers with empty values).
CUresult pointer_attribute(const Call& c, const Allocation* a, CUdeviceptr ptr,
                           CUpointer_attribute attribute, void* data) {
  const bool known = a != nullptr;
  auto put_u32 = [&](unsigned int v) { *static_cast<unsigned int*>(data) = v; };
  auto put_i32 = [&](int v) { *static_cast<int*>(data) = v; };
  auto put_ptr = [&](uintptr_t v) { *static_cast<uintptr_t*>(data) = v; };
  auto put_u64 = [&](unsigned long long v) { *static_cast<unsigned long long*>(data) = v; };
  const bool host = known && is_host_kind(a->kind);
  int ordinal = known ? a->device : -1;
  if (known && ordinal < 0) {
    // Host memory reports the device of the context it was made in (else the current one).
    if (auto ctx = c.driver->contexts().find(a->ctx)) ordinal = ctx->device();
    else if (auto cur = c.driver->contexts().current()) ordinal = cur->device();
    else ordinal = 0;
  }
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = known ? a->ctx : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      put_u32(!known ? 0u : static_cast<unsigned>(host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!known) return CUDA_ERROR_INVALID_VALUE;
      put_ptr(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      // Device memory has no host address the program may use (the backing is vgpu's own).
      if (!known) return CUDA_ERROR_INVALID_VALUE;
      if (!host && a->kind != AllocKind::managed) return CUDA_ERROR_INVALID_VALUE;
      put_ptr(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: return CUDA_ERROR_NOT_SUPPORTED;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: put_i32(1); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: put_u64(known ? a->buffer_id : 0); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: put_i32(known && a->kind == AllocKind::managed); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: put_i32(known ? ordinal : -2); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: put_i32(known && a->kind == AllocKind::device); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: put_ptr(known ? a->base : 0); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = known ? a->size : 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: put_i32(known); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      put_u64(known && a->physical ? a->physical->prop.requestedHandleTypes : 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: put_i32(0); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
      unsigned int flags = known ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
      if (known && a->kind == AllocKind::vmm_mapping) {
        flags = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        int dev = 0;
        if (c.driver->contexts().current_device(&dev) == CUDA_SUCCESS)
          if (auto it = a->access.find(dev); it != a->access.end())
            flags = static_cast<unsigned int>(it->second);
      }
      put_u32(flags);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *static_cast<CUmemoryPool*>(data) = known ? a->pool : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *static_cast<size_t*>(data) = known ? a->size : 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: put_ptr(known ? a->base : 0); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      put_u64(!known ? 0 : a->physical ? a->physical->block_id : a->buffer_id);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: put_i32(0); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(ptr);
  if (!a) return fail(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttribute: {:#x} is not memory vgpu knows", ptr);
  return pointer_attribute(c, a.get(), ptr, attribute, data);
}

VGPU_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                                    void** data, CUdeviceptr ptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (numAttributes == 0 || attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = c.mem->find(ptr);
  for (unsigned int i = 0; i < numAttributes; ++i) {
    if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = pointer_attribute(c, a.get(), ptr, attributes[i], data[i]);
    // Unknown memory is not an error here: the attributes that need an allocation are zeroed.
    if (r == CUDA_ERROR_INVALID_VALUE && !a && attributes[i] >= CU_POINTER_ATTRIBUTE_CONTEXT &&
        attributes[i] <= CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE) {
      *static_cast<uintptr_t*>(data[i]) = 0;
      continue;
    }
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuPointerSetAttribute(const void* value, CUpointer_attribute attribute, CUdeviceptr ptr) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) return CUDA_ERROR_INVALID_VALUE;
  if (!c.mem->find(ptr)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;  // every operation of the sim backend is already synchronous in effect
}
