// Entry points of the stream-ordered allocator: default/current pools per device, created pools,
// their attributes, access and trimming, and cuMemAllocAsync / cuMemFreeAsync /
// cuMemAllocFromPoolAsync (with their _ptsz forms). The model is in pool.cpp.
#include <atomic>

#include "front/driver/entry_points.h"
#include "sim/core/stream_queue.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace {

// A live pool: NULL is a bad value, anything else not live a bad handle.
CUresult find_pool(const char* call, const Call& c, CUmemoryPool h, std::shared_ptr<Pool>* out) {
  if (h == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "{}: the pool is NULL", call);
  *out = c.mem->pools.find(h);
  if (!*out) return fail(CUDA_ERROR_INVALID_HANDLE, "{}: {} is not a live memory pool", call, static_cast<void*>(h));
  return CUDA_SUCCESS;
}

CUresult check_device(const char* call, const Call& c, int dev) {
  if (c.driver->device(dev) == nullptr) return fail(CUDA_ERROR_INVALID_DEVICE, "{}: no device {}", call, dev);
  return CUDA_SUCCESS;
}

// The device a location-based pool call (cuMemGetDefaultMemPool, ...) names: only device
// locations of pinned memory have pools in the sim backend.
CUresult location_device(const char* call, const Call& c, const CUmemLocation* loc, CUmemAllocationType type, int* dev) {
  if (loc == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "{}: location is NULL", call);
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: allocation type {} is not PINNED", call, static_cast<int>(type));
  if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "{}: only device locations have pools in the sim backend", call);
  *dev = loc->id;
  return check_device(call, c, *dev);
}

CUresult get_current(const char* call, int dev, CUmemoryPool* out) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "{}: output is NULL", call);
  if (CUresult r = check_device(call, c, dev); r != CUDA_SUCCESS) return r;
  *out = c.mem->current_pool(dev)->handle;
  return CUDA_SUCCESS;
}

CUresult get_default(const char* call, int dev, CUmemoryPool* out) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "{}: output is NULL", call);
  if (CUresult r = check_device(call, c, dev); r != CUDA_SUCCESS) return r;
  *out = c.mem->default_pool_handles[dev];
  return CUDA_SUCCESS;
}

CUresult set_current(const char* call, int dev, CUmemoryPool h) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (CUresult r = check_device(call, c, dev); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Pool> p;
  if (CUresult r = find_pool(call, c, h, &p); r != CUDA_SUCCESS) return r;
  if (p->device != dev)
    return fail(CUDA_ERROR_INVALID_DEVICE, "{}: the pool belongs to device {}, not {}", call, p->device, dev);
  std::lock_guard l(c.mem->current_pool_mu);
  c.mem->current_pools[dev] = h;
  return CUDA_SUCCESS;
}

// cuMemAllocAsync (pool_h NULL: the current pool of the stream's device) and
// cuMemAllocFromPoolAsync. The memory is usable at once: every later op on the stream follows.
CUresult alloc_async(const char* call, CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool_h, bool from_pool,
                     CUstream stream, bool per_thread) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || bytes == 0) return fail(CUDA_ERROR_INVALID_VALUE, "{}: null pointer or size 0", call);
  int dev = 0;
  if (CUresult r = c.driver->stream_queue().device_of(stream, per_thread, &dev); r != CUDA_SUCCESS)
    return fail(r, "{}: stream {} is not usable", call, static_cast<void*>(stream));
  std::shared_ptr<Pool> pool;
  if (from_pool) {
    if (CUresult r = find_pool(call, c, pool_h, &pool); r != CUDA_SUCCESS) return r;
  } else {
    pool = c.mem->current_pool(dev);
  }
  if (pool->imported_from != 0)  // another process's pool: its pointers are imported, not allocated
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: the pool was imported from another process", call);
  std::shared_ptr<Allocation> a;
  if (CUresult r = c.mem->pool_allocate(pool, bytes, &a); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_INVALID_HANDLE) return fail(r, "{}: the pool was destroyed", call);
    return r;
  }
  *dptr = a->base;
  return CUDA_SUCCESS;
}

