// Every cuMemcpy* and cuMemset* entry point: each describes its copy and calls the engine
// (copy.cpp). Synchronous forms wait on the stream (legacy default stream, or the per-thread one
// for _ptds); async forms queue on the given stream (_ptsz: per-thread default for 0).
#include <cstring>

#include "front/driver/entry_points.h"
#include "sim/core/virtual_clock.h"
#include "sim/memory/api_util.h"
#include "sim/memory/copy.h"

using namespace vgpu;
using vgpu::sim::copy1d;
using vgpu::sim::copy3d;
using vgpu::sim::memset2d;
using vgpu::sim::Submit;

namespace {

constexpr CUmemorytype H = CU_MEMORYTYPE_HOST, D = CU_MEMORYTYPE_DEVICE, U = CU_MEMORYTYPE_UNIFIED;
constexpr Submit kSync{nullptr, false, false};
constexpr Submit kSyncPt{nullptr, false, true};
Submit async(CUstream s, bool pt = false) { return Submit{s, true, pt}; }
uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

template <class P> CUDA_MEMCPY3D from2d(const P& p) {
  CUDA_MEMCPY3D q{};
  q.srcXInBytes = p.srcXInBytes; q.srcY = p.srcY; q.srcMemoryType = p.srcMemoryType;
  q.srcHost = p.srcHost; q.srcDevice = p.srcDevice; q.srcArray = p.srcArray; q.srcPitch = p.srcPitch;
  q.dstXInBytes = p.dstXInBytes; q.dstY = p.dstY; q.dstMemoryType = p.dstMemoryType;
  q.dstHost = p.dstHost; q.dstDevice = p.dstDevice; q.dstArray = p.dstArray; q.dstPitch = p.dstPitch;
  q.WidthInBytes = p.WidthInBytes; q.Height = p.Height; q.Depth = 1;
  return q;
}
template <class P> CUDA_MEMCPY3D from3d(const P& p) {
  CUDA_MEMCPY3D q{};
  q.srcXInBytes = p.srcXInBytes; q.srcY = p.srcY; q.srcZ = p.srcZ; q.srcMemoryType = p.srcMemoryType;
  q.srcHost = p.srcHost; q.srcDevice = p.srcDevice; q.srcArray = p.srcArray; q.srcPitch = p.srcPitch;
  q.srcHeight = p.srcHeight;
  q.dstXInBytes = p.dstXInBytes; q.dstY = p.dstY; q.dstZ = p.dstZ; q.dstMemoryType = p.dstMemoryType;
  q.dstHost = p.dstHost; q.dstDevice = p.dstDevice; q.dstArray = p.dstArray; q.dstPitch = p.dstPitch;
  q.dstHeight = p.dstHeight;
  q.WidthInBytes = p.WidthInBytes; q.Height = p.Height; q.Depth = p.Depth;
  return q;
}

// A memory type as the program stored it, read without loading it as a CUmemorytype (a value
// outside the enum, say 77, is undefined behaviour to load): only the four real ones pass.
bool known_memory_type(const CUmemorytype& field) {
  int v;
  std::memcpy(&v, &field, sizeof v);
  return v == CU_MEMORYTYPE_HOST || v == CU_MEMORYTYPE_DEVICE || v == CU_MEMORYTYPE_ARRAY ||
         v == CU_MEMORYTYPE_UNIFIED;
}
template <class P> CUresult check_memory_types(const char* call, const P& p) {
  if (!known_memory_type(p.srcMemoryType) || !known_memory_type(p.dstMemoryType)) {
    int src, dst;
    std::memcpy(&src, &p.srcMemoryType, sizeof src);
    std::memcpy(&dst, &p.dstMemoryType, sizeof dst);
    return sim::fail(CUDA_ERROR_INVALID_VALUE, "{}: memory types {} -> {}: not a CUmemorytype", call, src, dst);
  }
  return CUDA_SUCCESS;
}

// A 2D copy's rows must fit their pitch; the 2D API checks that even for Height == 1.
template <class P> CUresult copy2d(const char* call, const P* p, Submit how) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_memory_types(call, *p); r != CUDA_SUCCESS) return r;
  CUDA_MEMCPY3D q = from2d(*p);
  if ((q.srcMemoryType != CU_MEMORYTYPE_ARRAY && q.srcPitch != 0 && q.WidthInBytes > q.srcPitch) ||
      (q.dstMemoryType != CU_MEMORYTYPE_ARRAY && q.dstPitch != 0 && q.WidthInBytes > q.dstPitch))
    return sim::fail(CUDA_ERROR_INVALID_VALUE, "{}: width exceeds pitch", call);
  return copy3d(call, q, how);
}
template <class P> CUresult copy3d_any(const char* call, const P* p, Submit how) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p->reserved0 != nullptr || p->reserved1 != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_memory_types(call, *p); r != CUDA_SUCCESS) return r;
  return copy3d(call, from3d(*p), how);
}

