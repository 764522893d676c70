// Shared by the module and launch entry points: reach the ModuleManager, refuse null pointers
// with the one log line every refused call writes.
#pragma once

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/exec/module_registry.h"
#include "sim/core/virtual_clock.h"

namespace vgpu {

// The module manager; CUDA_ERROR_NOT_INITIALIZED before cuInit.
inline CUresult modules(ModuleManager** out) {
  DriverState* d = DriverState::get();
  if (!d) return CUDA_ERROR_NOT_INITIALIZED;
  *out = &d->modules();
  return CUDA_SUCCESS;
}

// CUDA_ERROR_INVALID_VALUE (logged) when any of `ptrs` is null.
template <class... P>
CUresult require(const char* call, const P*... ptrs) {
  if (((ptrs == nullptr) || ...)) {
    log::warn("{}: a required pointer argument is NULL", call);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// The name VGPU_QUERY_TRACE lines show for a CUfunction (or a CUkernel passed as one), or
// nullptr ("?") for a handle the sim does not know.
inline const char* traced_name(ModuleManager* m, CUfunction f) {
  const char* name = nullptr;
  return m->function_name(f, &name) == CUDA_SUCCESS ? name : nullptr;
}
inline const char* traced_kernel_name(ModuleManager* m, CUkernel k) {
  const char* name = nullptr;
  return m->kernel_get_name(k, &name) == CUDA_SUCCESS ? name : nullptr;
}

}  // namespace vgpu

// Entry-point preamble: `m` is the ModuleManager, and the listed pointers are non-null.
#define VGPU_MODULE_CALL(call, ...)                                           \
  ::vgpu::ModuleManager* m = nullptr;                                         \
  if (CUresult rc_ = ::vgpu::modules(&m); rc_ != CUDA_SUCCESS) return rc_;    \
  if (CUresult rc_ = ::vgpu::require(call __VA_OPT__(, ) __VA_ARGS__); rc_ != CUDA_SUCCESS) \
    return rc_