// cuMemFreeAsync: the allocation leaves the address index now (a second free is an error) and
// its memory goes back in stream order. Plain cuMemAlloc memory is accepted too and freed in
// stream order. Inside a graph the free may run once per launch: only the first one counts.
CUresult free_async(const char* call, CUdeviceptr dptr, CUstream stream, bool per_thread) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (dptr == 0) return fail(CUDA_ERROR_INVALID_VALUE, "{}: pointer is NULL", call);
  int dev = 0;
  if (CUresult r = c.driver->stream_queue().device_of(stream, per_thread, &dev); r != CUDA_SUCCESS)
    return fail(r, "{}: stream {} is not usable", call, static_cast<void*>(stream));
  auto a = c.mem->index_remove(dptr, [](const Allocation& x) {
    return x.kind == AllocKind::pool || x.kind == AllocKind::device;
  });
  if (!a) return fail(CUDA_ERROR_INVALID_VALUE, "{}: {:#x} is not the start of a live device allocation", call, dptr);
  Work w;
  w.kind = Work::Kind::other;
  w.label = fmt::format("free {} B", a->size);
  auto once = std::make_shared<std::atomic<bool>>(false);
  MemoryManager::Impl* mem = c.mem;
  if (a->kind == AllocKind::pool) {
    w.execute = [mem, once, pool = a->pool_owner, block = a->pool_block, mapping = a->mapping] {
      if (!once->exchange(true)) mem->pool_return(pool, block, mapping);
    };
  } else {
    w.execute = [mem, once, a] {
      if (!once->exchange(true)) mem->uncharge(*a);
    };
  }
  if (CUresult r = c.driver->stream_queue().submit(stream, std::move(w), per_thread); r != CUDA_SUCCESS) {
    c.mem->index_add(a);  // nothing lost: the allocation stays live
    return fail(r, "{}: could not queue the free on stream {}", call, static_cast<void*>(stream));
  }
  return CUDA_SUCCESS;
}

}  // namespace

// ---- pools of a device ---------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  VGPU_CALL_SCOPE();
  return get_default("cuDeviceGetDefaultMemPool", dev, pool_out);
}
VGPU_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  VGPU_CALL_SCOPE();
  return get_current("cuDeviceGetMemPool", dev, pool);
}
VGPU_EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  VGPU_CALL_SCOPE();
  return set_current("cuDeviceSetMemPool", dev, pool);
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location, CUmemAllocationType type) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  int dev = 0;
  if (CUresult r = location_device("cuMemGetDefaultMemPool", c, location, type, &dev); r != CUDA_SUCCESS) return r;
  return get_default("cuMemGetDefaultMemPool", dev, pool_out);
}
VGPU_EXPORT CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool* pool_out, CUmemLocation* location, CUmemAllocationType type) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  int dev = 0;
  if (CUresult r = location_device("cuMemGetMemPool", c, location, type, &dev); r != CUDA_SUCCESS) return r;
  return get_current("cuMemGetMemPool", dev, pool_out);
}
VGPU_EXPORT CUresult CUDAAPI cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  int dev = 0;
  if (CUresult r = location_device("cuMemSetMemPool", c, location, type, &dev); r != CUDA_SUCCESS) return r;
  return set_current("cuMemSetMemPool", dev, pool);
}

// ---- created pools ----------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (pool == nullptr || props == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolCreate: null pointer");
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolCreate: allocType {} is not PINNED", static_cast<int>(props->allocType));
  if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuMemPoolCreate: only device locations are supported by the sim backend");
  if (CUresult r = check_device("cuMemPoolCreate", c, props->location.id); r != CUDA_SUCCESS) return r;
  const unsigned known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
  if (static_cast<unsigned>(props->handleTypes) & ~known)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolCreate: handle types {:#x} are not supported on Linux",
                static_cast<unsigned>(props->handleTypes));
  for (unsigned char b : props->reserved)
    if (b != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolCreate: reserved bytes must be zero");
  auto p = std::make_shared<Pool>();
  p->device = props->location.id;
  p->props = *props;
  p->handle = mint_handle<CUmemoryPool>(HandleKind::mem_pool);
  c.mem->pools.add(p->handle, p);
  *pool = p->handle;
  return CUDA_SUCCESS;
}

// Returns at once; blocks still in use are given back to the device as they are freed.
VGPU_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Pool> p;
  if (CUresult r = find_pool("cuMemPoolDestroy", c, pool, &p); r != CUDA_SUCCESS) return r;
  if (p->is_default) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolDestroy: a device's default pool cannot be destroyed");
  if (!c.mem->pools.remove(pool)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuMemPoolDestroy: pool already destroyed");
  {
    std::lock_guard l(p->mu);
    p->destroyed = true;
    c.mem->pool_trim_locked(*p, 0);
  }
  // A device whose current pool this was draws from its default pool again.
  std::lock_guard l(c.mem->current_pool_mu);
  for (size_t d = 0; d < c.mem->current_pools.size(); ++d)
    if (c.mem->current_pools[d] == pool) c.mem->current_pools[d] = c.mem->default_pool_handles[d];
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Pool> p;
  if (CUresult r = find_pool("cuMemPoolTrimTo", c, pool, &p); r != CUDA_SUCCESS) return r;
  std::lock_guard l(p->mu);
  c.mem->pool_trim_locked(*p, minBytesToKeep);
  return CUDA_SUCCESS;
}