// Array <-> linear copies of the 1D API: the array is addressed as its bytes in row order.
CUresult array1d(const char* call, CUarray dst_arr, size_t dst_off, CUmemorytype dst_type, uintptr_t dst,
                 CUarray src_arr, size_t src_off, CUmemorytype src_type, uintptr_t src, size_t bytes, Submit how) {
  if (bytes == 0) return CUDA_SUCCESS;
  CUDA_MEMCPY3D q{};
  q.WidthInBytes = bytes; q.Height = 1; q.Depth = 1;
  if (src_arr) {
    q.srcMemoryType = CU_MEMORYTYPE_ARRAY; q.srcArray = src_arr; q.srcXInBytes = src_off;
  } else {
    q.srcMemoryType = src_type; q.srcHost = reinterpret_cast<const void*>(src); q.srcDevice = src;
  }
  if (dst_arr) {
    q.dstMemoryType = CU_MEMORYTYPE_ARRAY; q.dstArray = dst_arr; q.dstXInBytes = dst_off;
  } else {
    q.dstMemoryType = dst_type; q.dstHost = reinterpret_cast<void*>(dst); q.dstDevice = dst;
  }
  return copy3d(call, q, how);
}

// Peer copies name each side's context: both must be live.
CUresult check_contexts(const char* call, CUcontext a, CUcontext b) {
  DriverState* d = DriverState::get();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::shared_ptr<Context> x, y;
  if (d->contexts().resolve(a, &x) != CUDA_SUCCESS || a == nullptr || d->contexts().resolve(b, &y) != CUDA_SUCCESS ||
      b == nullptr)
    return sim::fail(CUDA_ERROR_INVALID_CONTEXT, "{}: a context given is not live", call);
  return CUDA_SUCCESS;
}

}  // namespace

// ---- 1D ----------------------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpy", U, dst, U, src, n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpy", U, dst, U, src, n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyAsync", U, dst, U, src, n, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyAsync", U, dst, U, src, n, async(s, true)); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyHtoD", D, dst, H, addr(src), n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyHtoD", D, dst, H, addr(src), n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr_v1 dst, const void* src, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyHtoD_v2(dst, src, n); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyHtoDAsync", D, dst, H, addr(src), n, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyHtoDAsync", D, dst, H, addr(src), n, async(s, true)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void* src, unsigned int n, CUstream s) { VGPU_CALL_SCOPE(); return cuMemcpyHtoDAsync_v2(dst, src, n, s); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoH", H, addr(dst), D, src, n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoH", H, addr(dst), D, src, n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoH(void* dst, CUdeviceptr_v1 src, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyDtoH_v2(dst, src, n); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoHAsync", H, addr(dst), D, src, n, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoHAsync", H, addr(dst), D, src, n, async(s, true)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr_v1 src, unsigned int n, CUstream s) { VGPU_CALL_SCOPE(); return cuMemcpyDtoHAsync_v2(dst, src, n, s); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoD", D, dst, D, src, n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoD", D, dst, D, src, n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyDtoD_v2(dst, src, n); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoDAsync", D, dst, D, src, n, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return copy1d("cuMemcpyDtoDAsync", D, dst, D, src, n, async(s, true)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n, CUstream s) { VGPU_CALL_SCOPE(); return cuMemcpyDtoDAsync_v2(dst, src, n, s); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
  VGPU_CALL_SCOPE();
  if (CUresult r = check_contexts("cuMemcpyPeer", dctx, sctx); r != CUDA_SUCCESS) return r;
  return copy1d("cuMemcpyPeer", D, dst, D, src, n, kSync);
}
VGPU_EXPORT CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
  VGPU_CALL_SCOPE();
  if (CUresult r = check_contexts("cuMemcpyPeer", dctx, sctx); r != CUDA_SUCCESS) return r;
  return copy1d("cuMemcpyPeer", D, dst, D, src, n, kSyncPt);
}
VGPU_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s) {
  VGPU_CALL_SCOPE();
  if (CUresult r = check_contexts("cuMemcpyPeerAsync", dctx, sctx); r != CUDA_SUCCESS) return r;
  return copy1d("cuMemcpyPeerAsync", D, dst, D, src, n, async(s));
}
VGPU_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s) {
  VGPU_CALL_SCOPE();
  if (CUresult r = check_contexts("cuMemcpyPeerAsync", dctx, sctx); r != CUDA_SUCCESS) return r;
  return copy1d("cuMemcpyPeerAsync", D, dst, D, src, n, async(s, true));
}

