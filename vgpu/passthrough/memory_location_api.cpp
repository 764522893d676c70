// Entry points that name a device inside a CUmemLocation and are otherwise the real driver's:
// advice, prefetches (single and batched) and access queries. The virtual ordinal becomes the
// physical one; the range attributes that answer with device ordinals turn them back. (The VMM and pool entry points that take locations are in memory_api.cpp and
// pool_api.cpp.)
#include "front/driver/cuda_api.h"
#include "passthrough/memory_location.h"
#include "passthrough/passthrough_state.h"

using vgpu::pt::call_real;
using vgpu::pt::to_physical;

namespace {

using Batch = CUresult (*)(CUdeviceptr*, size_t*, size_t, CUmemLocation*, size_t*, size_t, unsigned long long,
                           CUstream);

CUresult batch(Batch real, CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* locs, size_t* loc_idx,
               size_t n_locs, unsigned long long flags, CUstream stream) {
  std::vector<CUmemLocation> phys = to_physical(locs, n_locs);
  return call_real(real, dptrs, sizes, count, locs ? phys.data() : nullptr, loc_idx, n_locs, flags, stream);
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t count, CUmem_advise advice, CUmemLocation location) {
  return call_real(VGPU_REAL("cuMemAdvise_v2", CUresult (*)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation)), p,
                 count, advice, to_physical(location));
}

VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t count, CUmemLocation location,
                                                   unsigned int flags, CUstream stream) {
  return call_real(VGPU_REAL("cuMemPrefetchAsync_v2", CUresult (*)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream)), p,
                 count, to_physical(location), flags, stream);
}

VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t count, CUmemLocation location,
                                                        unsigned int flags, CUstream stream) {
  return call_real(VGPU_REAL("cuMemPrefetchAsync_v2_ptsz", CUresult (*)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream)), p,
                 count, to_physical(location), flags, stream);
}

VGPU_EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr p) {
  using Fn = CUresult (*)(unsigned long long*, const CUmemLocation*, CUdeviceptr);
  if (location == nullptr) return call_real(VGPU_REAL("cuMemGetAccess", Fn), flags, location, p);
  const CUmemLocation phys = to_physical(*location);
  return call_real(VGPU_REAL("cuMemGetAccess", Fn), flags, &phys, p);
}

VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                     CUmemLocation* locs, size_t* loc_idx, size_t n_locs,
                                                     unsigned long long flags, CUstream stream) {
  return batch(VGPU_REAL("cuMemPrefetchBatchAsync", Batch), dptrs, sizes, count, locs, loc_idx, n_locs, flags, stream);
}

VGPU_EXPORT CUresult CUDAAPI cuMemPrefetchBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                          CUmemLocation* locs, size_t* loc_idx, size_t n_locs,
                                                          unsigned long long flags, CUstream stream) {
  return batch(VGPU_REAL("cuMemPrefetchBatchAsync_ptsz", Batch), dptrs, sizes, count, locs, loc_idx, n_locs, flags, stream);
}

VGPU_EXPORT CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                               CUmemLocation* locs, size_t* loc_idx,
                                                               size_t n_locs, unsigned long long flags,
                                                               CUstream stream) {
  return batch(VGPU_REAL("cuMemDiscardAndPrefetchBatchAsync", Batch), dptrs, sizes, count, locs, loc_idx, n_locs, flags, stream);
}

VGPU_EXPORT CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes,
                                                                    size_t count, CUmemLocation* locs,
                                                                    size_t* loc_idx, size_t n_locs,
                                                                    unsigned long long flags, CUstream stream) {
  return batch(VGPU_REAL("cuMemDiscardAndPrefetchBatchAsync_ptsz", Batch), dptrs, sizes, count, locs, loc_idx, n_locs, flags,
               stream);
}

// ---- range attributes: the devices they report are physical, shown as virtual ----

namespace {

using RangeAttr = CUresult (*)(void*, size_t, CUmem_range_attribute, CUdeviceptr, size_t);

// A device ordinal (>= 0; CU_DEVICE_CPU and CU_DEVICE_INVALID are negative and stay) made virtual.
void to_virtual(int* id) {
  if (*id < 0) return;
  if (const vgpu::pt::PassState* s = vgpu::pt::PassState::get())
    if (const int v = s->virtual_of_physical(*id); v >= 0) *id = v;
}

// The _TYPE attribute that says whether an _ID attribute names a device.
bool id_names_device(RangeAttr real, CUmem_range_attribute type_attr, CUdeviceptr p, size_t count) {
  int type = 0;
  return real(&type, sizeof type, type_attr, p, count) == CUDA_SUCCESS && type == CU_MEM_LOCATION_TYPE_DEVICE;
}

// Makes the device ordinals in one attribute's answer virtual.
void answer_to_virtual(RangeAttr real, void* data, size_t size, CUmem_range_attribute attr, CUdeviceptr p,
                       size_t count) {
  int* ids = static_cast<int*>(data);
  switch (attr) {
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      if (size >= sizeof(int)) to_virtual(ids);
      break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
      for (size_t i = 0; i < size / sizeof(int); ++i) to_virtual(&ids[i]);
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
      if (size >= sizeof(int) && id_names_device(real, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, count))
        to_virtual(ids);
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
      if (size >= sizeof(int) && id_names_device(real, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, p, count))
        to_virtual(ids);
      break;
    default:
      break;
  }
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemRangeGetAttribute(void* data, size_t size, CUmem_range_attribute attr, CUdeviceptr p,
                                                    size_t count) {
  const RangeAttr real = VGPU_REAL("cuMemRangeGetAttribute", RangeAttr);
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult r = real(data, size, attr, p, count);
  if (r == CUDA_SUCCESS && data != nullptr) answer_to_virtual(real, data, size, attr, p, count);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuMemRangeGetAttributes(void** data, size_t* sizes, CUmem_range_attribute* attrs,
                                                     size_t n, CUdeviceptr p, size_t count) {
  using RangeAttrs = CUresult (*)(void**, size_t*, CUmem_range_attribute*, size_t, CUdeviceptr, size_t);
  const RangeAttrs real = VGPU_REAL("cuMemRangeGetAttributes", RangeAttrs);
  const RangeAttr one = VGPU_REAL("cuMemRangeGetAttribute", RangeAttr);
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult r = real(data, sizes, attrs, n, p, count);
  if (r != CUDA_SUCCESS || data == nullptr || sizes == nullptr || attrs == nullptr || one == nullptr) return r;
  for (size_t i = 0; i < n; ++i)
    if (data[i] != nullptr) answer_to_virtual(one, data[i], sizes[i], attrs[i], p, count);
  return r;
}
