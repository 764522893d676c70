// Every exported entry point of the sim backend's libcuda.so.1, defined here over its
// implementation: the driver's sources are compiled with entry_renames.h force-included, so
// what a file writes as cuMemAlloc_v2 is vgpu_impl_cuMemAlloc_v2, and this file alone defines
// the exported names (and cuGetProcAddress's table points here too).
//
// Why: a program must learn why a call was refused. Each implementation says so where it knows
// more (a log line naming the bad argument); whatever error return went without a line on the
// calling thread (a NULL pointer, a call before cuInit, a stale handle found deep inside) gets
// one here, "cuEventRecord: CUDA_ERROR_INVALID_HANDLE (400)", at level warn. Answers that are
// not failures (CUDA_ERROR_NOT_READY from a query) are not logged. Where no line would be
// written (the default level, off) an entry point is a jump to its implementation; otherwise a
// call that succeeds costs one thread-local read.
#define VGPU_NO_ENTRY_RENAMES 1

#include <atomic>
#include <cstdint>

#include "common/log.h"
#include "front/driver/entry_points.h"

namespace vgpu {
namespace {

// Whether error returns get their line (VGPU_LOG_LEVEL at warn or below): -1 until the first
// call asks (log::threshold()), then 0 or 1. Read by every entry point, inline and without a
// static's guard, whose slow path made each entry point save registers: the level's
// out-of-line lookup, the line count and the out-of-line check of the result were ~35
// instructions of every call, a tenth of an event record's own work (issue 21).
std::atomic<int8_t> g_error_lines{-1};

// The lines this thread wrote before a call, or kNoLines when none are written at all (and the
// setting, on the first call).
constexpr uint64_t kNoLines = UINT64_MAX;
[[gnu::noinline]] uint64_t lines_before() {
  int8_t on = g_error_lines.load(std::memory_order_relaxed);
  if (on < 0) {
    on = log::enabled(log::Level::warn) ? 1 : 0;
    g_error_lines.store(on, std::memory_order_relaxed);
  }
  return on != 0 ? log::lines_written_here() : kNoLines;
}

[[gnu::noinline]] CUresult reported(const char* api, uint64_t lines_before, CUresult r) {
  if (r != CUDA_ERROR_NOT_READY && lines_before != kNoLines && log::lines_written_here() == lines_before)
    log::warn("{}: {} ({})", api, error_name(r), static_cast<int>(r));
  return r;
}

// An entry point's call (`Impl`, named `api`) while error lines may be written, out of line: the
// entry point itself is a test and a jump when none is.
template <auto Impl> struct WithErrorLine;
template <class... A, CUresult (*Impl)(A...)> struct WithErrorLine<Impl> {
  const char* api;
  [[gnu::noinline]] CUresult operator()(A... a) const {
    const uint64_t lines = lines_before();
    const CUresult r = Impl(a...);
    return r == CUDA_SUCCESS ? r : reported(api, lines, r);
  }
};

}  // namespace
}  // namespace vgpu

#define VGPU_HIDDEN_ENTRY(sym)
// Graphics interop entry points are exported by driver/default_entries.cpp as they are.
#define VGPU_INTEROP_ENTRY(sym)
#define VGPU_ENTRY(sym, params, args, forwarded) extern "C" CUresult CUDAAPI vgpu_impl_##sym params;
#include "entries.inc"
#undef VGPU_ENTRY

#define VGPU_ENTRY(sym, params, args, forwarded)                               \
  VGPU_EXPORT CUresult CUDAAPI sym params {                                    \
    if (::vgpu::g_error_lines.load(std::memory_order_relaxed) == 0)            \
      return vgpu_impl_##sym args;                                             \
    return ::vgpu::WithErrorLine<&vgpu_impl_##sym>{#sym} args;                 \
  }
#include "entries.inc"
#undef VGPU_ENTRY
#undef VGPU_HIDDEN_ENTRY
#undef VGPU_INTEROP_ENTRY
