// The cuCtx* and cuDevicePrimaryCtx* entry points: thin checks over ContextManager.
// Older ABIs (cuCtxCreate v1..v3, cuCtxDestroy, cuCtxPushCurrent, ...) call the newest one.
#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/core/thread_state.h"
#include "front/driver/entry_points.h"
#include "front/driver/query_lines.h"
#include "sim/core/virtual_clock.h"

using vgpu::Context;
using vgpu::ContextManager;
using vgpu::ContextState;
using vgpu::DriverState;

namespace {

CUresult manager(ContextManager** out) {
  DriverState* d = DriverState::get();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  *out = &d->contexts();
  return CUDA_SUCCESS;
}

// The current context as its full state, or the error for "none".
CUresult current_state(const char* call, std::shared_ptr<ContextState>* out) {
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  auto c = std::static_pointer_cast<ContextState>(m->current());
  if (!c) {
    vgpu::log::warn("{}: no current context on this thread", call);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  *out = std::move(c);
  return CUDA_SUCCESS;
}

// A refusal from ContextManager: the exported entry point (front/driver/checked_entries.cpp) logs its
// line unless the manager already said why.
CUresult report(const char* /*call*/, CUresult r) { return r; }

}  // namespace

// ---- primary contexts ----------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuDevicePrimaryCtxRetain", m->primary_retain(dev, pctx));
}

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  VGPU_CALL_SCOPE();
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuDevicePrimaryCtxRelease", m->primary_release(dev));
}
VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  VGPU_CALL_SCOPE();
  return cuDevicePrimaryCtxRelease_v2(dev);
}

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  VGPU_CALL_SCOPE();
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuDevicePrimaryCtxReset", m->primary_reset(dev));
}
VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  VGPU_CALL_SCOPE();
  return cuDevicePrimaryCtxReset_v2(dev);
}

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuDevicePrimaryCtxGetState", m->primary_state(dev, flags, active));
}

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  VGPU_CALL_SCOPE();
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuDevicePrimaryCtxSetFlags", m->primary_set_flags(dev, flags));
}
VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  VGPU_CALL_SCOPE();
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// ---- created contexts ----------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params,
                                            unsigned int flags, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (params != nullptr && (params->numExecAffinityParams > 0 || params->cigParams != nullptr)) {
    // Execution affinity (SM partitions) and CUDA-in-graphics have no meaning on a virtual GPU.
    vgpu::log::warn("cuCtxCreate_v4: execution affinity / CIG parameters are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuCtxCreate", m->create(dev, flags, pctx));
}
VGPU_EXPORT CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray,
                                            int numParams, unsigned int flags, CUdevice dev) {
  VGPU_CALL_SCOPE();
  if (numParams < 0 || (numParams > 0 && paramsArray == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  CUctxCreateParams p{paramsArray, numParams, nullptr};
  return cuCtxCreate_v4(pctx, &p, flags, dev);
}
VGPU_EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  VGPU_CALL_SCOPE();
  return cuCtxCreate_v4(pctx, nullptr, flags, dev);
}
VGPU_EXPORT CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  VGPU_CALL_SCOPE();
  return cuCtxCreate_v4(pctx, nullptr, flags, dev);
}

VGPU_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  VGPU_CALL_SCOPE();
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuCtxDestroy", m->destroy(ctx));
}
VGPU_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { VGPU_CALL_SCOPE(); return cuCtxDestroy_v2(ctx); }

