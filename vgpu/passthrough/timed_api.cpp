// The entry points through which a program observes time, under the passthrough backend: its
// events, its synchronizations, and the copies, sets and graph launches that take stream time.
// Each is forwarded to the real driver as it is (so errors, readiness and ordering stay the real
// driver's), and virtual_time.h is told what happened: cuEventElapsedTime then answers in
// virtual milliseconds and every synchronization moves the calling thread's virtual clock to
// the virtual finish of the work it waited for.
//
// Copies and sets are priced by the virtual GPU's figures (core/copy_cost.h), not measured:
// their cost depends on the size and the link only. Graph launches are measured.
//
// The host time spent inside every call timed here is not charged to the calling thread's
// clock (thread_clock::Pause), exactly as the sim backend charges no driver time: the same
// program gets the same virtual time on both backends, and a real GPU shared by several
// virtual devices, whose synchronizations wait for each other's work, does not leak into it.
#include "core/copy_cost.h"
#include "driver/cuda_api.h"
#include "passthrough/kernel_recording.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/thread_clock.h"
#include "passthrough/virtual_time.h"

using vgpu::CopyPath;
using vgpu::pt::OpRef;
using vgpu::pt::PassState;
using vgpu::pt::StreamTarget;
using vgpu::pt::Timing;
using vgpu::pt::VirtualTime;
namespace thread_clock = vgpu::pt::thread_clock;

namespace {

// The stream a call works on, when vgpu can time it (not captured, a live stream).
VirtualTime* timed_target(CUstream s, bool per_thread, StreamTarget* t) {
  VirtualTime* vt = VirtualTime::get();
  if (vt == nullptr || !vt->target(s, per_thread, t) || vt->capturing(*t)) return nullptr;
  return vt;
}

double price(const StreamTarget& t, CopyPath path, uint64_t bytes) {
  PassState* s = PassState::get();
  const vgpu::Device* d = s ? s->device(t.device) : nullptr;
  static const simcore::GpuModel unknown{};
  return vgpu::copy_seconds(d ? d->model() : unknown, path, bytes);
}

CopyPath path_between(uint64_t dst, uint64_t src) {
  PassState* s = PassState::get();
  return s && s->is_device_pointer(dst) && s->is_device_pointer(src) ? CopyPath::within_device
                                                                      : CopyPath::host_device;
}

// A copy or set: forwarded, then placed on its stream's virtual timeline; `synchronous` ones
// (cuMemcpy without Async) also move the thread's clock to their virtual finish.
template <class Call>
CUresult priced(CUstream s, bool per_thread, CopyPath path, uint64_t bytes, bool synchronous, Call call) {
  thread_clock::Pause pause(synchronous);
  StreamTarget t;
  VirtualTime* vt = timed_target(s, per_thread, &t);
  const CUresult r = call();
  if (r != CUDA_SUCCESS || vt == nullptr) return r;
  VirtualTime::Bracket none;
  Timing timing;
  timing.seconds = price(t, path, bytes);
  const OpRef op = vt->submit(t, std::move(timing), none);
  if (synchronous) vt->synchronized(op, t.device);
  return r;
}

template <class Call>
CUresult recorded_event(CUevent e, CUstream s, bool per_thread, Call call) {
  thread_clock::Pause pause;
  StreamTarget t;
  VirtualTime* vt = timed_target(s, per_thread, &t);
  const CUresult r = call();
  if (r == CUDA_SUCCESS && vt != nullptr) vt->event_recorded(e, t);
  return r;
}

template <class Call>
CUresult stream_waits(CUstream s, CUevent e, bool per_thread, Call call) {
  thread_clock::Pause pause;
  StreamTarget t;
  VirtualTime* vt = timed_target(s, per_thread, &t);
  const CUresult r = call();
  if (r == CUDA_SUCCESS && vt != nullptr) vt->stream_waits(t, e);
  return r;
}

template <class Call>
CUresult stream_synchronized(CUstream s, bool per_thread, Call call) {
  thread_clock::Pause pause(/*blocking=*/true);
  VirtualTime* vt = VirtualTime::get();
  StreamTarget t;
  const bool known = vt != nullptr && vt->target(s, per_thread, &t);
  const CUresult r = call();
  if (r == CUDA_SUCCESS && known) vt->synchronized(vt->timeline().tail(t.key), t.device);
  return r;
}

CUresult context_synchronized(CUcontext ctx, CUresult (*real)(CUcontext), bool explicit_ctx) {
  thread_clock::Pause pause(/*blocking=*/true);
  VirtualTime* vt = VirtualTime::get();
  if (ctx == nullptr) VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx);
  const CUresult r = explicit_ctx ? real(ctx) : VGPU_REAL("cuCtxSynchronize", CUresult (*)())();
  if (r == CUDA_SUCCESS && vt != nullptr && ctx != nullptr) {
    PassState* s = PassState::get();
    vt->context_synchronized(ctx, s ? std::max(0, s->device_of(ctx)) : 0);
  }
  return r;
}

