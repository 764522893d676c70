// Contexts under the passthrough backend. Virtual device v's primary context is a real context
// on its physical GPU (passthrough_state.h); created contexts are real contexts remembered with
// their virtual device. Everything else about contexts (current, push/pop, limits, ids) is the
// real driver's, forwarded with the program's handles translated (VGPU_LAZY_CONTEXTS: a stub
// becomes its real context where the program hands it over, and comes back where the real
// driver hands that context out: the entry points below the peer-access ones).
#include <mutex>
#include <set>
#include <utility>

#include "common/log.h"
#include "front/driver/cuda_api.h"
#include "passthrough/array_api.h"
#include "passthrough/kernel_recording.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/virtual_time.h"

using vgpu::pt::PassState;
using vgpu::pt::Passthrough;
using vgpu::pt::PeerAccess;

namespace {

PassState* state() { return PassState::get(); }

// A real context made by `create` on the physical GPU of virtual device `dev`, remembered.
template <class Create>
CUresult created_context(CUcontext* pctx, CUdevice dev, Create create) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s = state();
  if (s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (s->device(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = create(s->physical(dev));
  if (r == CUDA_SUCCESS) s->add_context(*pctx, dev);
  return r;
}

// The virtual device of `ctx` (the current context when null).
CUresult device_of_context(CUcontext ctx, CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s = state();
  if (s == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) return s->current_device(device);
  const int v = s->device_of(ctx);
  if (v < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = v;
  return CUDA_SUCCESS;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PassState* s = state();
  return s ? s->primary_retain(dev, pctx) : CUDA_ERROR_NOT_INITIALIZED;
}

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  PassState* s = state();
  return s ? s->primary_release(dev) : CUDA_ERROR_NOT_INITIALIZED;
}
VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  PassState* s = state();
  return s ? s->primary_reset(dev) : CUDA_ERROR_NOT_INITIALIZED;
}
VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  PassState* s = state();
  return s ? s->primary_state(dev, flags, active) : CUDA_ERROR_NOT_INITIALIZED;
}

VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  PassState* s = state();
  return s ? s->primary_set_flags(dev, flags) : CUDA_ERROR_NOT_INITIALIZED;
}
VGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// The program sees the scheduling flags it asked for, not the blocking wait vgpu gave a context
// that shares its GPU (PassState::primary_context).
VGPU_EXPORT CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  const CUresult r = VGPU_REAL("cuCtxGetFlags", CUresult (*)(unsigned*))(flags);
  if (r != CUDA_SUCCESS || flags == nullptr) return r;
  CUcontext ctx = nullptr;
  PassState* s = state();
  if (s != nullptr && VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx) == CUDA_SUCCESS)
    if (const unsigned added = s->sched_flags_added(ctx)) *flags &= ~added;
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return created_context(pctx, dev, [&](CUdevice p) {
    return VGPU_REAL("cuCtxCreate_v2", CUresult (*)(CUcontext*, unsigned, CUdevice))(pctx, flags, p);
  });
}
VGPU_EXPORT CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v2(pctx, flags, dev);
}

