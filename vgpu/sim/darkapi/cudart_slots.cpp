// The cudart_interface table (6bd5fb6c): the primary context of a device, and the module
// slots runtimes used to register their fat binaries before lazy loading (CUDA 12+ runtimes
// go through the public cuLibraryLoadData instead). The module slots load through the public
// entry point, so that a module made here is one the modules concern knows.
#include <cstring>

#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/darkapi/slots.h"

namespace vgpu::darkapi::slots {
namespace {

constexpr uint32_t kFatbinWrapperMagic = 0x466243b1;

// __fatBinC_Wrapper_t, as nvcc emits it into every host object with device code.
struct FatbinWrapper {
  uint32_t magic;
  uint32_t version;
  const void* fatbin;
  const void* filename_or_fatbins;
};

// The image a module slot was given: the fat binary inside a wrapper, or the pointer itself.
const void* image_of(const void* p) {
  uint32_t magic;
  std::memcpy(&magic, p, sizeof magic);
  if (magic != kFatbinWrapperMagic) return p;
  FatbinWrapper w;
  std::memcpy(&w, p, sizeof w);
  return w.fatbin;
}

CUresult load(CUmodule* module, const void* image, const char* slot) {
  if (module == nullptr || image == nullptr) {
    log::warn("cudart_interface {}: null {}", slot, module == nullptr ? "module" : "image");
    return CUDA_ERROR_INVALID_VALUE;
  }
  const void* data = image_of(image);
  if (data == nullptr) {
    log::warn("cudart_interface {}: fat-binary wrapper without a fat binary", slot);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  return cuModuleLoadData(module, data);
}

// The primary context's handle without taking a reference. When ContextManager offers that
// (primary_handle: the handle, the context created inactive if need be, its state untouched),
// it is used; until then the handle comes from a retain undone at once: the reference count
// ends where it was, and a primary context that was not retained is made and torn down again,
// which costs nothing in the sim backend.
template <class Contexts> CUresult primary_handle(Contexts& contexts, int device, CUcontext* out) {
  if constexpr (requires { contexts.primary_handle(device, out); }) {
    return contexts.primary_handle(device, out);
  } else {
    CUcontext h = nullptr;
    if (CUresult r = contexts.primary_retain(device, &h); r != CUDA_SUCCESS) return r;
    contexts.primary_release(device);
    *out = h;
    return CUDA_SUCCESS;
  }
}

}  // namespace

CUresult module_from_fatbin_wrapper(CUmodule* module, const void* wrapper) {
  return load(module, wrapper, "module_from_fatbin_wrapper");
}

CUresult primary_context(CUcontext* out, CUdevice device) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DriverState* d = DriverState::get();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (d->device(device) == nullptr) {
    log::warn("cudart_interface primary_context: invalid device ordinal {}", device);
    return CUDA_ERROR_INVALID_DEVICE;
  }
  return primary_handle(d->contexts(), device, out);
}

CUresult module_from_fatbin_wrapper_ex(CUmodule* module, const void* wrapper, void*, void*,
                                       unsigned int) {
  return load(module, wrapper, "module_from_fatbin_wrapper_ex");
}

void cudart_slot7(size_t) {}

CUresult module_from_fatbin_ex(const void* fatbin, CUmodule* module, void*, void*, unsigned int) {
  return load(module, fatbin, "module_from_fatbin_ex");
}

CUresult load_compilers() { return CUDA_SUCCESS; }

}  // namespace vgpu::darkapi::slots
