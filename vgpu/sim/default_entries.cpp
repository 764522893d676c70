// A weak definition of every exported entry point. Whatever a module of vgpu implements is a
// strong definition of the same symbol and replaces the weak one at link time, so the surface
// is complete from day one and each implementation lives beside its concern.
#include "common/log.h"
#include "front/driver/entry_points.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"


#define VGPU_ENTRY(sym, params, args, forwarded) \
  VGPU_EXPORT __attribute__((weak)) CUresult CUDAAPI sym params { return vgpu::unimplemented(#sym); }
#define VGPU_HIDDEN_ENTRY(sym) \
  namespace vgpu::hidden { CUresult CUDAAPI sym() { return vgpu::unimplemented(#sym); } }
// Graphics interop, exported by name as the real driver does: never implemented (no GL/EGL/VDPAU
// context exists on a virtual device); the stub ignores its arguments (the caller owns them).
#define VGPU_INTEROP_ENTRY(sym) \
  extern "C" VGPU_EXPORT __attribute__((weak)) CUresult CUDAAPI sym() { return vgpu::unimplemented(#sym); }
#include "entries.inc"
#undef VGPU_ENTRY
#undef VGPU_HIDDEN_ENTRY
#undef VGPU_INTEROP_ENTRY
