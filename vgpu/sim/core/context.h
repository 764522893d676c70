// Contexts: the primary context of each virtual device, created contexts, and which one is
// current on each thread. OWNER: the contexts/memory helper. The declarations below are the
// interface other concerns rely on; add to them, do not change them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "front/driver/cuda_api.h"

namespace vgpu {

class DriverState;

class Context {
 public:
  virtual ~Context() = default;
  virtual int device() const = 0;          // virtual device ordinal
  virtual unsigned int flags() const = 0;
  virtual bool is_primary() const = 0;
  virtual unsigned long long id() const = 0;  // cuCtxGetId
  virtual CUcontext handle() const = 0;
};

// The state of one context, behind the Context interface: everything the cuCtx* calls
// read and set. Thread-safe; the entry points in context_api.cpp use it directly.
class ContextState : public Context {
 public:
  ContextState(CUcontext handle, int device, unsigned int flags, bool primary,
               unsigned long long id);
  int device() const override { return device_; }
  unsigned int flags() const override;
  bool is_primary() const override { return primary_; }
  unsigned long long id() const override { return id_; }
  CUcontext handle() const override { return handle_; }

  void set_flags(unsigned int flags);
  // False for a primary context that has been released to zero or reset (its handle stays
  // known, but nothing may be done through it until it is retained again).
  bool active() const;

  CUresult get_limit(CUlimit limit, size_t* value) const;
  CUresult set_limit(CUlimit limit, size_t value);
  CUfunc_cache cache_config() const;
  void set_cache_config(CUfunc_cache c);
  CUsharedconfig shared_config() const;
  void set_shared_config(CUsharedconfig c);
  // Peer access from this context to `peer`'s device: false when already in that state.
  bool enable_peer(CUcontext peer);
  bool disable_peer(CUcontext peer);
  std::vector<CUcontext> peers() const;

 private:
  friend class ContextManager;
  struct Data;
  const CUcontext handle_;
  const int device_;
  const bool primary_;
  const unsigned long long id_;
  std::shared_ptr<Data> data_;
};

class ContextManager {
 public:
  // `teardown` is called as each context ends, before its handle goes: what the layers above
  // this one keep per context (streams, modules, memory, the runtime's context-local storage)
  // goes with it. The root (sim/driver_state.cpp) names them; this layer includes none of them.
  using Teardown = std::function<void(CUcontext)>;
  ContextManager(DriverState& driver, Teardown teardown);
  ~ContextManager();

  // nullptr for a handle that is not a live context.
  std::shared_ptr<Context> find(CUcontext ctx) const;
  // The calling thread's current context; nullptr when none is current.
  std::shared_ptr<Context> current() const;
  // The device of the current context: CUDA_ERROR_INVALID_CONTEXT when none is current,
  // CUDA_ERROR_NOT_INITIALIZED before cuInit.
  CUresult current_device(int* device) const;

  // ---- Added by the contexts helper: what the entry points (context_api.cpp) and the memory
  // manager use. All thread-safe. ----

  // The live context for `ctx`, or the current one when `ctx` is nullptr; the error the real
  // driver gives otherwise (CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NOT_INITIALIZED).
  CUresult resolve(CUcontext ctx, std::shared_ptr<Context>* out) const;

  // Primary contexts (one per device, created on first retain, handle stable for the process).
  CUresult primary_retain(int device, CUcontext* out);
  CUresult primary_release(int device);
  CUresult primary_reset(int device);
  CUresult primary_state(int device, unsigned int* flags, int* active) const;
  CUresult primary_set_flags(int device, unsigned int flags);

  // Created contexts: made current (pushed) on the calling thread, as cuCtxCreate does.
  CUresult create(int device, unsigned int flags, CUcontext* out);
  CUresult destroy(CUcontext ctx);
  // cuCtxAttach/cuCtxDetach: a usage count on created contexts; detach to zero destroys.
  CUresult attach(CUcontext* out);
  CUresult detach(CUcontext ctx);

  // The bytes the first context of a device costs on that device (the driver's own
  // reservations: local memory, printf fifo, heap, code). One place for the figure.
  static uint64_t context_overhead_bytes(int sm_count);
  // Number of live (active) contexts on `device`, primary included.
  int live_contexts(int device) const;
  // Whether a live context of device `a` has peer access to a context of device `b` or one of
  // `b` to `a` (cuCtxEnablePeerAccess / cudaDeviceEnablePeerAccess): copies between them then
  // go over the peer link; otherwise the driver stages them through host memory.
  bool peer_access(int a, int b) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu
