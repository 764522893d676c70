// Managed memory of the sim backend: one host-backed range reachable from host and every
// device, charged to the device current at allocation; advice and prefetch are recorded (they
// only move pages on real hardware) and a prefetch occupies its stream for the transfer time.
#include "front/launch/copy_cost.h"
#include "front/driver/entry_points.h"
#include "sim/core/stream_queue.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"
#include "sim/memory/copy.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

VGPU_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::with_context("cuMemAllocManaged", &c); r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || bytesize == 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAllocManaged: null pointer or size 0");
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAllocManaged: flags {:#x} are not GLOBAL or HOST", flags);
  std::shared_ptr<Allocation> a;
  if (CUresult r = c.mem->allocate(AllocKind::managed, c.ctx->device(), bytesize, c.ctx->handle(), &a); r != CUDA_SUCCESS)
    return r;
  *dptr = a->base;
  return CUDA_SUCCESS;
}

namespace {

// The managed allocation holding all of [ptr, ptr + count).
CUresult managed_range(const char* call, const Call& c, CUdeviceptr ptr, size_t count, std::shared_ptr<Allocation>* out) {
  auto a = c.mem->find(ptr);
  if (!a || a->kind != AllocKind::managed || count == 0 || count > a->size - (ptr - a->base))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: {:#x}+{} is not inside one managed allocation", call, ptr, count);
  *out = std::move(a);
  return CUDA_SUCCESS;
}

// A location as a device ordinal, CU_DEVICE_CPU for the host; false when invalid.
bool location_id(const Call& c, CUmemLocation loc, int* id) {
  switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (c.driver->device(loc.id) == nullptr) return false;
      *id = loc.id;
      return true;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: *id = CU_DEVICE_CPU; return true;
    default: return false;
  }
}

std::mutex g_advice_mu;  // advice fields of managed allocations

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Allocation> a;
  if (CUresult r = managed_range("cuMemAdvise", c, devPtr, count, &a); r != CUDA_SUCCESS) return r;
  int id = CU_DEVICE_INVALID;
  const bool needs_location = advice != CU_MEM_ADVISE_SET_READ_MOSTLY && advice != CU_MEM_ADVISE_UNSET_READ_MOSTLY &&
                              advice != CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION;
  if (needs_location && !location_id(c, location, &id))
    return fail(CUDA_ERROR_INVALID_DEVICE, "cuMemAdvise: invalid location");
  std::lock_guard l(g_advice_mu);
  switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: a->read_mostly = 1; break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: a->read_mostly = 0; break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: a->preferred_location = id; break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: a->preferred_location = CU_DEVICE_INVALID; break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY: a->accessed_by.insert(id); break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: a->accessed_by.erase(id); break;
    default: return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAdvise: unknown advice {}", static_cast<int>(advice));
  }
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device) {
  VGPU_CALL_SCOPE();
  CUmemLocation loc{};
  loc.type = device == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = device == CU_DEVICE_CPU ? 0 : device;
  return cuMemAdvise_v2(devPtr, count, advice, loc);
}

namespace {
CUresult prefetch(CUdeviceptr ptr, size_t count, CUmemLocation loc, unsigned int flags, CUstream s, bool per_thread) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a;
  if (CUresult r = managed_range("cuMemPrefetchAsync", c, ptr, count, &a); r != CUDA_SUCCESS) return r;
  int id;
  if (!location_id(c, loc, &id)) return fail(CUDA_ERROR_INVALID_DEVICE, "cuMemPrefetchAsync: invalid location");
  const Device* dev = c.driver->device(id >= 0 ? id : a->device);
  Work w;
  w.kind = Work::Kind::copy;
  w.label = fmt::format("prefetch {} B", count);
  // Pages move over the host link (no network transfer: the pages have one home at a time).
  w.duration_s = copy_seconds(dev->model(), CopyPath::host_device, count, c.driver->cluster().pcie.efficiency);
  w.execute = [a, id] {
    std::lock_guard l(g_advice_mu);
    a->last_prefetch = id;
  };
  return c.driver->stream_queue().submit(s, std::move(w), per_thread);
}
CUmemLocation device_location(CUdevice d) {
  CUmemLocation loc{};
  loc.type = d == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = d == CU_DEVICE_CPU ? 0 : d;
  return loc;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream s) { VGPU_CALL_SCOPE(); return prefetch(p, n, loc, flags, s, false); }
VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream s) { VGPU_CALL_SCOPE(); return prefetch(p, n, loc, flags, s, true); }
VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice d, CUstream s) { VGPU_CALL_SCOPE(); return prefetch(p, n, device_location(d), 0, s, false); }
VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice d, CUstream s) { VGPU_CALL_SCOPE(); return prefetch(p, n, device_location(d), 0, s, true); }

VGPU_EXPORT CUresult CUDAAPI cuMemRangeGetAttribute(void* data, size_t dataSize, CUmem_range_attribute attribute,
                                                    CUdeviceptr devPtr, size_t count) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a;
  if (CUresult r = managed_range("cuMemRangeGetAttribute", c, devPtr, count, &a); r != CUDA_SUCCESS) return r;
  std::lock_guard l(g_advice_mu);
  auto put = [&](int v) -> CUresult {
    if (dataSize != 4) return CUDA_ERROR_INVALID_VALUE;
    *static_cast<int*>(data) = v;
    return CUDA_SUCCESS;
  };
  auto type_of = [](int id) { return id == CU_DEVICE_INVALID ? CU_MEM_LOCATION_TYPE_INVALID : id == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE; };
  switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: return put(a->read_mostly);
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: return put(a->preferred_location);
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: return put(a->last_prefetch);
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: return put(type_of(a->preferred_location));
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: return put(a->preferred_location < 0 ? 0 : a->preferred_location);
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: return put(type_of(a->last_prefetch));
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: return put(a->last_prefetch < 0 ? 0 : a->last_prefetch);
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      if (dataSize % 4 != 0 || dataSize == 0) return CUDA_ERROR_INVALID_VALUE;
      int* out = static_cast<int*>(data);
      const size_t slots = dataSize / 4;
      size_t i = 0;
      for (int d : a->accessed_by) if (i < slots) out[i++] = d;
      for (; i < slots; ++i) out[i] = CU_DEVICE_INVALID;
      return CUDA_SUCCESS;
    }
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

VGPU_EXPORT CUresult CUDAAPI cuMemRangeGetAttributes(void** data, size_t* dataSizes, CUmem_range_attribute* attributes,
                                                     size_t numAttributes, CUdeviceptr devPtr, size_t count) {
  VGPU_CALL_SCOPE();
  if (data == nullptr || dataSizes == nullptr || attributes == nullptr || numAttributes == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < numAttributes; ++i)
    if (CUresult r = cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count); r != CUDA_SUCCESS)
      return r;
  return CUDA_SUCCESS;
}

// cuStreamAttachMemAsync: on a real GPU without concurrent managed access it decides which
// stream may touch the range; with it (every catalog model) it is ordering only. The attachment
// takes effect in stream order, as an op of no duration; the arguments are checked as the real
// driver does: a managed allocation, its whole length (or 0 for all of it), one attach flag, and
// CU_MEM_ATTACH_SINGLE only on a stream of its own.
namespace {
CUresult attach_mem(CUstream s, CUdeviceptr ptr, size_t length, unsigned int flags, bool per_thread) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamAttachMemAsync: flags {:#x}", flags);
  auto a = c.mem->find(ptr);
  if (!a || a->kind != AllocKind::managed || ptr != a->base || (length != 0 && length != a->size))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamAttachMemAsync: {:#x}+{} is not a whole managed allocation", ptr,
                length);
  const bool default_stream = s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
  if (flags == CU_MEM_ATTACH_SINGLE && default_stream)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamAttachMemAsync: CU_MEM_ATTACH_SINGLE needs a stream of its own");
  Work w;
  w.kind = Work::Kind::other;
  w.label = fmt::format("attach {} B", a->size);
  return c.driver->stream_queue().submit(s, std::move(w), per_thread);
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuStreamAttachMemAsync(CUstream s, CUdeviceptr p, size_t n, unsigned int flags) {
  VGPU_CALL_SCOPE();
  return attach_mem(s, p, n, flags, false);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream s, CUdeviceptr p, size_t n, unsigned int flags) {
  VGPU_CALL_SCOPE();
  return attach_mem(s, p, n, flags, true);
}
