// Small helpers shared by the memory entry points of vgpu/sim/: reach the driver, the memory
// internals and the current context, or return the error the real driver gives.
#pragma once

#include <memory>

#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/memory/memory.h"
#include "sim/memory/memory_impl.h"

namespace vgpu::sim {

struct Call {
  DriverState* driver = nullptr;
  MemoryManager::Impl* mem = nullptr;
  std::shared_ptr<Context> ctx;  // only set by with_context()
};

// The driver and the memory internals; CUDA_ERROR_NOT_INITIALIZED before cuInit.
inline CUresult begin(Call* c) {
  c->driver = DriverState::get();
  if (c->driver == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  c->mem = &c->driver->memory().impl();
  return CUDA_SUCCESS;
}

// As begin(), and the calling thread's current context (CUDA_ERROR_INVALID_CONTEXT if none).
inline CUresult with_context(const char* call, Call* c) {
  if (CUresult r = begin(c); r != CUDA_SUCCESS) return r;
  c->ctx = c->driver->contexts().current();
  if (!c->ctx) {
    log::warn("{}: no current context on this thread", call);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

// Logs the one line every refused call writes, and passes the error through.
template <class... A>
CUresult fail(CUresult r, fmt::format_string<A...> f, A&&... a) {
  log::warn(f, std::forward<A>(a)...);
  return r;
}

// A memfd of `size` bytes for a shareable VMM allocation of `device` (shareable_api.cpp): sets
// the allocation's descriptor (owned through its arena pointer), offset 0, dedicated.
CUresult dedicated_memfd(int device, uint64_t size, PhysicalAllocation* phys);

}  // namespace vgpu::sim
