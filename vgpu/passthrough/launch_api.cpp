// Kernel launches under the passthrough backend: forwarded to the real driver as they are;
// with VGPU_KERNEL_DB set, each one is also measured (kernel_recording.h).
#include "driver/cuda_api.h"
#include "passthrough/kernel_recording.h"
#include "passthrough/passthrough_state.h"

using vgpu::LaunchShape;
using vgpu::pt::KernelRecording;

namespace {

// Forwards `launch`, bracketed by the recorder when one is active.
template <class Launch>
CUresult recorded(CUfunction f, const LaunchShape& shape, void** params, void** extra, Launch launch) {
  KernelRecording* rec = KernelRecording::get();
  if (rec == nullptr || f == nullptr || !rec->begin(f, shape, params, extra)) return launch();
  const CUresult r = launch();
  rec->end();
  return r;
}

LaunchShape shape_of(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned shared) {
  return {{gx, gy, gz}, {bx, by, bz}, shared};
}

LaunchShape shape_of(const CUlaunchConfig* c) {
  return c ? shape_of(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                      c->sharedMemBytes)
           : LaunchShape{};
}

using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, CUstream, void**, void**);
using LaunchKernelExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);

CUresult launch_kernel(LaunchKernelFn real, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  return recorded(f, shape_of(gx, gy, gz, bx, by, bz, shared), params, extra, [&] {
    return real(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
  });
}

CUresult launch_kernel_ex(LaunchKernelExFn real, const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return recorded(f, shape_of(c), params, extra,
                  [&] { return real(c, f, params, extra); });
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                            unsigned by, unsigned bz, unsigned shared, CUstream s,
                                            void** params, void** extra) {
  return launch_kernel(VGPU_REAL("cuLaunchKernel", LaunchKernelFn), f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                 unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                                 CUstream s, void** params, void** extra) {
  return launch_kernel(VGPU_REAL("cuLaunchKernel_ptsz", LaunchKernelFn), f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return launch_kernel_ex(VGPU_REAL("cuLaunchKernelEx", LaunchKernelExFn), c, f, params, extra);
}
VGPU_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params,
                                                   void** extra) {
  return launch_kernel_ex(VGPU_REAL("cuLaunchKernelEx_ptsz", LaunchKernelExFn), c, f, params, extra);
}
