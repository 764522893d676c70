// CUDA arrays of the sim backend. An array is charged to its device by the array-size rule
// both backends share (front/memory/array_size.h: the real driver's block-linear layout,
// estimated, in whole 2 MiB pages), so capacity, cuMemGetInfo and CUDA_ERROR_OUT_OF_MEMORY come
// out as under the passthrough. Its host backing stays dense (what copies read and write, through
// copy.cpp): rows of width x texel size; a block-compressed format in rows of 4x4 blocks, a planar
// video format as its luma rows then its chroma rows (array_size.h's dense_shape). Every format
// of cuda.h is accepted; texels are bytes to the sim, it samples none of them.
// A mipmapped array is one such array per level, charged together by the same rule.
#include <algorithm>

#include "front/driver/entry_points.h"
#include "front/memory/array_size.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace {

// The real driver's checks of a descriptor, and bounds on what it can cost and on its dense
// backing (a sparse array is charged nothing but still backed here).
CUresult check(const char* call, const CUDA_ARRAY3D_DESCRIPTOR& d, bool is3d, unsigned levels) {
  if (const char* problem = arrays::descriptor_problem(d, is3d))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: invalid descriptor ({})", call, problem);
  constexpr size_t kHuge = size_t(1) << 40;  // below it, the dense shape's product fits in 128 bits
  if (d.Width >= kHuge || d.Height >= kHuge || d.Depth >= kHuge || arrays::array_charge(d, levels) >= arrays::kTooLarge)
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: array too large", call);
  const arrays::DenseShape shape = arrays::dense_shape(d.Format, d.NumChannels, d.Width, d.Height);
  using u128 = unsigned __int128;
  if (u128(shape.row_bytes) * shape.rows * std::max<size_t>(d.Depth, 1) >= arrays::kTooLarge)
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: array too large", call);
  return CUDA_SUCCESS;
}

// A host-backed array of a checked descriptor in the calling context, not yet charged nor
// registered; nullptr when the host has no memory for it.
std::shared_ptr<ArrayObject> make_array(const Call& c, const CUDA_ARRAY3D_DESCRIPTOR& d) {
  const arrays::DenseShape shape = arrays::dense_shape(d.Format, d.NumChannels, d.Width, d.Height);
  auto arr = std::make_shared<ArrayObject>();
  arr->desc = d;
  arr->element_bytes = std::max<size_t>(arrays::texel_half_bytes(d.Format, d.NumChannels) / 2, 1);
  arr->height = shape.rows;
  arr->depth = d.Depth ? d.Depth : 1;
  arr->row_bytes = shape.row_bytes;
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
  if (CUresult r = check(call, d, is3d, 1); r != CUDA_SUCCESS) return r;
  const uint64_t charged = arrays::array_charge(d, 1);
  Device* dev = c.driver->device(c.ctx->device());
  if (!dev->reserve(charged)) return fail(CUDA_ERROR_OUT_OF_MEMORY, "{}: out of memory on device {}", call, c.ctx->device());
  auto arr = make_array(c, d);
  if (!arr) {
    dev->release(charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  arr->charged = charged;
  c.mem->arrays.add(arr->handle, arr);
  *out = arr->handle;
  return CUDA_SUCCESS;
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
  if (CUresult r = check(call, *p, true, levels); r != CUDA_SUCCESS) return r;
  if (levels == 0 || levels > arrays::max_levels(*p))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: {} levels for a {}x{}x{} array", call, levels, p->Width, p->Height, p->Depth);
  // Charged before the levels' host memory is taken: a refusal costs nothing.
  const uint64_t charged = arrays::array_charge(*p, levels);
  Device* dev = c.driver->device(c.ctx->device());
  if (!dev->reserve(charged)) return fail(CUDA_ERROR_OUT_OF_MEMORY, "{}: out of memory on device {}", call, c.ctx->device());
  auto mip = std::make_shared<MipmapObject>();
  for (unsigned l = 0; l < levels; ++l) {
    auto arr = make_array(c, arrays::level_descriptor(*p, l));
    if (!arr) {
      dev->release(charged);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    arr->mipmap_level = true;
    mip->levels.push_back(std::move(arr));
  }
  mip->device = c.ctx->device();
  mip->ctx = c.ctx->handle();
  mip->charged = charged;
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