// ---- arrays, 1D --------------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoA_v2(CUarray a, size_t off, const void* src, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyHtoA", a, off, H, 0, nullptr, 0, H, addr(src), n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoA_v2_ptds(CUarray a, size_t off, const void* src, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyHtoA", a, off, H, 0, nullptr, 0, H, addr(src), n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoA(CUarray a, unsigned int off, const void* src, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyHtoA_v2(a, off, src, n); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync_v2(CUarray a, size_t off, const void* src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyHtoAAsync", a, off, H, 0, nullptr, 0, H, addr(src), n, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync_v2_ptsz(CUarray a, size_t off, const void* src, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyHtoAAsync", a, off, H, 0, nullptr, 0, H, addr(src), n, async(s, true)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync(CUarray a, unsigned int off, const void* src, unsigned int n, CUstream s) { VGPU_CALL_SCOPE(); return cuMemcpyHtoAAsync_v2(a, off, src, n, s); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoH_v2(void* dst, CUarray a, size_t off, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoH", nullptr, 0, H, addr(dst), a, off, H, 0, n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoH_v2_ptds(void* dst, CUarray a, size_t off, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoH", nullptr, 0, H, addr(dst), a, off, H, 0, n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoH(void* dst, CUarray a, unsigned int off, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyAtoH_v2(dst, a, off, n); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync_v2(void* dst, CUarray a, size_t off, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoHAsync", nullptr, 0, H, addr(dst), a, off, H, 0, n, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync_v2_ptsz(void* dst, CUarray a, size_t off, size_t n, CUstream s) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoHAsync", nullptr, 0, H, addr(dst), a, off, H, 0, n, async(s, true)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync(void* dst, CUarray a, unsigned int off, unsigned int n, CUstream s) { VGPU_CALL_SCOPE(); return cuMemcpyAtoHAsync_v2(dst, a, off, n, s); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray a, size_t off, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoD", nullptr, 0, D, dst, a, off, H, 0, n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoD_v2_ptds(CUdeviceptr dst, CUarray a, size_t off, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoD", nullptr, 0, D, dst, a, off, H, 0, n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoD(CUdeviceptr_v1 dst, CUarray a, unsigned int off, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyAtoD_v2(dst, a, off, n); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyDtoA", a, off, H, 0, nullptr, 0, D, src, n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr src, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyDtoA", a, off, H, 0, nullptr, 0, D, src, n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoA(CUarray a, unsigned int off, CUdeviceptr_v1 src, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyDtoA_v2(a, off, src, n); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoA", dst, doff, H, 0, src, soff, H, 0, n, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoA_v2_ptds(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n) { VGPU_CALL_SCOPE(); return array1d("cuMemcpyAtoA", dst, doff, H, 0, src, soff, H, 0, n, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoA(CUarray dst, unsigned int doff, CUarray src, unsigned int soff, unsigned int n) { VGPU_CALL_SCOPE(); return cuMemcpyAtoA_v2(dst, doff, src, soff, n); }

// ---- 2D and 3D ---------------------------------------------------------------------------------

VGPU_EXPORT CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D* p) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2D", p, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* p) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2D", p, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2D(const CUDA_MEMCPY2D_v1* p) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2D", p, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* p) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2DUnaligned", p, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* p) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2DUnaligned", p, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned(const CUDA_MEMCPY2D_v1* p) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2DUnaligned", p, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* p, CUstream s) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2DAsync", p, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* p, CUstream s) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2DAsync", p, async(s, true)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D_v1* p, CUstream s) { VGPU_CALL_SCOPE(); return copy2d("cuMemcpy2DAsync", p, async(s)); }

