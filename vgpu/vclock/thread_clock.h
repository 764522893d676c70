// How one thread's readings are made, whatever the clock: the pure rule of the shim, apart from
// where the real and virtual readings come from (so that it is tested on its own).
//
// A thread starts in mode `real`: its readings are the real ones. When the driver first answers
// with a virtual clock for it (the thread has submitted work), it switches to mode `virtual`:
// each clock's reading becomes
//
//     (the real reading of that clock at the switch) + (virtual now - virtual now at the switch)
//
// so no reading jumps backwards, and REALTIME moves by the same virtual amount as MONOTONIC.
// Should the driver stop answering (the thread is exiting, the process forked), the thread
// goes on from where its readings were at real speed (mode `real_after_virtual`), and returns
// to virtual speed if the driver answers again. Every switch rebases all clocks at once, so
// each clock's readings stay continuous and never decrease.
//
// Plain data, zero-initialized: it lives in the shim's initial-exec TLS, which needs no
// allocation at thread start.
#pragma once

#include <cstdint>

#include "vclock/clock_ids.h"

namespace vgpu::vclock_shim {

struct ThreadClock {
  enum Mode : int { kReal = 0, kVirtual = 1, kRealAfterVirtual = 2 };
  int mode;
  // Since the last switch, the reading of clock c is base_ns[c] + (source - source_at_switch_ns),
  // source being the virtual clock (kVirtual) or the real CLOCK_MONOTONIC (kRealAfterVirtual).
  int64_t base_ns[kClockCount];
  int64_t source_at_switch_ns;
  int64_t last_virtual_ns;  // the highest virtual reading seen since the switch to kVirtual
};

// A real reading of the clock with that index, in nanoseconds (injected: tests give fakes).
using RealNowFn = int64_t (*)(int clock_index);

// The reading of clock `c` (a ClockIndex) on the thread of `t`. `real_ns`: the real reading of
// c just taken. `has_virtual`/`virtual_ns`: the thread's virtual clock now, when it has one.
// Switches mode when that availability changed; `real_now` is asked for the other clocks then,
// and for CLOCK_MONOTONIC in mode kRealAfterVirtual.
int64_t job_reading(ThreadClock& t, int c, int64_t real_ns, bool has_virtual, int64_t virtual_ns,
                    RealNowFn real_now);

// Virtual seconds as nanoseconds (rounded; never negative).
int64_t seconds_to_ns(double seconds);

}  // namespace vgpu::vclock_shim
