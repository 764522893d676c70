// Copies and sets under the passthrough backend: forwarded to the real driver as they are, then
// placed on their stream's virtual timeline at the price the virtual GPU gives them
// (core/copy_cost.h): their cost depends on the size and the link only, so they are priced, not
// measured. 1D, 2D and 3D copies, copies to and from arrays, copies between virtual devices
// (priced on the virtual cluster's route between them, uncontended) and 1D/2D sets. As in timed_api.cpp, the host
// time inside these calls is not charged to the calling thread's clock.
#include <fmt/format.h>

#include "front/launch/copy_cost.h"
#include "front/driver/cuda_api.h"
#include "passthrough/last_copy_path.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/thread_clock.h"
#include "passthrough/timeline_writer.h"
#include "passthrough/virtual_time.h"

using vgpu::CopyPath;
using vgpu::pt::CallThread;
using vgpu::pt::OpRef;
using vgpu::pt::PassState;
using vgpu::pt::StreamTarget;
using vgpu::pt::TimelineWriter;
using vgpu::pt::Timing;
using vgpu::pt::VirtualTime;
namespace thread_clock = vgpu::pt::thread_clock;

namespace {

double price(const StreamTarget& t, CopyPath path, uint64_t bytes) {
  PassState* s = PassState::get();
  const vgpu::Device* d = s ? s->device(t.device) : nullptr;
  static const simcore::GpuModel unknown{};
  return vgpu::copy_seconds(d ? d->model() : unknown, path, bytes);
}

// The ends of a 1D copy, whose path (host to device, or within a device) is asked inside the
// call's bracket, with the thread's last answer (CallThread::last_copy_path) at hand: asked
// before it, it was charged to the program's clock and looked its thread-local up apart.
struct Between {
  uint64_t dst, src;
};

CopyPath path_of(CopyPath path, CallThread&) { return path; }
CopyPath path_of(Between ends, CallThread& thread) {
  PassState* s = PassState::get();
  if (s == nullptr) return CopyPath::host_device;
  return thread.last_copy_path.path(s, s->address_generation(), ends.dst, ends.src, [s](uint64_t d, uint64_t from) {
    return s->is_device_pointer(d) && s->is_device_pointer(from) ? CopyPath::within_device : CopyPath::host_device;
  });
}

// A copy or set: forwarded, then placed on its stream's virtual timeline for
// `seconds(target, thread)` (`thread`: the calling thread's call state); `synchronous` ones
// (cuMemcpy without Async) also move the thread's clock to their virtual finish. `what()`
// names it on VGPU_TIMELINE (asked after `seconds`, which finds a 1D copy's path).
template <class Call, class Seconds, class What>
[[gnu::always_inline]] inline CUresult timed(CUstream s, bool per_thread, bool synchronous, Seconds seconds,
                                             Call call, What what, uint64_t bytes = 0) {
  thread_clock::Pause pause(synchronous);
  StreamTarget t;
  VirtualTime* vt = VirtualTime::for_call(s, per_thread, &t, pause);
  const CUresult r = synchronous ? call() : pause.real(vgpu::timing::DriverCall::copy, call);
  if (r != CUDA_SUCCESS || vt == nullptr) return r;
  VirtualTime::Bracket none;
  Timing timing;
  timing.seconds = seconds(t, pause.thread());
  if (TimelineWriter::get() != nullptr)
    timing.label = bytes > 0 ? fmt::format("{} {} B", what(), bytes) : std::string(what());
  // An asynchronous one's op is not kept: placed at once when what it waits for is, it makes none
  // (VirtualTimeline::append_unless_placed; an allocation and a free on every copy, issue 21).
  const OpRef op = vt->submit(t, std::move(timing), none, /*keep_op=*/synchronous, &pause);
  if (synchronous) vt->synchronized(op, t.device);
  return r;
}

// `path`: a CopyPath, or a 1D copy's Between.
template <class Path, class Call>
[[gnu::always_inline]] inline CUresult priced(CUstream s, bool per_thread, Path path, uint64_t bytes,
                                              bool synchronous, Call call) {
  CopyPath p = CopyPath::host_device;
  return timed(
      s, per_thread, synchronous,
      [&](const StreamTarget& t, CallThread& thread) {
        p = path_of(path, thread);
        return thread.last_copy_price.seconds(PassState::get(), t.device, p, bytes,
                                              [&] { return price(t, p, bytes); });
      },
      call, [&p] { return copy_path_name(p); }, bytes);
}

// A peer copy's name on VGPU_TIMELINE.
const char* peer_copy() { return "peer copy"; }

// Whether one side of a 2D/3D copy is GPU memory (device or array; unified: as vgpu knows it).
bool on_gpu(CUmemorytype type, CUdeviceptr device) {
  if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY) return true;
  if (type != CU_MEMORYTYPE_UNIFIED) return false;
  PassState* s = PassState::get();
  return s != nullptr && s->is_device_pointer(device);
}

