// The passthrough backend's default for every exported entry point: call the real driver's
// entry point of the same name, with every device ordinal argument translated from virtual to
// physical (VGPU_DEV, marked by the generator). What vgpu must answer itself (device identity,
// contexts, memory capacity, the private tables) is a strong definition elsewhere in this
// folder and replaces the weak forwarder at link time.
#include "common/log.h"
#include "front/driver/entry_points.h"
#include "passthrough/passthrough_state.h"

#define VGPU_DEV(d) ::vgpu::pt::physical_device(d)
#define VGPU_ENTRY(sym, params, args, forwarded)                                   \
  VGPU_EXPORT __attribute__((weak)) CUresult CUDAAPI sym params {                 \
    using Fn = CUresult(CUDAAPI*) params;                                          \
    static const Fn real = ::vgpu::pt::real_fn<Fn>(#sym);                          \
    return real ? real forwarded : CUDA_ERROR_NOT_SUPPORTED;                       \
  }
// Graphics interop entry points: served by cuGetProcAddress, unsupported under vgpu.
#define VGPU_HIDDEN_ENTRY(sym)                                                      \
  namespace vgpu::hidden {                                                          \
  CUresult CUDAAPI sym() { return vgpu::unimplemented(#sym); }                      \
  }


#define VGPU_INTEROP_ENTRY(sym) \
  extern "C" VGPU_EXPORT __attribute__((weak)) CUresult CUDAAPI sym() { return vgpu::unimplemented(#sym); }
#include "entries.inc"
#undef VGPU_ENTRY
#undef VGPU_HIDDEN_ENTRY
#undef VGPU_INTEROP_ENTRY
#undef VGPU_DEV
