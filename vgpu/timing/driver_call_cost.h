// What a real driver's call costs the calling thread when it does not wait, charged to the
// thread's virtual clock by both backends once the op took its issue time: a host-bound loop of
// small ops (an optimizer over many tensors, nccl-tests' small sizes) pays on the virtual
// cluster what a real machine's thread pays in the driver, and nothing for vgpu's own work.
//
// A table, not the passthrough's own reading of each real call (when it charges at all, below): on a GPU shared by several
// virtual GPUs the real driver waits inside calls (a full launch queue, another context's time
// slice) that a real machine's thread would not; charged call by call, that made nccl-tests'
// 64-256 KiB send/recv and all-gather 30-50% slow on 2 x H200 (docs/results.md, 2026-11-26).
//
// Measured on the H200 hosts of the device machines, 2026-11-26, real driver 580.159.04
// (`passthrough_call_overhead`, the real driver's column): cuLaunchKernel of an empty kernel
// 340,404 calls/s, cuMemcpyHtoDAsync of 4 KiB 388,440/s, cuEventRecord 8,598,947/s. Calls not
// measured (cuStreamWaitEvent, cuGraphLaunch's own beyond a launch) are charged nothing.
#pragma once

namespace vgpu::timing {

enum class DriverCall { launch, copy, event_record };
enum class Backend { sim, passthrough };

// Whether `backend` charges calls (VGPU_DRIVER_TIME, read once): `table` both, `none` (the
// default) neither, `auto` the sim backend only. The passthrough's default is off on the evidence of
// 2 x H200 (2026-11-26; not an A/B within one call, the device time ran out first): with the
// table charged the one-GPU GPT-2 step read +10.6% (its forward phase, the host-bound one, 19.1
// vs 15.1 ms; backward and optimizer exact), with each call's own time charged +2.3 / +7.6%,
// without any -0.2 / +4.5% (and +0.1% the session before); nccl-tests had 25 of 48 sizes within
// target with the table, 32 of 48 without, its sizes up to 1 MiB turning 17-43% slow: the
// program's own CPU time between calls, which the passthrough's clock counts, already runs
// slower under vgpu than on a bare machine by about what the driver's calls cost. The sim
// backend charged it until a PyTorch job said otherwise (2 x H200, 2026-11-26, one call, GPT-2 DDP
// on 2 ranks replayed from a database recorded on the passthrough, against the real 2-GPU step):
// at batch 1 x 512, where the step is host-bound, real 18.66 ms, sim with the table 29.67 ms
// (+59%), without 19.43 (+4.1%); at 8 x 1024 real 45.05, with 42.48 (-5.7%), without 43.77
// (-2.8%). The loop of empty launches the table was measured with is bound by how fast the GPU
// takes launches, which a program's launches between its own host work rarely are. Left for a
// host-bound loop of tiny ops (nccl-tests' small sizes read 7.6-9.4 us against 14-26 us real
// without it on the sim): `auto` keeps the table there.
bool charge_driver_time(Backend backend);

inline constexpr double kRealLaunchSeconds = 1.0 / 340404.0;       // 2.94 us (also a graph launch)
inline constexpr double kRealCopySeconds = 1.0 / 388440.0;         // 2.57 us (async copies and sets)
inline constexpr double kRealEventRecordSeconds = 1.0 / 8598947.0;  // 0.12 us

inline double real_driver_seconds(DriverCall c, Backend backend) {
  if (!charge_driver_time(backend)) return 0;
  switch (c) {
    case DriverCall::launch: return kRealLaunchSeconds;
    case DriverCall::copy: return kRealCopySeconds;
    case DriverCall::event_record: return kRealEventRecordSeconds;
  }
  return 0;
}

}  // namespace vgpu::timing
