// What a measurement adds to the kernel it measures, measured once per context.
//
// A launch measured alone (measure_lock.h) is gated: its stream waits on a host flag, then runs
// begin event, kernel, end event (virtual_time.h, Bracket). After the wait the GPU's front end
// starts the kernel later than it starts a kernel queued behind busy work, where the launch was
// fetched while the op before it ran. On an H200 (2026-11-26, a GPT-2 step, vgpu's timeline
// against torch.profiler's kernel records of the same step on the real GPU) every measured kernel
// read about 4 us long: 8.8 -> 13.0 us for a bf16 copy, 36.4 -> 41.0 us for a GEMM; +8% over a
// step of 839 kernels.
//
// The calibration: an empty kernel measured the gated way (the median of several, the first left
// out), against the period of empty kernels queued back to back (what one costs in a busy
// stream). The difference is what the gate adds; each gated measurement gives it back, and no
// measured kernel reads shorter than that period.
#pragma once

#include <cstdint>

#include "front/driver/cuda_api.h"

namespace vgpu::pt {

struct GateLatency {
  double overhead = 0;  // seconds added to a gated measurement
  double floor = 0;     // seconds: the shortest a measured kernel reads; 0: not calibrated
  bool calibrated() const { return floor > 0; }
};

// Measures it in the current context `ctx` (its own module, stream and events, all released
// before returning), with the context's gate: `host` / `device` the flag, `value` its counter
// (the caller holds the measurement lock). Not calibrated when it cannot measure, or when what it
// read is implausible (another process's work held the GPU): the caller may ask again.
GateLatency measure_gate_latency(volatile uint32_t* host, CUdeviceptr device, uint32_t* value);

}  // namespace vgpu::pt
