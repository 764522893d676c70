// cuProfilerStart / cuProfilerStop (cudaProfilerStart/Stop): on a real driver they open and close
// the range a profiler (Nsight Systems, nvprof, CUPTI) collects. No profiler collects on the sim
// backend, so both are accepted with the real driver's checks (initialized, a context current on
// the calling thread); the range bounds what VGPU_CLOCK_REPORT counts (timing/clock_report.h).
#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "front/driver/entry_points.h"
#include "sim/core/virtual_clock.h"
#include "timing/clock_report.h"

namespace {

CUresult profiler_call(const char* call) {
  vgpu::DriverState* d = vgpu::DriverState::get();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (!d->contexts().current()) {
    vgpu::log::warn("{}: no current context on this thread", call);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuProfilerStart(void) {
  VGPU_CALL_SCOPE();
  const CUresult r = profiler_call("cuProfilerStart");
  if (r == CUDA_SUCCESS) vgpu::timing::clock_report::range_start();
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuProfilerStop(void) {
  VGPU_CALL_SCOPE();
  const CUresult r = profiler_call("cuProfilerStop");
  if (r == CUDA_SUCCESS) vgpu::timing::clock_report::range_stop();
  return r;
}
