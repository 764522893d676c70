// cuProfilerStart / cuProfilerStop under the passthrough: forwarded to the real driver (a profiler
// attached to the process still sees its range), and the range also bounds what
// VGPU_CLOCK_REPORT counts (timing/clock_report.h): a training loop's steady steps, without its
// start-up, when the program marks them as it would for Nsight Systems.
#include "front/driver/entry_points.h"
#include "passthrough/passthrough_state.h"
#include "timing/clock_report.h"

VGPU_EXPORT CUresult CUDAAPI cuProfilerStart(void) {
  const CUresult r = VGPU_REAL("cuProfilerStart", CUresult (*)())();
  if (r == CUDA_SUCCESS) vgpu::timing::clock_report::range_start();
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuProfilerStop(void) {
  const CUresult r = VGPU_REAL("cuProfilerStop", CUresult (*)())();
  if (r == CUDA_SUCCESS) vgpu::timing::clock_report::range_stop();
  return r;
}