template <class P>
CopyPath path_of(const P& p) {
  return on_gpu(p.srcMemoryType, p.srcDevice) && on_gpu(p.dstMemoryType, p.dstDevice) ? CopyPath::within_device
                                                                                    : CopyPath::host_device;
}

// A copy from virtual device `src_ctx`'s memory to `dst_ctx`'s: within one device at the device's
// price, between two on the virtual cluster's route.
double peer_seconds(const StreamTarget& t, CUcontext dst_ctx, CUcontext src_ctx, uint64_t bytes) {
  PassState* s = PassState::get();
  const int src = s ? s->device_of(src_ctx) : -1, dst = s ? s->device_of(dst_ctx) : -1;
  if (s == nullptr || src < 0 || dst < 0 || src == dst) return price(t, CopyPath::within_device, bytes);
  return vgpu::transfer_seconds(s->topology(), src, dst, bytes);
}

// A peer copy's two contexts as the real driver knows them (a stub becomes its real context).
CUresult real_contexts(CUcontext* dst_ctx, CUcontext* src_ctx) {
  if (CUresult r = vgpu::pt::real_context_arg(dst_ctx); r != CUDA_SUCCESS) return r;
  return vgpu::pt::real_context_arg(src_ctx);
}

uint64_t rows_bytes(size_t width, size_t height, size_t depth = 1) {
  return static_cast<uint64_t>(width) * (height ? height : 1) * (depth ? depth : 1);
}

using U64 = unsigned long long;
#define REAL(name, ...) VGPU_REAL(#name, CUresult (*)(__VA_ARGS__))

}  // namespace

// ---- 1D copies ----
// (name, per-thread variant, path, synchronous) over the real entry point of the same name.
#define VGPU_COPY(sym, ptds, sync, dst_t, src_t)                                                     \
  VGPU_EXPORT CUresult CUDAAPI sym(dst_t dst, src_t src, size_t n) {                                 \
    return priced(nullptr, ptds, Between{(U64)dst, (U64)src}, n, sync,                               \
                  [&] { return REAL(sym, dst_t, src_t, size_t)(dst, src, n); });                     \
  }