// ---- attributes --------------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Pool> p;
  if (CUresult r = find_pool("cuMemPoolSetAttribute", c, pool, &p); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAttribute: value is NULL");
  const int as_int = attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES ? *static_cast<const int*>(value) : 0;
  std::lock_guard l(p->mu);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: p->follow_event_deps = as_int != 0; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->allow_opportunistic = as_int != 0; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->allow_internal_deps = as_int != 0; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->release_threshold = *static_cast<const cuuint64_t*>(value); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
      // A high watermark can only be reset (to the current value), by setting 0.
      if (*static_cast<const cuuint64_t*>(value) != 0)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAttribute: a high watermark can only be reset with 0");
      if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) p->reserved_high = p->reserved;
      else p->used_high = p->used;
      return CUDA_SUCCESS;
    }
    default:
      return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAttribute: attribute {} cannot be set", static_cast<int>(attr));
  }
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Pool> p;
  if (CUresult r = find_pool("cuMemPoolGetAttribute", c, pool, &p); r != CUDA_SUCCESS) return r;
  if (value == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolGetAttribute: value is NULL");
  auto put_int = [&](int v) { *static_cast<int*>(value) = v; return CUDA_SUCCESS; };
  auto put_u64 = [&](uint64_t v) { *static_cast<cuuint64_t*>(value) = v; return CUDA_SUCCESS; };
  std::lock_guard l(p->mu);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: return put_int(p->follow_event_deps);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: return put_int(p->allow_opportunistic);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: return put_int(p->allow_internal_deps);
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: return put_u64(p->release_threshold);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: return put_u64(p->reserved);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: return put_u64(p->reserved_high);
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: return put_u64(p->used);
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: return put_u64(p->used_high);
    default:
      return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolGetAttribute: unknown attribute {}", static_cast<int>(attr));
  }
}

// ---- access ------------------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Pool> p;
  if (CUresult r = find_pool("cuMemPoolSetAccess", c, pool, &p); r != CUDA_SUCCESS) return r;
  if (map == nullptr && count != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAccess: map is NULL");
  // Validate every entry before changing anything.
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& d = map[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
      return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAccess: entry {} is not a device location", i);
    if (CUresult r = check_device("cuMemPoolSetAccess", c, d.location.id); r != CUDA_SUCCESS) return r;
    if (d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d.flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAccess: entry {} has unknown flags {}", i, static_cast<int>(d.flags));
    if (d.location.id == p->device && d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAccess: the pool's own device always has read-write access");
  }
  std::lock_guard l(p->mu);
  for (size_t i = 0; i < count; ++i)
    if (map[i].location.id != p->device) p->access[map[i].location.id] = map[i].flags;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool pool, CUmemLocation* location) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Pool> p;
  if (CUresult r = find_pool("cuMemPoolGetAccess", c, pool, &p); r != CUDA_SUCCESS) return r;
  if (flags == nullptr || location == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolGetAccess: null pointer");
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolGetAccess: not a device location");
  if (CUresult r = check_device("cuMemPoolGetAccess", c, location->id); r != CUDA_SUCCESS) return r;
  std::lock_guard l(p->mu);
  if (location->id == p->device) {
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  } else {
    auto it = p->access.find(location->id);
    *flags = it == p->access.end() ? CU_MEM_ACCESS_FLAGS_PROT_NONE : it->second;
  }
  return CUDA_SUCCESS;
}

// ---- stream-ordered allocation -----------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  VGPU_CALL_SCOPE();
  return alloc_async("cuMemAllocAsync", dptr, bytesize, nullptr, false, hStream, false);
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  VGPU_CALL_SCOPE();
  return alloc_async("cuMemAllocAsync", dptr, bytesize, nullptr, false, hStream, true);
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  VGPU_CALL_SCOPE();
  return alloc_async("cuMemAllocFromPoolAsync", dptr, bytesize, pool, true, hStream, false);
}
VGPU_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  VGPU_CALL_SCOPE();
  return alloc_async("cuMemAllocFromPoolAsync", dptr, bytesize, pool, true, hStream, true);
}
VGPU_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  VGPU_CALL_SCOPE();
  return free_async("cuMemFreeAsync", dptr, hStream, false);
}
VGPU_EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  VGPU_CALL_SCOPE();
  return free_async("cuMemFreeAsync", dptr, hStream, true);
}