VGPU_EXPORT CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int n,
                                            unsigned int flags, CUdevice dev) {
  return created_context(pctx, dev, [&](CUdevice p) {
    return VGPU_REAL("cuCtxCreate_v3", CUresult (*)(CUcontext*, CUexecAffinityParam*, int, unsigned, CUdevice))(pctx, params, n, flags, p);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params,
                                            unsigned int flags, CUdevice dev) {
  return created_context(pctx, dev, [&](CUdevice p) {
    return VGPU_REAL("cuCtxCreate_v4", CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice))(pctx, params, flags, p);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  PassState* s = state();
  // A virtual primary context (or its stub) is not the caller's to destroy.
  if (s != nullptr && s->is_primary(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  const CUresult r = VGPU_REAL("cuCtxDestroy_v2", CUresult (*)(CUcontext))(ctx);
  if (r == CUDA_SUCCESS && s != nullptr) s->remove_context(ctx);
  if (r == CUDA_SUCCESS) {
    if (vgpu::pt::VirtualTime* vt = vgpu::pt::VirtualTime::get()) vt->context_destroyed(ctx);
    if (vgpu::pt::KernelRecording* rec = vgpu::pt::KernelRecording::get()) rec->forget_context(ctx);
    vgpu::pt::arrays_destroyed_with(ctx);
    vgpu::pt::allocations_destroyed_with(ctx);
  }
  return r;
}
VGPU_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }

VGPU_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) { return device_of_context(nullptr, device); }
VGPU_EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  return device_of_context(ctx, device);
}

namespace {
using StreamGetCtx = CUresult (*)(CUstream, CUcontext*);
CUresult stream_device(CUstream stream, CUdevice* device, StreamGetCtx get_ctx) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = nullptr;
  if (get_ctx == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  if (CUresult r = get_ctx(stream, &ctx); r != CUDA_SUCCESS)
    return r;
  return device_of_context(ctx, device);
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuStreamGetDevice(CUstream stream, CUdevice* device) {
  return stream_device(stream, device, VGPU_REAL("cuStreamGetCtx", StreamGetCtx));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetDevice_ptsz(CUstream stream, CUdevice* device) {
  return stream_device(stream, device, VGPU_REAL("cuStreamGetCtx_ptsz", StreamGetCtx));
}

// Virtual devices that share a physical GPU already reach each other's memory (one GPU, one
// address space); the real driver refuses peer access between two contexts of one GPU, so
// vgpu answers for those pairs and forwards the rest.
namespace {
bool same_gpu(CUcontext a, CUcontext b) {
  PassState* s = state();
  if (s == nullptr) return false;
  const int va = s->device_of(a), vb = s->device_of(b);
  return va >= 0 && vb >= 0 && s->physical(va) == s->physical(vb);
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  CUcontext cur = nullptr;
  VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&cur);
  if (cur == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (peer == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = vgpu::pt::real_context_arg(&peer); r != CUDA_SUCCESS) return r;
  if (peer == cur) return CUDA_ERROR_INVALID_DEVICE;
  if (!same_gpu(cur, peer))
    return VGPU_REAL("cuCtxEnablePeerAccess", CUresult (*)(CUcontext, unsigned))(peer, flags);
  PeerAccess& peers = Passthrough::get().peers();
  std::lock_guard l(peers.mu);
  return peers.pairs.insert({cur, peer}).second ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
}

VGPU_EXPORT CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peer) {
  CUcontext cur = nullptr;
  VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&cur);
  if (cur == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = vgpu::pt::real_context_arg(&peer); r != CUDA_SUCCESS) return r;
  if (!same_gpu(cur, peer)) return VGPU_REAL("cuCtxDisablePeerAccess", CUresult (*)(CUcontext))(peer);
  PeerAccess& peers = Passthrough::get().peers();
  std::lock_guard l(peers.mu);
  return peers.pairs.erase({cur, peer}) ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}

// ---- contexts the real driver hands out, as the program knows them ----
// (the ones it takes are translated by the generated forwarders: VGPU_CTX in entries.inc)

using vgpu::pt::program_context_out;

VGPU_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  return program_context_out(VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(pctx), pctx);
}
VGPU_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  return program_context_out(VGPU_REAL("cuCtxPopCurrent_v2", CUresult (*)(CUcontext*))(pctx), pctx);
}
VGPU_EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) { return cuCtxPopCurrent_v2(pctx); }
VGPU_EXPORT CUresult CUDAAPI cuCtxAttach(CUcontext* pctx, unsigned int flags) {
  return program_context_out(VGPU_REAL("cuCtxAttach", CUresult (*)(CUcontext*, unsigned))(pctx, flags), pctx);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream stream, CUcontext* pctx) {
  return program_context_out(VGPU_REAL("cuStreamGetCtx", StreamGetCtx)(stream, pctx), pctx);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream stream, CUcontext* pctx) {
  return program_context_out(VGPU_REAL("cuStreamGetCtx_ptsz", StreamGetCtx)(stream, pctx), pctx);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx_v2(CUstream stream, CUcontext* pctx, CUgreenCtx* green) {
  using Fn = CUresult (*)(CUstream, CUcontext*, CUgreenCtx*);
  return program_context_out(VGPU_REAL("cuStreamGetCtx_v2", Fn)(stream, pctx, green), pctx);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream stream, CUcontext* pctx, CUgreenCtx* green) {
  using Fn = CUresult (*)(CUstream, CUcontext*, CUgreenCtx*);
  return program_context_out(VGPU_REAL("cuStreamGetCtx_v2_ptsz", Fn)(stream, pctx, green), pctx);
}
