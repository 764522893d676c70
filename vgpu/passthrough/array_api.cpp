// CUDA arrays under the passthrough backend: each array (and mipmapped array) is the real
// driver's, made in the virtual device's real context, and is first charged to the virtual
// device like any other allocation (memory_api.cpp), so a virtual device refuses an array with
// CUDA_ERROR_OUT_OF_MEMORY past its capacity, and destroying it gives the bytes back.
//
// What an array costs is the array-size rule both backends share (front/memory/array_size.h):
// an estimate of the real driver's block-linear layout in whole 2 MiB pages, nothing for sparse
// and deferred-mapping arrays.
#include "passthrough/array_api.h"

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "front/memory/array_size.h"
#include "passthrough/passthrough_state.h"

using vgpu::pt::PassState;

namespace {

using vgpu::arrays::array_charge;

// The charge of each live array vgpu charged, by real handle (CUarray or CUmipmappedArray),
// so that destroying it (or its context) gives exactly that back to its virtual device.
class ArrayCharges {
 public:
  struct Charge {
    int device = -1;
    uint64_t bytes = 0;
    CUcontext ctx = nullptr;
  };
  static ArrayCharges& get() {
    static ArrayCharges* charges = new ArrayCharges;  // never destroyed: arrays outlive exit handlers
    return *charges;
  }
  void add(const void* handle, const Charge& c) {
    std::lock_guard l(mu_);
    charges_[handle] = c;
  }
  // Takes the charge out before the real destroy (which frees the handle value for reuse by
  // another thread's create); put back with add() if the real driver refuses.
  bool take(const void* handle, Charge* out) {
    std::lock_guard l(mu_);
    auto it = charges_.find(handle);
    if (it == charges_.end()) return false;
    *out = it->second;
    charges_.erase(it);
    return true;
  }
  std::vector<Charge> take_context(CUcontext ctx) {
    std::vector<Charge> out;
    std::lock_guard l(mu_);
    for (auto it = charges_.begin(); it != charges_.end();) {
      if (it->second.ctx == ctx) {
        out.push_back(it->second);
        it = charges_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void*, Charge> charges_;
};

void give_back(const ArrayCharges::Charge& c) {
  if (PassState* s = PassState::get()) {
    s->release(c.device, c.bytes);
    s->add_physical(c.device, -static_cast<int64_t>(c.bytes));
  }
}

// Charge `bytes` to the calling thread's virtual device, create for real, remember the charge;
// the charge is undone when the real driver refuses.
template <class Handle, class Create>
CUresult charged_create(Handle* out, uint64_t bytes, const char* call, Create create) {
  PassState* s = PassState::get();
  if (s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  int v = -1;
  if (CUresult r = s->current_device(&v); r != CUDA_SUCCESS) return r;
  if (bytes > 0 && !s->reserve(v, bytes)) {
    vgpu::log::info("{}: an array of {} bytes does not fit on virtual device {}", call, bytes, v);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = create();
  if (r != CUDA_SUCCESS || bytes == 0) {
    if (bytes > 0) s->release(v, bytes);
    return r;
  }
  CUcontext ctx = nullptr;  // the array goes with it (current_device() found it current)
  VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx);
  ArrayCharges::get().add(*out, {v, bytes, ctx});
  s->add_physical(v, static_cast<int64_t>(bytes));  // a private real allocation under every policy
  return CUDA_SUCCESS;
}

template <class Handle, class Destroy>
CUresult charged_destroy(Handle h, Destroy destroy) {
  ArrayCharges::Charge c;
  const bool known = h != nullptr && ArrayCharges::get().take(h, &c);
  const CUresult r = destroy();
  if (!known) return r;
  if (r != CUDA_SUCCESS) {
    ArrayCharges::get().add(h, c);
    return r;
  }
  give_back(c);
  return CUDA_SUCCESS;
}

CUDA_ARRAY3D_DESCRIPTOR as_3d(size_t width, size_t height, CUarray_format format, unsigned channels) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = width;
  d.Height = height;
  d.Format = format;
  d.NumChannels = channels;
  return d;
}

}  // namespace

namespace vgpu::pt {
void arrays_destroyed_with(CUcontext ctx) {
  if (ctx == nullptr) return;
  for (const ArrayCharges::Charge& c : ArrayCharges::get().take_context(ctx)) give_back(c);
}
}  // namespace vgpu::pt

VGPU_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t bytes = array_charge(as_3d(desc->Width, desc->Height, desc->Format, desc->NumChannels), 1);
  return charged_create(handle, bytes, "cuArrayCreate", [&] {
    return VGPU_REAL("cuArrayCreate_v2", CUresult (*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t bytes = array_charge(as_3d(desc->Width, desc->Height, desc->Format, desc->NumChannels), 1);
  return charged_create(handle, bytes, "cuArrayCreate", [&] {
    return VGPU_REAL("cuArrayCreate", CUresult (*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR_v1*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return charged_create(handle, array_charge(*desc, 1), "cuArray3DCreate", [&] {
    return VGPU_REAL("cuArray3DCreate_v2", CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d = as_3d(desc->Width, desc->Height, desc->Format, desc->NumChannels);
  d.Depth = desc->Depth;
  d.Flags = desc->Flags;
  return charged_create(handle, array_charge(d, 1), "cuArray3DCreate", [&] {
    return VGPU_REAL("cuArray3DCreate", CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR_v1*))(handle, desc);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray array) {
  return charged_destroy(array, [&] { return VGPU_REAL("cuArrayDestroy", CUresult (*)(CUarray))(array); });
}

VGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                    unsigned int levels) {
  if (handle == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return charged_create(handle, array_charge(*desc, levels > 0 ? levels : 1), "cuMipmappedArrayCreate", [&] {
    return VGPU_REAL("cuMipmappedArrayCreate", CUresult (*)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*,
                                                            unsigned))(handle, desc, levels);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray mipmap) {
  return charged_destroy(mipmap, [&] {
    return VGPU_REAL("cuMipmappedArrayDestroy", CUresult (*)(CUmipmappedArray))(mipmap);
  });
}
