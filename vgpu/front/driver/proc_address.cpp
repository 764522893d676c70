// cuGetProcAddress / cuGetProcAddress_v2: how runtimes (cudart, Triton, JAX) find every entry
// point. The rule, checked in tests/driver against every answer recorded from a real
// 580-series driver (tests/data/real_driver_h100_580.txt):
//   * per-thread-default-stream requested and the API has _ptds/_ptsz variants: the newest
//     such variant whose version <= the requested one;
//   * otherwise the newest plain variant whose version <= the requested one;
//   * no variant old enough: VERSION_NOT_SUFFICIENT; unknown name: SYMBOL_NOT_FOUND;
//   * a version newer than the driver's own (CUDA_VERSION): CUDA_ERROR_INVALID_VALUE.
// The real _v2 returns CUDA_SUCCESS with a NULL pointer and the status in both failure cases
// (measured); without a status to report through, we return CUDA_ERROR_NOT_FOUND.
#include <algorithm>
#include <iterator>
#include <cstring>

#include "common/log.h"
#include "front/driver/entry_points.h"

namespace vgpu {
namespace {

struct Resolution {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
};

Resolution resolve(const char* symbol, int version, cuuint64_t flags) {
  auto [first, last] = std::equal_range(
      proc_table_begin(), proc_table_end(), symbol,
      [](const auto& a, const auto& b) {
        auto name = [](const auto& x) {
          if constexpr (std::is_same_v<std::decay_t<decltype(x)>, ProcEntry>) return x.api;
          else return static_cast<const char*>(x);
        };
        return std::strcmp(name(a), name(b)) < 0;
      });
  if (first == last) return {};
  const bool want_per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const bool has_per_thread = std::any_of(first, last, [](const ProcEntry& e) { return e.per_thread; });
  const int flavor = (want_per_thread && has_per_thread) ? 1 : 0;
  const ProcEntry* best = nullptr;
  for (const ProcEntry* e = first; e != last; ++e)  // sorted by version within one api
    if (e->per_thread == flavor && e->version <= version) best = e;
  if (best == nullptr) return {nullptr, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT};
  return {best->fn, CU_GET_PROC_ADDRESS_SUCCESS};
}

}  // namespace
}  // namespace vgpu

VGPU_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int driverVersion,
                                                 cuuint64_t flags,
                                                 CUdriverProcAddressQueryResult* symbolStatus) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (driverVersion > CUDA_VERSION) {  // asks for a newer CUDA than this driver is (measured)
    *pfn = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto r = vgpu::resolve(symbol, driverVersion, flags);
  *pfn = r.fn;
  if (symbolStatus != nullptr) *symbolStatus = r.status;
  vgpu::log::trace("cuGetProcAddress({}, {}, {}) -> {}", symbol, driverVersion, flags,
                   static_cast<int>(r.status));
  if (r.fn == nullptr && symbolStatus == nullptr) return CUDA_ERROR_NOT_FOUND;
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int driverVersion,
                                              cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, driverVersion, flags, nullptr);
}