template <class Call>
CUresult graph_launch(CUstream s, bool per_thread, Call call) {
  thread_clock::Pause pause;
  StreamTarget t;
  VirtualTime::Bracket bracket;
  Timing timing;
  timing.source = Timing::Source::measured;
  VirtualTime* vt = timed_target(s, per_thread, &t);
  if (vt != nullptr) bracket = vt->begin(t, timing);
  const CUresult r = call();
  if (vt == nullptr) return r;
  if (r == CUDA_SUCCESS)
    vt->submit(t, timing, bracket);
  else
    vt->abandon(bracket);
  return r;
}

using U64 = unsigned long long;
#define REAL(name, ...) VGPU_REAL(#name, CUresult (*)(__VA_ARGS__))

}  // namespace

// ---- events ----
VGPU_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  return recorded_event(e, s, false, [&] { return REAL(cuEventRecord, CUevent, CUstream)(e, s); });
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream s) {
  return recorded_event(e, s, true, [&] { return REAL(cuEventRecord_ptsz, CUevent, CUstream)(e, s); });
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned flags) {
  return recorded_event(e, s, false,
                        [&] { return REAL(cuEventRecordWithFlags, CUevent, CUstream, unsigned)(e, s, flags); });
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned flags) {
  return recorded_event(e, s, true,
                        [&] { return REAL(cuEventRecordWithFlags_ptsz, CUevent, CUstream, unsigned)(e, s, flags); });
}

VGPU_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  thread_clock::Pause pause(/*blocking=*/true);
  const CUresult r = REAL(cuEventSynchronize, CUevent)(e);
  if (r != CUDA_SUCCESS) return r;
  if (VirtualTime* vt = VirtualTime::get())
    if (const OpRef op = vt->event_op(e)) vt->synchronized(op, op->device);
  return r;
}

namespace {
CUresult elapsed(float* ms, CUevent a, CUevent b, CUresult (*real)(float*, CUevent, CUevent)) {
  thread_clock::Pause pause(/*blocking=*/true);  // may wait for measurements
  // The real driver checks the handles, the timing flags and that both events completed.
  const CUresult r = real(ms, a, b);
  if (r != CUDA_SUCCESS) return r;
  if (VirtualTime* vt = VirtualTime::get())
    if (const std::optional<float> v = vt->elapsed_ms(a, b)) *ms = *v;
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  return elapsed(ms, a, b, REAL(cuEventElapsedTime, float*, CUevent, CUevent));
}
VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  return elapsed(ms, a, b, REAL(cuEventElapsedTime_v2, float*, CUevent, CUevent));
}

VGPU_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent e) {
  const CUresult r = REAL(cuEventDestroy_v2, CUevent)(e);
  if (r == CUDA_SUCCESS)
    if (VirtualTime* vt = VirtualTime::get()) vt->event_destroyed(e);
  return r;
}
VGPU_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }

