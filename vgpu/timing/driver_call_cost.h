// What a real driver's call costs the calling thread when it does not wait: the sim backend's
// figure for the driver time it charges (the passthrough times each real call instead:
// passthrough/thread_clock.h, Pause::real). Both backends thereby charge a host-bound loop of
// small ops (an optimizer over many tensors, nccl-tests' small sizes) what a real machine's
// thread pays in the driver, and nothing for vgpu's own work.
//
// Measured on the H200 hosts of the device machines, 2026-11-26, real driver 580.159.04
// (`passthrough_call_overhead`, the real driver's column; docs/results.md): cuLaunchKernel of an
// empty kernel 340,404 calls/s, cuMemcpyHtoDAsync of 4 KiB 388,440/s, cuEventRecord 8,598,947/s.
#pragma once

namespace vgpu::timing {

inline constexpr double kRealLaunchSeconds = 1.0 / 340404.0;       // 2.94 us
inline constexpr double kRealCopySeconds = 1.0 / 388440.0;         // 2.57 us (copies and sets)
inline constexpr double kRealEventRecordSeconds = 1.0 / 8598947.0;  // 0.12 us

}  // namespace vgpu::timing
