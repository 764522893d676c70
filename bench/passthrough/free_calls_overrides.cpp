// A "real driver" whose hot calls cost next to nothing (free_calls_driver: the passthrough tests'
// recording_driver.cpp forwarding everything else to the sim backend's library), so that
// `passthrough_call_overhead` run over it measures vgpu's own work per call without a GPU: the
// difference between the two libraries' time per call is what vgpu adds.
//
// Device memory is address space only: an allocation is the next unused range of a region no
// other mapping uses (nothing is behind it: the bench never touches it), and a free forgets it, so
// that the allocation row measures vgpu's own accounting rather than the sim's host-backed memory.
//
// A launch, an async copy and a stream's wait are accepted and do nothing but count: the GPU
// they stand for is infinitely fast in real time, while each kernel takes kKernelNs of its own
// clock, so that vgpu measures and settles launches as on a GPU, and a loop of launches keeps
// the virtual GPU busy as an empty kernel's ~2 us do on a real one. Events are the driver's own
// small objects: a record stamps that clock, a query and a synchronization find them complete,
// and the elapsed time between two records is their stamps apart.
#include <atomic>
#include <cstdint>

#include "front/driver/cuda_api.h"

namespace {

constexpr uint64_t kKernelNs = 2000;

struct FreeEvent {
  std::atomic<uint64_t> stamp{0};  // the GPU clock when recorded, + 1; 0: never recorded
};

std::atomic<uint64_t> g_gpu_ns{0};  // the GPU's clock: every kernel launched so far

FreeEvent* of(CUevent e) { return reinterpret_cast<FreeEvent*>(e); }

// Where the stand-in's device addresses lie: above the user half's usual mappings (and the sim's
// host-backed memory), 2 MiB-aligned as the real driver's large allocations are.
constexpr CUdeviceptr kAddressBase = 1ull << 46;
constexpr CUdeviceptr kAddressEnd = 1ull << 47;
std::atomic<CUdeviceptr> g_next_address{kAddressBase};

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned,
                                            unsigned, unsigned, CUstream, void**, void**) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  g_gpu_ns.fetch_add(kKernelNs, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  constexpr CUdeviceptr kAlign = 2ull << 20;
  const CUdeviceptr size = (static_cast<CUdeviceptr>(bytes) + kAlign - 1) / kAlign * kAlign;
  const CUdeviceptr at = g_next_address.fetch_add(size, std::memory_order_relaxed);
  if (at + size > kAddressEnd) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = at;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) {
  return p >= kAddressBase && p < g_next_address.load(std::memory_order_relaxed) ? CUDA_SUCCESS
                                                                                : CUDA_ERROR_INVALID_VALUE;
}

VGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t, CUstream) {
  return dst != 0 && src != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

VGPU_EXPORT CUresult CUDAAPI cuStreamWaitValue32_v2(CUstream, CUdeviceptr, cuuint32_t, unsigned) {
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream, CUevent e, unsigned) {
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

VGPU_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned) {
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(new FreeEvent);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent e) {
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete of(e);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }

VGPU_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream) {
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  of(e)->stamp.store(g_gpu_ns.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned) { return cuEventRecord(e, s); }

VGPU_EXPORT CUresult CUDAAPI cuEventQuery(CUevent e) { return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

VGPU_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const uint64_t ta = of(a)->stamp.load(std::memory_order_relaxed), tb = of(b)->stamp.load(std::memory_order_relaxed);
  if (ta == 0 || tb == 0) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(static_cast<double>(tb > ta ? tb - ta : 0) * 1e-6);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  return cuEventElapsedTime(ms, a, b);
}
