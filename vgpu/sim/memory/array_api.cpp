// CUDA arrays of the sim backend: a linear host-backed buffer (rows of width * element bytes),
// charged to the device like any allocation. 2D/3D copies address them through copy.cpp.
// A mipmapped array is one such array per level, charged together.
#include <algorithm>

#include "front/driver/entry_points.h"
#include "sim/exec/virtual_clock.h"
#include "sim/memory/api_util.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace {

size_t format_bytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

// The real driver's checks of a descriptor; the bytes of one element through `element_bytes`.
CUresult check(const char* call, const CUDA_ARRAY3D_DESCRIPTOR& d, bool is3d, size_t* element_bytes) {
  const size_t fb = format_bytes(d.Format);
  if (fb == 0 || (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4) || d.Width == 0 ||
      (is3d && d.Depth > 0 && d.Height == 0 && !(d.Flags & CUDA_ARRAY3D_LAYERED)))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: invalid descriptor", call);
  *element_bytes = fb * d.NumChannels;
  using u128 = unsigned __int128;
  if (u128(d.Width) * *element_bytes * std::max<size_t>(d.Height, 1) * std::max<size_t>(d.Depth, 1) > (u128(1) << 62))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: array too large", call);
  return CUDA_SUCCESS;
}

// A host-backed array of a checked descriptor in the calling context, not yet charged nor
// registered; nullptr when the host has no memory for it.
std::shared_ptr<ArrayObject> make_array(const Call& c, const CUDA_ARRAY3D_DESCRIPTOR& d, size_t element_bytes) {
  auto arr = std::make_shared<ArrayObject>();
  arr->desc = d;
  arr->element_bytes = element_bytes;
  arr->height = d.Height ? d.Height : 1;
  arr->depth = d.Depth ? d.Depth : 1;
  arr->row_bytes = d.Width * element_bytes;
  arr->device = c.ctx->device();
  arr->ctx = c.ctx->handle();
  arr->mapping = HostMapping::create(arr->bytes());
  if (!arr->mapping) return nullptr;
  arr->handle = mint_handle<CUarray>(HandleKind::array);
  return arr;
}

CUresult create(const char* call, CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& d, bool is3d) {
  Call c;
  if (CUresult r = sim::with_context(call, &c); r != CUDA_SUCCESS) return r;
  size_t element_bytes = 0;
  if (CUresult r = check(call, d, is3d, &element_bytes); r != CUDA_SUCCESS) return r;
  using u128 = unsigned __int128;
  const uint64_t bytes = static_cast<uint64_t>(u128(d.Width) * element_bytes * std::max<size_t>(d.Height, 1) *
                                               std::max<size_t>(d.Depth, 1));
  const uint64_t charged = round_up(bytes, kGranularity);
  Device* dev = c.driver->device(c.ctx->device());
  if (!dev->reserve(charged)) return fail(CUDA_ERROR_OUT_OF_MEMORY, "{}: out of memory on device {}", call, c.ctx->device());
  auto arr = make_array(c, d, element_bytes);
  if (!arr) {
    dev->release(charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  arr->charged = charged;
  c.mem->arrays.add(arr->handle, arr);
  *out = arr->handle;
  return CUDA_SUCCESS;
}

// Level `l` of a mipmapped array: each dimension halved per level, down to 1; layers and
// cubemap faces are not levels of detail and stay.
CUDA_ARRAY3D_DESCRIPTOR level_descriptor(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned l) {
  auto shrink = [l](size_t n) -> size_t { return n == 0 ? 0 : std::max<size_t>(n >> l, 1); };
  CUDA_ARRAY3D_DESCRIPTOR out = d;
  out.Width = shrink(d.Width);
  out.Height = shrink(d.Height);
  if (!(d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP))) out.Depth = shrink(d.Depth);
  return out;
}

// How many levels a mipmap of these dimensions can have: down to 1 x 1 x 1.
unsigned max_levels(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  size_t largest = std::max<size_t>(d.Width, d.Height);
  if (!(d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP))) largest = std::max<size_t>(largest, d.Depth);
  unsigned n = 1;
  while (largest >>= 1) ++n;
  return n;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* p) {
  VGPU_CALL_SCOPE();
  if (pHandle == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = p->Width; d.Height = p->Height; d.Depth = 0; d.Format = p->Format; d.NumChannels = p->NumChannels;
  return create("cuArrayCreate", pHandle, d, false);
}
VGPU_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* p) {
  VGPU_CALL_SCOPE();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY_DESCRIPTOR d{p->Width, p->Height, p->Format, p->NumChannels};
  return cuArrayCreate_v2(pHandle, &d);
}
VGPU_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* p) {
  VGPU_CALL_SCOPE();
  if (pHandle == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return create("cuArray3DCreate", pHandle, *p, true);
}
VGPU_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* p) {
  VGPU_CALL_SCOPE();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d{p->Width, p->Height, p->Depth, p->Format, p->NumChannels, p->Flags};
  return cuArray3DCreate_v2(pHandle, &d);
}

