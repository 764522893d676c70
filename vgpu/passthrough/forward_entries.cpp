// The passthrough backend's default for every exported entry point: call the real driver's
// entry point of the same name, with every device ordinal argument translated from virtual to
// physical (VGPU_DEV, marked by the generator) and every context argument from the program's
// handle to the real driver's (VGPU_CTX: a stub of VGPU_LAZY_CONTEXTS becomes its real context).
// What vgpu must answer itself (device identity, contexts, memory capacity, the private tables)
// is a strong definition elsewhere in this folder and replaces the weak forwarder at link time.
#include <tuple>

#include "common/log.h"
#include "front/driver/entry_points.h"
#include "passthrough/passthrough_state.h"

namespace {
// A context argument as the real driver knows it (a stub becomes its real context, made now); null
// with `*error` set when that fails, and the call is then not made.
CUcontext forwarded_context(CUcontext c, CUresult* error) {
  if (CUresult r = ::vgpu::pt::real_context_arg(&c); r != CUDA_SUCCESS) {
    *error = r;
    return nullptr;
  }
  return c;
}
}  // namespace

#define VGPU_DEV(d) ::vgpu::pt::physical_device(d)
#define VGPU_CTX(c) forwarded_context(c, &context_error)
// The arguments are translated into a tuple first, so that a context that cannot be made real
// stops the call before the real driver sees anything.
#define VGPU_ENTRY(sym, params, args, forwarded)                                   \
  VGPU_EXPORT __attribute__((weak)) CUresult CUDAAPI sym params {                 \
    using Fn = CUresult(CUDAAPI*) params;                                          \
    static const Fn real = ::vgpu::pt::real_fn<Fn>(#sym);                          \
    if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;                          \
    CUresult context_error = CUDA_SUCCESS;                                         \
    const auto real_args = std::make_tuple forwarded;                              \
    if (context_error != CUDA_SUCCESS) return context_error;                       \
    return std::apply(real, real_args);                                            \
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
#undef VGPU_CTX
