// A "real driver" for the passthrough's tests of what it hands the real driver: every entry point
// forwards to the sim backend's library (weak definitions), except the few that
// recording_overrides.cpp defines.
// (standin_sim.h: how the sim is found).
#include "front/driver/cuda_api.h"
#include "standin_sim.h"

#define VGPU_ENTRY(sym, params, args, forwarded)                                               \
  VGPU_EXPORT __attribute__((weak)) CUresult CUDAAPI sym params {                             \
    using Fn = CUresult(CUDAAPI*) params;                                                      \
    static const Fn next = vgpu_test::sim_entry<Fn>(#sym);                           \
    return next ? next args : CUDA_ERROR_NOT_SUPPORTED;                                        \
  }
#define VGPU_HIDDEN_ENTRY(sym)
#define VGPU_INTEROP_ENTRY(sym)
#include "entries.inc"
#undef VGPU_ENTRY
#undef VGPU_HIDDEN_ENTRY
#undef VGPU_INTEROP_ENTRY

