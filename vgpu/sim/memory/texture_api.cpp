// Texture and surface objects of the sim backend: created from a resource (an array, a
// mipmapped array, linear or pitched device memory) with the real driver's checks, kept with
// their descriptors for the Get*Desc queries, destroyed once. Kernels that sample them do not
// execute on the sim backend, so nothing else is needed.
#include <cstring>

#include "front/driver/entry_points.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"

using namespace vgpu;
using vgpu::sim::Call;
using vgpu::sim::fail;

namespace {

// The resource must name something live of this process; CUDA_ERROR_INVALID_VALUE otherwise
// (the real driver's answer for a bad descriptor).
CUresult check_resource(const char* call, const Call& c, const CUDA_RESOURCE_DESC& r, bool surface) {
  switch (r.resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
      auto a = c.mem->arrays.find(r.res.array.hArray);
      if (!a) return fail(CUDA_ERROR_INVALID_VALUE, "{}: not a live array", call);
      if (surface && (a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST) == 0)
        return fail(CUDA_ERROR_INVALID_VALUE, "{}: the array was not created with CUDA_ARRAY3D_SURFACE_LDST", call);
      return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      if (surface || !c.mem->mipmaps.find(r.res.mipmap.hMipmappedArray))
        return fail(CUDA_ERROR_INVALID_VALUE, "{}: not a live mipmapped array", call);
      return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_LINEAR:
      if (surface || r.res.linear.sizeInBytes == 0 || !c.mem->covers(r.res.linear.devPtr, r.res.linear.sizeInBytes, nullptr))
        return fail(CUDA_ERROR_INVALID_VALUE, "{}: linear resource is not device memory", call);
      return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_PITCH2D: {
      const auto& p = r.res.pitch2D;
      if (surface || p.width == 0 || p.height == 0 || p.pitchInBytes == 0 ||
          !c.mem->covers(p.devPtr, p.pitchInBytes * p.height, nullptr))
        return fail(CUDA_ERROR_INVALID_VALUE, "{}: pitched resource is not device memory", call);
      return CUDA_SUCCESS;
    }
  }
  return fail(CUDA_ERROR_INVALID_VALUE, "{}: unknown resource type {}", call, static_cast<int>(r.resType));
}

template <class Out>
CUresult create(const char* call, Out* out, const CUDA_RESOURCE_DESC* res, const CUDA_TEXTURE_DESC* tex,
                const CUDA_RESOURCE_VIEW_DESC* view, bool surface) {
  Call c;
  if (CUresult r = sim::with_context(call, &c); r != CUDA_SUCCESS) return r;
  if (out == nullptr || res == nullptr || (!surface && tex == nullptr))
    return fail(CUDA_ERROR_INVALID_VALUE, "{}: null argument", call);
  if (CUresult r = check_resource(call, c, *res, surface); r != CUDA_SUCCESS) return r;
  auto t = std::make_shared<TextureObject>();
  t->surface = surface;
  t->res = *res;
  if (tex) t->tex = *tex;
  if (view) t->view = *view, t->has_view = true;
  t->ctx = c.ctx->handle();
  void* handle = mint_handle<void*>(surface ? HandleKind::surface : HandleKind::texture);
  c.mem->textures.add(handle, t);
  *out = reinterpret_cast<Out>(handle);
  return CUDA_SUCCESS;
}

// The object of `handle` if it is live and of the right kind.
std::shared_ptr<TextureObject> find(const Call& c, unsigned long long handle, bool surface) {
  auto t = c.mem->textures.find(reinterpret_cast<const void*>(handle));
  return t && t->surface == surface ? t : nullptr;
}

CUresult destroy(const char* call, unsigned long long handle, bool surface) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (!find(c, handle, surface)) return fail(CUDA_ERROR_INVALID_VALUE, "{}: not a live object", call);
  c.mem->textures.remove(reinterpret_cast<const void*>(handle));
  return CUDA_SUCCESS;
}

template <class T, class Get>
CUresult describe(const char* call, T* out, unsigned long long handle, bool surface, Get get) {
  Call c;
  if (CUresult r = sim::begin(&c); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "{}: null output", call);
  auto t = find(c, handle, surface);
  if (!t) return fail(CUDA_ERROR_INVALID_VALUE, "{}: not a live object", call);
  return get(*t, out);
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuTexObjectCreate(CUtexObject* pTexObject, const CUDA_RESOURCE_DESC* pResDesc,
                                               const CUDA_TEXTURE_DESC* pTexDesc,
                                               const CUDA_RESOURCE_VIEW_DESC* pResViewDesc) {
  VGPU_CALL_SCOPE();
  return create("cuTexObjectCreate", pTexObject, pResDesc, pTexDesc, pResViewDesc, false);
}
VGPU_EXPORT CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject) {
  VGPU_CALL_SCOPE();
  return destroy("cuTexObjectDestroy", texObject, false);
}
VGPU_EXPORT CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc, CUtexObject texObject) {
  VGPU_CALL_SCOPE();
  return describe("cuTexObjectGetResourceDesc", pResDesc, texObject, false,
                  [](const TextureObject& t, CUDA_RESOURCE_DESC* o) { *o = t.res; return CUDA_SUCCESS; });
}
VGPU_EXPORT CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC* pTexDesc, CUtexObject texObject) {
  VGPU_CALL_SCOPE();
  return describe("cuTexObjectGetTextureDesc", pTexDesc, texObject, false,
                  [](const TextureObject& t, CUDA_TEXTURE_DESC* o) { *o = t.tex; return CUDA_SUCCESS; });
}
VGPU_EXPORT CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC* pResViewDesc, CUtexObject texObject) {
  VGPU_CALL_SCOPE();
  return describe("cuTexObjectGetResourceViewDesc", pResViewDesc, texObject, false,
                  [](const TextureObject& t, CUDA_RESOURCE_VIEW_DESC* o) {
                    if (!t.has_view) return CUDA_ERROR_INVALID_VALUE;  // created without a view
                    *o = t.view;
                    return CUDA_SUCCESS;
                  });
}
VGPU_EXPORT CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject* pSurfObject, const CUDA_RESOURCE_DESC* pResDesc) {
  VGPU_CALL_SCOPE();
  return create("cuSurfObjectCreate", pSurfObject, pResDesc, nullptr, nullptr, true);
}
VGPU_EXPORT CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject) {
  VGPU_CALL_SCOPE();
  return destroy("cuSurfObjectDestroy", surfObject, true);
}
VGPU_EXPORT CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc, CUsurfObject surfObject) {
  VGPU_CALL_SCOPE();
  return describe("cuSurfObjectGetResourceDesc", pResDesc, surfObject, true,
                  [](const TextureObject& t, CUDA_RESOURCE_DESC* o) { *o = t.res; return CUDA_SUCCESS; });
}