VGPU_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray h) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  auto level = c.mem->arrays.find(h);
  if (level && level->mipmap_level)
    return fail(CUDA_ERROR_INVALID_HANDLE, "cuArrayDestroy: {} is a level of a mipmapped array", static_cast<void*>(h));
  auto arr = c.mem->arrays.remove(h);
  if (!arr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuArrayDestroy: {} is not a live array", static_cast<void*>(h));
  if (Device* dev = c.driver->device(arr->device)) dev->release(arr->charged);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* p,
                                                    unsigned int levels) {
  VGPU_CALL_SCOPE();
  if (pHandle == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  constexpr const char* call = "cuMipmappedArrayCreate";
  Call c;
  if (CUresult r = sim::with_context(call, &c); r != CUDA_SUCCESS) return r;
  size_t element_bytes = 0;
  if (CUresult r = check(call, *p, true, &element_bytes); r != CUDA_SUCCESS) return r;
  if (levels == 0 || levels > max_levels(*p))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} levels for a {}x{}x{} array", call, levels, p->Width, p->Height, p->Depth);
  auto mip = std::make_shared<MipmapObject>();
  uint64_t bytes = 0;
  for (unsigned l = 0; l < levels; ++l) {
    auto arr = make_array(c, level_descriptor(*p, l), element_bytes);
    if (!arr) return CUDA_ERROR_OUT_OF_MEMORY;
    arr->mipmap_level = true;
    bytes += arr->bytes();
    mip->levels.push_back(std::move(arr));
  }
  mip->device = c.ctx->device();
  mip->ctx = c.ctx->handle();
  mip->charged = round_up(bytes, kGranularity);
  Device* dev = c.driver->device(mip->device);
  if (!dev->reserve(mip->charged)) return fail(CUDA_ERROR_OUT_OF_MEMORY, "{}: out of memory on device {}", call, mip->device);
  mip->handle = mint_handle<CUmipmappedArray>(HandleKind::other);
  for (auto& arr : mip->levels) c.mem->arrays.add(arr->handle, arr);
  c.mem->mipmaps.add(mip->handle, mip);
  *pHandle = mip->handle;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray* level, CUmipmappedArray h, unsigned int index) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (level == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto mip = c.mem->mipmaps.find(h);
  if (!mip) return fail(CUDA_ERROR_INVALID_HANDLE, "cuMipmappedArrayGetLevel: {} is not a live mipmapped array", static_cast<void*>(h));
  if (index >= mip->levels.size())
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMipmappedArrayGetLevel: level {} of {}", index, mip->levels.size());
  *level = mip->levels[index]->handle;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray h) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  auto mip = c.mem->mipmaps.remove(h);
  if (!mip) return fail(CUDA_ERROR_INVALID_HANDLE, "cuMipmappedArrayDestroy: {} is not a live mipmapped array", static_cast<void*>(h));
  for (auto& arr : mip->levels) c.mem->arrays.remove(arr->handle);
  if (Device* dev = c.driver->device(mip->device)) dev->release(mip->charged);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* out, CUarray h) {
  VGPU_CALL_SCOPE();
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto arr = c.mem->arrays.find(h);
  if (!arr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuArray3DGetDescriptor: {} is not a live array", static_cast<void*>(h));
  *out = arr->desc;
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR_v1* out, CUarray h) {
  VGPU_CALL_SCOPE();
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d;
  if (CUresult r = cuArray3DGetDescriptor_v2(&d, h); r != CUDA_SUCCESS) return r;
  *out = {static_cast<unsigned int>(d.Width), static_cast<unsigned int>(d.Height), static_cast<unsigned int>(d.Depth),
          d.Format, d.NumChannels, d.Flags};
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* out, CUarray h) {
  VGPU_CALL_SCOPE();
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d;
  if (CUresult r = cuArray3DGetDescriptor_v2(&d, h); r != CUDA_SUCCESS) return r;
  if (d.Depth > 0) return CUDA_ERROR_INVALID_HANDLE;  // a 3D array has no 2D descriptor
  *out = {d.Width, d.Height, d.Format, d.NumChannels};
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR_v1* out, CUarray h) {
  VGPU_CALL_SCOPE();
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY_DESCRIPTOR d;
  if (CUresult r = cuArrayGetDescriptor_v2(&d, h); r != CUDA_SUCCESS) return r;
  *out = {static_cast<unsigned int>(d.Width), static_cast<unsigned int>(d.Height), d.Format, d.NumChannels};
  return CUDA_SUCCESS;
}
