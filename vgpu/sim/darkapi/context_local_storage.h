// Context-local storage: the private table c693336e (put, delete, get; no size header; slot 3
// null as in the real driver). The runtime keeps its per-context state here (e.g. its module
// registrations) and is told through the destructor when the context goes away.
//
// Behaviour measured on a 580 driver (tests/darkapi/data/real_driver_probe_h200_580.txt):
//  * ctx == null means the calling thread's current context; none current ->
//    CUDA_ERROR_INVALID_CONTEXT;
//  * works on a primary context that is not (or no longer) retained, and entries put then
//    survive its retain;
//  * put of a key already present -> CUDA_ERROR_INVALID_HANDLE, the old value stays;
//    get or delete of a missing key -> CUDA_ERROR_INVALID_HANDLE, *value untouched;
//    delete does not call the destructor; a null key is an ordinary key;
//  * when the context is torn down (cuCtxDestroy, primary release to zero, primary reset) the
//    destructors of its entries run, newest first, with that context current on the calling
//    thread, and the entries are gone afterwards;
//  * (the real driver crashes on a made-up context or a null value pointer; vgpu returns
//    CUDA_ERROR_INVALID_CONTEXT and CUDA_ERROR_INVALID_VALUE.)
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "sim/darkapi/slots.h"
#include "front/driver/cuda_api.h"

namespace vgpu::darkapi {

class ContextLocalStorage {
 public:
  using Destructor = slots::ClsDestructor;

  // The one store of the process (the entries follow contexts, which are process-wide).
  static ContextLocalStorage& instance();

  // `ctx` is an already resolved, live context handle.
  CUresult put(CUcontext ctx, void* key, void* value, Destructor destructor);
  CUresult get(CUcontext ctx, void* key, void** value) const;
  CUresult remove(CUcontext ctx, void* key);

  // The context is being torn down: run its entries' destructors (newest first, with `ctx`
  // pushed as the calling thread's current context) and forget them. Destructors may call
  // back into the driver, this store included: no lock is held while they run.
  void context_destroyed(CUcontext ctx);

  size_t entries(CUcontext ctx) const;

 private:
  struct Entry {
    void* key;
    void* value;
    Destructor destructor;
  };
  mutable std::mutex mu_;
  std::unordered_map<CUcontext, std::vector<Entry>> by_context_;  // entries oldest first
};

// Called by the contexts concern (sim/core/context.cpp) when a context is torn down, before its
// streams and memory go: the runtime's destructors may still use them.
void context_local_storage_context_destroyed(CUcontext ctx);

}  // namespace vgpu::darkapi
