// CUDA arrays of the sim backend: a linear host-backed buffer (rows of width * element bytes),
// charged to the device like any allocation. 2D/3D copies address them through copy.cpp.
#include "driver/entry_points.h"
#include "exec/virtual_clock.h"
#include "sim/api_util.h"

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

CUresult create(const char* call, CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& d, bool is3d) {
  Call c;
  if (CUresult r = sim::with_context(call, &c); r != CUDA_SUCCESS) return r;
  const size_t fb = format_bytes(d.Format);
  if (fb == 0 || (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4) || d.Width == 0 ||
      (is3d && d.Depth > 0 && d.Height == 0 && !(d.Flags & CUDA_ARRAY3D_LAYERED)))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: invalid descriptor", call);
  auto arr = std::make_shared<ArrayObject>();
  arr->desc = d;
  arr->element_bytes = fb * d.NumChannels;
  arr->height = d.Height ? d.Height : 1;
  arr->depth = d.Depth ? d.Depth : 1;
  using u128 = unsigned __int128;
  if (u128(d.Width) * arr->element_bytes * arr->height * arr->depth > (u128(1) << 62))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: array too large", call);
  arr->row_bytes = d.Width * arr->element_bytes;
  arr->device = c.ctx->device();
  arr->ctx = c.ctx->handle();
  arr->charged = round_up(arr->bytes(), kGranularity);
  Device* dev = c.driver->device(arr->device);
  if (!dev->reserve(arr->charged)) return fail(CUDA_ERROR_OUT_OF_MEMORY, "{}: out of memory on device {}", call, arr->device);
  arr->mapping = HostMapping::create(arr->bytes());
  if (!arr->mapping) {
    dev->release(arr->charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  arr->handle = mint_handle<CUarray>(HandleKind::array);
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
  auto arr = c.mem->arrays.remove(h);
  if (!arr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuArrayDestroy: {} is not a live array", static_cast<void*>(h));
  if (Device* dev = c.driver->device(arr->device)) dev->release(arr->charged);
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
