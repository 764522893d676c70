// The launch latency both backends' timelines add to a thread's clock: the earliest an op the
// thread issues now can start on the GPU. Split from sim/core/virtual_clock.h so that the
// passthrough takes the same figure without including the sim backend.
#pragma once

namespace vgpu::vclock {

// Time from a host call to the moment the GPU can start the op: the order of a real driver's
// launch latency on an H100 (a few microseconds from cuLaunchKernel to kernel start).
inline constexpr double kLaunchLatency = 4e-6;

}  // namespace vgpu::vclock