VGPU_EXPORT CUresult CUDAAPI cuCtxAttach(CUcontext* pctx, unsigned int flags) {
  VGPU_CALL_SCOPE();
  if (pctx == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuCtxAttach", m->attach(pctx));
}
VGPU_EXPORT CUresult CUDAAPI cuCtxDetach(CUcontext ctx) {
  VGPU_CALL_SCOPE();
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  return report("cuCtxDetach", m->detach(ctx));
}

// ---- the per-thread stack ------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (DriverState::get() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  *pctx = vgpu::this_thread().current();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  VGPU_NEUTRAL_CALL_SCOPE();
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  auto& stack = vgpu::this_thread().context_stack;
  if (ctx == nullptr) {
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (!m->find(ctx)) {
    vgpu::log::warn("cuCtxSetCurrent: {} is not a live context", static_cast<void*>(ctx));
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (stack.empty()) stack.push_back(ctx);
  else stack.back() = ctx;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  VGPU_NEUTRAL_CALL_SCOPE();
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  if (ctx == nullptr || !m->find(ctx)) {
    vgpu::log::warn("cuCtxPushCurrent: {} is not a live context", static_cast<void*>(ctx));
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  vgpu::this_thread().context_stack.push_back(ctx);
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) { VGPU_NEUTRAL_CALL_SCOPE(); return cuCtxPushCurrent_v2(ctx); }

VGPU_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (DriverState::get() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  auto& stack = vgpu::this_thread().context_stack;
  if (stack.empty()) {
    vgpu::log::warn("cuCtxPopCurrent: the context stack of this thread is empty");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (pctx != nullptr) *pctx = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) { VGPU_NEUTRAL_CALL_SCOPE(); return cuCtxPopCurrent_v2(pctx); }

// ---- queries and settings of a context -----------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Context> c;
  if (CUresult r = m->resolve(ctx, &c); r != CUDA_SUCCESS) return report("cuCtxGetDevice", r);
  *device = c->device();
  return CUDA_SUCCESS;
}
VGPU_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) { VGPU_NEUTRAL_CALL_SCOPE(); return cuCtxGetDevice_v2(device, nullptr); }

VGPU_EXPORT CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxGetFlags", &c); r != CUDA_SUCCESS) return r;
  *flags = c->flags();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxSetFlags(unsigned int flags) {
  VGPU_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxSetFlags", &c); r != CUDA_SUCCESS) return r;
  if (flags & ~static_cast<unsigned int>(CU_CTX_FLAGS_MASK)) return CUDA_ERROR_INVALID_VALUE;
  c->set_flags(flags);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Context> c;
  if (CUresult r = m->resolve(ctx, &c); r != CUDA_SUCCESS) return report("cuCtxGetApiVersion", r);
  *version = 3020;  // every context made through the _v2-era API reports 3020
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ContextManager* m;
  if (CUresult r = manager(&m); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Context> c;
  if (CUresult r = m->resolve(ctx, &c); r != CUDA_SUCCESS) return report("cuCtxGetId", r);
  *ctxId = c->id();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (pvalue == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxGetLimit", &c); r != CUDA_SUCCESS) return r;
  const CUresult r = c->get_limit(limit, pvalue);
  if (vgpu::query_trace::enabled()) vgpu::query_trace::context_limit(limit, r, pvalue);
  return report("cuCtxGetLimit", r);
}

VGPU_EXPORT CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  VGPU_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxSetLimit", &c); r != CUDA_SUCCESS) return r;
  return report("cuCtxSetLimit", c->set_limit(limit, value));
}

VGPU_EXPORT CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache* pconfig) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (pconfig == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxGetCacheConfig", &c); r != CUDA_SUCCESS) return r;
  *pconfig = c->cache_config();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config) {
  VGPU_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxSetCacheConfig", &c); r != CUDA_SUCCESS) return r;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
    return CUDA_ERROR_INVALID_VALUE;
  c->set_cache_config(config);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig* pConfig) {
  VGPU_NEUTRAL_CALL_SCOPE();
  if (pConfig == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxGetSharedMemConfig", &c); r != CUDA_SUCCESS) return r;
  *pConfig = c->shared_config();
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig config) {
  VGPU_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxSetSharedMemConfig", &c); r != CUDA_SUCCESS) return r;
  if (config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
      config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
    return CUDA_ERROR_INVALID_VALUE;
  c->set_shared_config(config);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  VGPU_NEUTRAL_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxGetStreamPriorityRange", &c); r != CUDA_SUCCESS) return r;
  // Hopper's range; either pointer may be NULL.
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -5;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxResetPersistingL2Cache(void) {
  VGPU_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  return current_state("cuCtxResetPersistingL2Cache", &c);  // no cache to reset
}

// ---- peer access ---------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  VGPU_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxEnablePeerAccess", &c); r != CUDA_SUCCESS) return r;
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto peer = DriverState::get()->contexts().find(peerContext);
  if (!peer) {
    vgpu::log::warn("cuCtxEnablePeerAccess: {} is not a live context", static_cast<void*>(peerContext));
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  int can = 0;
  DriverState* d = DriverState::get();
  vgpu::Device* a = d->device(c->device());
  vgpu::Device* b = d->device(peer->device());
  if (a == b) return report("cuCtxEnablePeerAccess (same device)", CUDA_ERROR_INVALID_DEVICE);
  can = a->node() == b->node() && d->cluster().nvlink.present;
  if (!can) return report("cuCtxEnablePeerAccess (no path)", CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  if (!c->enable_peer(peerContext))
    return report("cuCtxEnablePeerAccess", CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext) {
  VGPU_CALL_SCOPE();
  std::shared_ptr<ContextState> c;
  if (CUresult r = current_state("cuCtxDisablePeerAccess", &c); r != CUDA_SUCCESS) return r;
  if (!DriverState::get()->contexts().find(peerContext)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!c->disable_peer(peerContext))
    return report("cuCtxDisablePeerAccess", CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  return CUDA_SUCCESS;
}

// cuCtxSynchronize waits for the context's streams: with the stream entry points
// (sim/exec/stream_api.cpp).