VGPU_EXPORT CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D* p) { VGPU_CALL_SCOPE(); return copy3d_any("cuMemcpy3D", p, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* p) { VGPU_CALL_SCOPE(); return copy3d_any("cuMemcpy3D", p, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3D(const CUDA_MEMCPY3D_v1* p) { VGPU_CALL_SCOPE(); return copy3d_any("cuMemcpy3D", p, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* p, CUstream s) { VGPU_CALL_SCOPE(); return copy3d_any("cuMemcpy3DAsync", p, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* p, CUstream s) { VGPU_CALL_SCOPE(); return copy3d_any("cuMemcpy3DAsync", p, async(s, true)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D_v1* p, CUstream s) { VGPU_CALL_SCOPE(); return copy3d_any("cuMemcpy3DAsync", p, async(s)); }

namespace {
CUresult copy3d_peer(const char* call, const CUDA_MEMCPY3D_PEER* p, Submit how) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p->srcMemoryType != CU_MEMORYTYPE_ARRAY || p->dstMemoryType != CU_MEMORYTYPE_ARRAY) {
    CUcontext s = p->srcMemoryType == CU_MEMORYTYPE_ARRAY ? p->dstContext : p->srcContext;
    CUcontext d = p->dstMemoryType == CU_MEMORYTYPE_ARRAY ? p->srcContext : p->dstContext;
    if (CUresult r = check_contexts(call, d, s); r != CUDA_SUCCESS) return r;
  }
  return copy3d(call, from3d(*p), how);
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* p) { VGPU_CALL_SCOPE(); return copy3d_peer("cuMemcpy3DPeer", p, kSync); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* p) { VGPU_CALL_SCOPE(); return copy3d_peer("cuMemcpy3DPeer", p, kSyncPt); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* p, CUstream s) { VGPU_CALL_SCOPE(); return copy3d_peer("cuMemcpy3DPeerAsync", p, async(s)); }
VGPU_EXPORT CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* p, CUstream s) { VGPU_CALL_SCOPE(); return copy3d_peer("cuMemcpy3DPeerAsync", p, async(s, true)); }

// ---- sets --------------------------------------------------------------------------------------

#define VGPU_MEMSET(WIDTH, T)                                                                           \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD##WIDTH##_v2(CUdeviceptr d, T v, size_t n) {                    \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD" #WIDTH, d, 0, v, WIDTH / 8, n, 1, kSync);                               \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD##WIDTH##_v2_ptds(CUdeviceptr d, T v, size_t n) {               \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD" #WIDTH, d, 0, v, WIDTH / 8, n, 1, kSyncPt);                             \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD##WIDTH(CUdeviceptr_v1 d, T v, unsigned int n) {                \
    VGPU_CALL_SCOPE();                                                                                  \
    return cuMemsetD##WIDTH##_v2(d, v, n);                                                              \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD##WIDTH##Async(CUdeviceptr d, T v, size_t n, CUstream s) {      \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD" #WIDTH "Async", d, 0, v, WIDTH / 8, n, 1, async(s));                    \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD##WIDTH##Async_ptsz(CUdeviceptr d, T v, size_t n, CUstream s) { \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD" #WIDTH "Async", d, 0, v, WIDTH / 8, n, 1, async(s, true));              \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD2D##WIDTH##_v2(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) { \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD2D" #WIDTH, d, pitch, v, WIDTH / 8, w, h, kSync);                         \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD2D##WIDTH##_v2_ptds(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) { \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD2D" #WIDTH, d, pitch, v, WIDTH / 8, w, h, kSyncPt);                       \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD2D##WIDTH(CUdeviceptr_v1 d, unsigned int pitch, T v, unsigned int w, unsigned int h) { \
    VGPU_CALL_SCOPE();                                                                                  \
    return cuMemsetD2D##WIDTH##_v2(d, pitch, v, w, h);                                                  \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD2D##WIDTH##Async(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s) { \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD2D" #WIDTH "Async", d, pitch, v, WIDTH / 8, w, h, async(s));              \
  }                                                                                                     \
  VGPU_EXPORT CUresult CUDAAPI cuMemsetD2D##WIDTH##Async_ptsz(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s) { \
    VGPU_CALL_SCOPE();                                                                                  \
    return memset2d("cuMemsetD2D" #WIDTH "Async", d, pitch, v, WIDTH / 8, w, h, async(s, true));        \
  }

VGPU_MEMSET(8, unsigned char)
VGPU_MEMSET(16, unsigned short)
VGPU_MEMSET(32, unsigned int)
#undef VGPU_MEMSET
