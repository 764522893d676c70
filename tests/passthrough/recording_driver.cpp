// A "real driver" for the passthrough's tests of what it hands the real driver: every entry point
// forwards to the sim backend's library (weak definitions), except the few that
// recording_overrides.cpp defines.
//
// The sim is opened by path (VGPU_SIM_LIBCUDA) rather than linked: a DT_NEEDED on libcuda.so.1
// would bind to the passthrough itself, already loaded under that soname.
#include <dlfcn.h>

#include <cstdlib>

#include "front/driver/cuda_api.h"

namespace {

void* sim() {
  static void* const h = dlopen(std::getenv("VGPU_SIM_LIBCUDA"), RTLD_NOW | RTLD_LOCAL);
  return h;
}

}  // namespace

#define VGPU_ENTRY(sym, params, args, forwarded)                                               \
  VGPU_EXPORT __attribute__((weak)) CUresult CUDAAPI sym params {                             \
    using Fn = CUresult(CUDAAPI*) params;                                                      \
    static const Fn next = reinterpret_cast<Fn>(dlsym(sim(), #sym));                           \
    return next ? next args : CUDA_ERROR_NOT_SUPPORTED;                                        \
  }
#define VGPU_HIDDEN_ENTRY(sym)
#define VGPU_INTEROP_ENTRY(sym)
#include "entries.inc"
#undef VGPU_ENTRY
#undef VGPU_HIDDEN_ENTRY
#undef VGPU_INTEROP_ENTRY