#define VGPU_COPY_ASYNC(sym, ptsz, dst_t, src_t)                                                     \
  VGPU_EXPORT CUresult CUDAAPI sym(dst_t dst, src_t src, size_t n, CUstream s) {                     \
    return priced(s, ptsz, Between{(U64)dst, (U64)src}, n, false,                                    \
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

// ---- copies to and from arrays ----
// (name, per-thread variant, path, synchronous); the array side is GPU memory.
#define VGPU_ARRAY_COPY(sym, ptds, path, sync, ...)                                                  \
  VGPU_EXPORT CUresult CUDAAPI sym(VGPU_ARRAY_PARAMS(__VA_ARGS__)) {                                 \
    return priced(nullptr, ptds, path, n, sync, [&] { return REAL(sym, __VA_ARGS__)(a, b, c, n); }); \
  }
#define VGPU_ARRAY_PARAMS(A, B, C, N) A a, B b, C c, N n
VGPU_ARRAY_COPY(cuMemcpyAtoH_v2, false, CopyPath::host_device, true, void*, CUarray, size_t, size_t)
VGPU_ARRAY_COPY(cuMemcpyAtoH_v2_ptds, true, CopyPath::host_device, true, void*, CUarray, size_t, size_t)
VGPU_ARRAY_COPY(cuMemcpyHtoA_v2, false, CopyPath::host_device, true, CUarray, size_t, const void*, size_t)
VGPU_ARRAY_COPY(cuMemcpyHtoA_v2_ptds, true, CopyPath::host_device, true, CUarray, size_t, const void*, size_t)
VGPU_ARRAY_COPY(cuMemcpyAtoD_v2, false, CopyPath::within_device, false, CUdeviceptr, CUarray, size_t, size_t)
VGPU_ARRAY_COPY(cuMemcpyAtoD_v2_ptds, true, CopyPath::within_device, false, CUdeviceptr, CUarray, size_t, size_t)
VGPU_ARRAY_COPY(cuMemcpyDtoA_v2, false, CopyPath::within_device, false, CUarray, size_t, CUdeviceptr, size_t)
VGPU_ARRAY_COPY(cuMemcpyDtoA_v2_ptds, true, CopyPath::within_device, false, CUarray, size_t, CUdeviceptr, size_t)
#undef VGPU_ARRAY_COPY
#undef VGPU_ARRAY_PARAMS
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray dst, size_t dst_off, CUarray src, size_t src_off, size_t n) {
  return priced(nullptr, false, CopyPath::within_device, n, false, [&] {
    return REAL(cuMemcpyAtoA_v2, CUarray, size_t, CUarray, size_t, size_t)(dst, dst_off, src, src_off, n);
  });
}
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoA_v2_ptds(CUarray dst, size_t dst_off, CUarray src, size_t src_off, size_t n) {
  return priced(nullptr, true, CopyPath::within_device, n, false, [&] {
    return REAL(cuMemcpyAtoA_v2_ptds, CUarray, size_t, CUarray, size_t, size_t)(dst, dst_off, src, src_off, n);
  });
}
#define VGPU_ARRAY_COPY_ASYNC(sym, ptsz, A, B, C)                                                    \
  VGPU_EXPORT CUresult CUDAAPI sym(A a, B b, C c, size_t n, CUstream s) {                            \
    return priced(s, ptsz, CopyPath::host_device, n, false,                                          \
                  [&] { return REAL(sym, A, B, C, size_t, CUstream)(a, b, c, n, s); });              \
  }
VGPU_ARRAY_COPY_ASYNC(cuMemcpyAtoHAsync_v2, false, void*, CUarray, size_t)
VGPU_ARRAY_COPY_ASYNC(cuMemcpyAtoHAsync_v2_ptsz, true, void*, CUarray, size_t)
VGPU_ARRAY_COPY_ASYNC(cuMemcpyHtoAAsync_v2, false, CUarray, size_t, const void*)
VGPU_ARRAY_COPY_ASYNC(cuMemcpyHtoAAsync_v2_ptsz, true, CUarray, size_t, const void*)
#undef VGPU_ARRAY_COPY_ASYNC

// ---- 2D and 3D copies ----
#define VGPU_COPY2D(sym, ptds, sync)                                                                 \
  VGPU_EXPORT CUresult CUDAAPI sym(const CUDA_MEMCPY2D* p) {                                         \
    if (p == nullptr) return REAL(sym, const CUDA_MEMCPY2D*)(p);                                     \
    return priced(nullptr, ptds, path_of(*p), rows_bytes(p->WidthInBytes, p->Height), sync,          \
                  [&] { return REAL(sym, const CUDA_MEMCPY2D*)(p); });                               \
  }
#define VGPU_COPY2D_ASYNC(sym, ptsz)                                                                 \
  VGPU_EXPORT CUresult CUDAAPI sym(const CUDA_MEMCPY2D* p, CUstream s) {                             \
    if (p == nullptr) return REAL(sym, const CUDA_MEMCPY2D*, CUstream)(p, s);                        \
    return priced(s, ptsz, path_of(*p), rows_bytes(p->WidthInBytes, p->Height), false,               \
                  [&] { return REAL(sym, const CUDA_MEMCPY2D*, CUstream)(p, s); });                  \
  }
#define VGPU_COPY3D(sym, ptds, sync)                                                                 \
  VGPU_EXPORT CUresult CUDAAPI sym(const CUDA_MEMCPY3D* p) {                                         \
    if (p == nullptr) return REAL(sym, const CUDA_MEMCPY3D*)(p);                                     \
    return priced(nullptr, ptds, path_of(*p), rows_bytes(p->WidthInBytes, p->Height, p->Depth), sync, \
                  [&] { return REAL(sym, const CUDA_MEMCPY3D*)(p); });                               \
  }
#define VGPU_COPY3D_ASYNC(sym, ptsz)                                                                 \
  VGPU_EXPORT CUresult CUDAAPI sym(const CUDA_MEMCPY3D* p, CUstream s) {                             \
    if (p == nullptr) return REAL(sym, const CUDA_MEMCPY3D*, CUstream)(p, s);                        \
    return priced(s, ptsz, path_of(*p), rows_bytes(p->WidthInBytes, p->Height, p->Depth), false,    \
                  [&] { return REAL(sym, const CUDA_MEMCPY3D*, CUstream)(p, s); });                  \
  }
VGPU_COPY2D(cuMemcpy2D_v2, false, true)
VGPU_COPY2D(cuMemcpy2D_v2_ptds, true, true)
VGPU_COPY2D(cuMemcpy2DUnaligned_v2, false, true)
VGPU_COPY2D(cuMemcpy2DUnaligned_v2_ptds, true, true)
VGPU_COPY2D_ASYNC(cuMemcpy2DAsync_v2, false)
VGPU_COPY2D_ASYNC(cuMemcpy2DAsync_v2_ptsz, true)
VGPU_COPY3D(cuMemcpy3D_v2, false, true)
VGPU_COPY3D(cuMemcpy3D_v2_ptds, true, true)
VGPU_COPY3D_ASYNC(cuMemcpy3DAsync_v2, false)
VGPU_COPY3D_ASYNC(cuMemcpy3DAsync_v2_ptsz, true)
#undef VGPU_COPY2D
#undef VGPU_COPY2D_ASYNC
#undef VGPU_COPY3D
#undef VGPU_COPY3D_ASYNC

// ---- copies between virtual devices ----
#define VGPU_PEER(sym, ptds, sync)                                                                   \
  VGPU_EXPORT CUresult CUDAAPI sym(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) { \
    if (CUresult r = real_contexts(&dc, &sc); r != CUDA_SUCCESS) return r;                           \
    return timed(                                                                                    \
        nullptr, ptds, sync, [&](const StreamTarget& t, CallThread&) { return peer_seconds(t, dc, sc, n); }, \
        [&] { return REAL(sym, CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t)(dst, dc, src, sc, n); }, \
        peer_copy);                                                                                  \
  }
#define VGPU_PEER_ASYNC(sym, ptsz)                                                                   \
  VGPU_EXPORT CUresult CUDAAPI sym(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,  \
                                   CUstream s) {                                                     \
    if (CUresult r = real_contexts(&dc, &sc); r != CUDA_SUCCESS) return r;                           \
    return timed(s, ptsz, false,                                                                     \
                 [&](const StreamTarget& t, CallThread&) { return peer_seconds(t, dc, sc, n); },    \
                 [&] {                                                                               \
                   return REAL(sym, CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream)(dst, dc, src, sc, n, s); \
                 },                                                                                  \
                 peer_copy);                                                                         \
  }
#define VGPU_PEER3D(sym, ptds, sync)                                                                 \
  VGPU_EXPORT CUresult CUDAAPI sym(const CUDA_MEMCPY3D_PEER* p) {                                    \
    if (p == nullptr) return REAL(sym, const CUDA_MEMCPY3D_PEER*)(p);                                \
    CUDA_MEMCPY3D_PEER real_p = *p;                                                                  \
    if (CUresult r = real_contexts(&real_p.dstContext, &real_p.srcContext); r != CUDA_SUCCESS) return r; \
    p = &real_p;                                                                                     \
    const uint64_t n = rows_bytes(p->WidthInBytes, p->Height, p->Depth);                             \
    return timed(nullptr, ptds, sync,                                                                \
                 [&](const StreamTarget& t, CallThread&) { return peer_seconds(t, p->dstContext, p->srcContext, n); }, \
                 [&] { return REAL(sym, const CUDA_MEMCPY3D_PEER*)(p); }, peer_copy);              \
  }
#define VGPU_PEER3D_ASYNC(sym, ptsz)                                                                 \
  VGPU_EXPORT CUresult CUDAAPI sym(const CUDA_MEMCPY3D_PEER* p, CUstream s) {                        \
    if (p == nullptr) return REAL(sym, const CUDA_MEMCPY3D_PEER*, CUstream)(p, s);                   \
    CUDA_MEMCPY3D_PEER real_p = *p;                                                                  \
    if (CUresult r = real_contexts(&real_p.dstContext, &real_p.srcContext); r != CUDA_SUCCESS) return r; \
    p = &real_p;                                                                                     \
    const uint64_t n = rows_bytes(p->WidthInBytes, p->Height, p->Depth);                             \
    return timed(s, ptsz, false,                                                                     \
                 [&](const StreamTarget& t, CallThread&) { return peer_seconds(t, p->dstContext, p->srcContext, n); }, \
                 [&] { return REAL(sym, const CUDA_MEMCPY3D_PEER*, CUstream)(p, s); }, peer_copy);   \
  }
VGPU_PEER(cuMemcpyPeer, false, true)
VGPU_PEER(cuMemcpyPeer_ptds, true, true)
VGPU_PEER_ASYNC(cuMemcpyPeerAsync, false)
VGPU_PEER_ASYNC(cuMemcpyPeerAsync_ptsz, true)
VGPU_PEER3D(cuMemcpy3DPeer, false, true)
VGPU_PEER3D(cuMemcpy3DPeer_ptds, true, true)
VGPU_PEER3D_ASYNC(cuMemcpy3DPeerAsync, false)
VGPU_PEER3D_ASYNC(cuMemcpy3DPeerAsync_ptsz, true)
#undef VGPU_PEER
#undef VGPU_PEER_ASYNC
#undef VGPU_PEER3D
#undef VGPU_PEER3D_ASYNC

// ---- 2D sets ----
#define VGPU_SET2D(sym, ptds, value_t, element)                                                      \
  VGPU_EXPORT CUresult CUDAAPI sym(CUdeviceptr dst, size_t pitch, value_t v, size_t w, size_t h) {   \
    return priced(nullptr, ptds, CopyPath::memset, rows_bytes(w * element, h), false,                \
                  [&] { return REAL(sym, CUdeviceptr, size_t, value_t, size_t, size_t)(dst, pitch, v, w, h); }); \
  }
#define VGPU_SET2D_ASYNC(sym, ptsz, value_t, element)                                                \
  VGPU_EXPORT CUresult CUDAAPI sym(CUdeviceptr dst, size_t pitch, value_t v, size_t w, size_t h, CUstream s) { \
    return priced(s, ptsz, CopyPath::memset, rows_bytes(w * element, h), false, [&] {                \
      return REAL(sym, CUdeviceptr, size_t, value_t, size_t, size_t, CUstream)(dst, pitch, v, w, h, s); \
    });                                                                                              \
  }
VGPU_SET2D(cuMemsetD2D8_v2, false, unsigned char, 1)
VGPU_SET2D(cuMemsetD2D8_v2_ptds, true, unsigned char, 1)
VGPU_SET2D(cuMemsetD2D16_v2, false, unsigned short, 2)
VGPU_SET2D(cuMemsetD2D16_v2_ptds, true, unsigned short, 2)
VGPU_SET2D(cuMemsetD2D32_v2, false, unsigned int, 4)
VGPU_SET2D(cuMemsetD2D32_v2_ptds, true, unsigned int, 4)
VGPU_SET2D_ASYNC(cuMemsetD2D8Async, false, unsigned char, 1)
VGPU_SET2D_ASYNC(cuMemsetD2D8Async_ptsz, true, unsigned char, 1)
VGPU_SET2D_ASYNC(cuMemsetD2D16Async, false, unsigned short, 2)
VGPU_SET2D_ASYNC(cuMemsetD2D16Async_ptsz, true, unsigned short, 2)
VGPU_SET2D_ASYNC(cuMemsetD2D32Async, false, unsigned int, 4)
VGPU_SET2D_ASYNC(cuMemsetD2D32Async_ptsz, true, unsigned int, 4)
#undef VGPU_SET2D
#undef VGPU_SET2D_ASYNC
