// Every exported entry point of the sim backend's libcuda.so.1, defined here over its
// implementation: the driver's sources are compiled with entry_renames.h force-included, so
// what a file writes as cuMemAlloc_v2 is vgpu_impl_cuMemAlloc_v2, and this file alone defines
// the exported names (and cuGetProcAddress's table points here too).
//
// Why: a program must learn why a call was refused. Each implementation says so where it knows
// more (a log line naming the bad argument); whatever error return went without a line on the
// calling thread (a NULL pointer, a call before cuInit, a stale handle found deep inside) gets
// one here, "cuEventRecord: CUDA_ERROR_INVALID_HANDLE (400)", at level warn. Answers that are
// not failures (CUDA_ERROR_NOT_READY from a query) are not logged. The cost on a call that
// succeeds is one thread-local read.
#define VGPU_NO_ENTRY_RENAMES 1

#include "common/log.h"
#include "front/driver/entry_points.h"

namespace vgpu {
namespace {

inline uint64_t lines_now() {
  return log::enabled(log::Level::warn) ? log::lines_written_here() : 0;
}

inline CUresult reported(const char* api, uint64_t lines_before, CUresult r) {
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY && log::enabled(log::Level::warn) &&
      log::lines_written_here() == lines_before)
    log::warn("{}: {} ({})", api, error_name(r), static_cast<int>(r));
  return r;
}

}  // namespace
}  // namespace vgpu

#define VGPU_HIDDEN_ENTRY(sym)
// Graphics interop entry points are exported by driver/default_entries.cpp as they are.
#define VGPU_INTEROP_ENTRY(sym)
#define VGPU_ENTRY(sym, params, args, forwarded) extern "C" CUresult CUDAAPI vgpu_impl_##sym params;
#include "entries.inc"
#undef VGPU_ENTRY

#define VGPU_ENTRY(sym, params, args, forwarded)                   \
  VGPU_EXPORT CUresult CUDAAPI sym params {                        \
    const uint64_t lines = ::vgpu::lines_now();                    \
    return ::vgpu::reported(#sym, lines, vgpu_impl_##sym args);    \
  }
#include "entries.inc"
#undef VGPU_ENTRY
#undef VGPU_HIDDEN_ENTRY
#undef VGPU_INTEROP_ENTRY
