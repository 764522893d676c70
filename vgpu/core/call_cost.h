// What the real driver's own calls cost the calling thread, charged to its virtual clock in
// place of the time vgpu spends inside them (vgpu's own work — measuring, bookkeeping, waiting
// for a GPU that several virtual GPUs share — is not the program's). Without it a host-bound
// loop of small operations (nccl-tests' small sizes, a launch-bound training step) reads faster
// than the real machine runs it.
//
// Measured on an H100 80GB HBM3, driver 580.159.04, 2026-11-25, as the real driver's call rate in
// a loop (bench/passthrough/call_overhead_bench.cpp: 223,438 launches/s, 5,577,644 event
// records/s, 366,529 4 KiB pinned async copies/s).
#pragma once

namespace vgpu::call_cost {

inline constexpr double kLaunchSeconds = 1.0 / 223438;     // cuLaunchKernel(Ex), 4.48 us
inline constexpr double kEventRecordSeconds = 1.0 / 5577644;  // cuEventRecord, 0.18 us
inline constexpr double kAsyncCopySeconds = 1.0 / 366529;  // cuMemcpy*Async, 2.73 us

}  // namespace vgpu::call_cost