// ---- streams and contexts ----
VGPU_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  return stream_waits(s, e, false, [&] { return REAL(cuStreamWaitEvent, CUstream, CUevent, unsigned)(s, e, flags); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned flags) {
  return stream_waits(s, e, true,
                      [&] { return REAL(cuStreamWaitEvent_ptsz, CUstream, CUevent, unsigned)(s, e, flags); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  return stream_synchronized(s, false, [&] { return REAL(cuStreamSynchronize, CUstream)(s); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream s) {
  return stream_synchronized(s, true, [&] { return REAL(cuStreamSynchronize_ptsz, CUstream)(s); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream s) {
  if (VirtualTime* vt = VirtualTime::get()) vt->stream_destroyed(s);
  if (vgpu::pt::KernelRecording* rec = vgpu::pt::KernelRecording::get()) {
    CUcontext ctx = nullptr;
    if (REAL(cuStreamGetCtx, CUstream, CUcontext*)(s, &ctx) == CUDA_SUCCESS) rec->forget_stream(ctx, s);
  }
  return REAL(cuStreamDestroy_v2, CUstream)(s);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s) { return cuStreamDestroy_v2(s); }

VGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize() { return context_synchronized(nullptr, nullptr, false); }
VGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  return context_synchronized(ctx, REAL(cuCtxSynchronize_v2, CUcontext), true);
}

// ---- stream capture: only counted, so that launches ask about capture only while one is open ----
namespace {
CUresult capture_begun(CUresult r) {
  if (r == CUDA_SUCCESS)
    if (VirtualTime* vt = VirtualTime::get()) vt->capture_opened();
  return r;
}
CUresult capture_ended(CUresult r) {
  // Ended, successfully or invalidated; any other error leaves the capture open.
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    if (VirtualTime* vt = VirtualTime::get()) vt->capture_closed();
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream s) {
  return capture_begun(REAL(cuStreamBeginCapture, CUstream)(s));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream s) {
  return capture_begun(REAL(cuStreamBeginCapture_ptsz, CUstream)(s));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return capture_begun(REAL(cuStreamBeginCapture_v2, CUstream, CUstreamCaptureMode)(s, mode));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return capture_begun(REAL(cuStreamBeginCapture_v2_ptsz, CUstream, CUstreamCaptureMode)(s, mode));
}
using BeginToGraphFn = CUresult (*)(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                    CUstreamCaptureMode);
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* deps,
                                                         const CUgraphEdgeData* data, size_t n,
                                                         CUstreamCaptureMode mode) {
  return capture_begun(VGPU_REAL("cuStreamBeginCaptureToGraph", BeginToGraphFn)(s, g, deps, data, n, mode));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* deps,
                                                              const CUgraphEdgeData* data, size_t n,
                                                              CUstreamCaptureMode mode) {
  return capture_begun(VGPU_REAL("cuStreamBeginCaptureToGraph_ptsz", BeginToGraphFn)(s, g, deps, data, n, mode));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph* g) {
  return capture_ended(REAL(cuStreamEndCapture, CUstream, CUgraph*)(s, g));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
  return capture_ended(REAL(cuStreamEndCapture_ptsz, CUstream, CUgraph*)(s, g));
}

// ---- graphs ----
VGPU_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec g, CUstream s) {
  return graph_launch(s, false, [&] { return REAL(cuGraphLaunch, CUgraphExec, CUstream)(g, s); });
}
VGPU_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) {
  return graph_launch(s, true, [&] { return REAL(cuGraphLaunch_ptsz, CUgraphExec, CUstream)(g, s); });
}

// ---- copies and sets ----
// (name, per-thread variant, path, synchronous) over the real entry point of the same name.
#define VGPU_COPY(sym, ptds, sync, dst_t, src_t)                                                     \
  VGPU_EXPORT CUresult CUDAAPI sym(dst_t dst, src_t src, size_t n) {                                 \
    return priced(nullptr, ptds, path_between((U64)dst, (U64)src), n, sync,                          \
                  [&] { return REAL(sym, dst_t, src_t, size_t)(dst, src, n); });                     \
  }
#define VGPU_COPY_ASYNC(sym, ptsz, dst_t, src_t)                                                     \
  VGPU_EXPORT CUresult CUDAAPI sym(dst_t dst, src_t src, size_t n, CUstream s) {                     \
    return priced(s, ptsz, path_between((U64)dst, (U64)src), n, false,                               \
                  [&] { return REAL(sym, dst_t, src_t, size_t, CUstream)(dst, src, n, s); });        \
  }
VGPU_COPY(cuMemcpy, false, true, CUdeviceptr, CUdeviceptr)
VGPU_COPY(cuMemcpy_ptds, true, true, CUdeviceptr, CUdeviceptr)
VGPU_COPY(cuMemcpyHtoD_v2, false, true, CUdeviceptr, const void*)
VGPU_COPY(cuMemcpyHtoD_v2_ptds, true, true, CUdeviceptr, const void*)
VGPU_COPY(cuMemcpyDtoH_v2, false, true, void*, CUdeviceptr)
VGPU_COPY(cuMemcpyDtoH_v2_ptds, true, true, void*, CUdeviceptr)
VGPU_COPY(cuMemcpyDtoD_v2, false, false, CUdeviceptr, CUdeviceptr)
VGPU_COPY(cuMemcpyDtoD_v2_ptds, true, false, CUdeviceptr, CUdeviceptr)
VGPU_COPY_ASYNC(cuMemcpyAsync, false, CUdeviceptr, CUdeviceptr)
VGPU_COPY_ASYNC(cuMemcpyAsync_ptsz, true, CUdeviceptr, CUdeviceptr)
VGPU_COPY_ASYNC(cuMemcpyHtoDAsync_v2, false, CUdeviceptr, const void*)
VGPU_COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, true, CUdeviceptr, const void*)
VGPU_COPY_ASYNC(cuMemcpyDtoHAsync_v2, false, void*, CUdeviceptr)
VGPU_COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, true, void*, CUdeviceptr)
VGPU_COPY_ASYNC(cuMemcpyDtoDAsync_v2, false, CUdeviceptr, CUdeviceptr)
VGPU_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, true, CUdeviceptr, CUdeviceptr)
#undef VGPU_COPY
#undef VGPU_COPY_ASYNC

// Sets of device memory are asynchronous to the host, with or without Async.
#define VGPU_SET(sym, ptsz, value_t, element)                                                        \
  VGPU_EXPORT CUresult CUDAAPI sym(CUdeviceptr dst, value_t v, size_t n) {                           \
    return priced(nullptr, ptsz, CopyPath::memset, n * element, false,                               \
                  [&] { return REAL(sym, CUdeviceptr, value_t, size_t)(dst, v, n); });               \
  }
#define VGPU_SET_ASYNC(sym, ptsz, value_t, element)                                                  \
  VGPU_EXPORT CUresult CUDAAPI sym(CUdeviceptr dst, value_t v, size_t n, CUstream s) {               \
    return priced(s, ptsz, CopyPath::memset, n * element, false,                                     \
                  [&] { return REAL(sym, CUdeviceptr, value_t, size_t, CUstream)(dst, v, n, s); });  \
  }
VGPU_SET(cuMemsetD8_v2, false, unsigned char, 1)
VGPU_SET(cuMemsetD8_v2_ptds, true, unsigned char, 1)
VGPU_SET(cuMemsetD16_v2, false, unsigned short, 2)
VGPU_SET(cuMemsetD16_v2_ptds, true, unsigned short, 2)
VGPU_SET(cuMemsetD32_v2, false, unsigned int, 4)
VGPU_SET(cuMemsetD32_v2_ptds, true, unsigned int, 4)
VGPU_SET_ASYNC(cuMemsetD8Async, false, unsigned char, 1)
VGPU_SET_ASYNC(cuMemsetD8Async_ptsz, true, unsigned char, 1)
VGPU_SET_ASYNC(cuMemsetD16Async, false, unsigned short, 2)
VGPU_SET_ASYNC(cuMemsetD16Async_ptsz, true, unsigned short, 2)
VGPU_SET_ASYNC(cuMemsetD32Async, false, unsigned int, 4)
VGPU_SET_ASYNC(cuMemsetD32Async_ptsz, true, unsigned int, 4)
#undef VGPU_SET
#undef VGPU_SET_ASYNC
