// The clocks the shim shows as the job's clock (the virtual clock on threads that have one),
// numbered densely so that per-thread state can keep one base reading per clock. Every other
// clock id (CPU-time clocks, CLOCK_TAI, dynamic clocks) is always the real one.
#pragma once

#include <time.h>

namespace vgpu::vclock_shim {

enum ClockIndex : int {
  kMonotonic,
  kMonotonicRaw,
  kMonotonicCoarse,
  kBoottime,
  kRealtime,
  kRealtimeCoarse,
  kClockCount,
};

// The index of an interposed clock id, or -1.
inline int clock_index(clockid_t id) {
  switch (id) {
    case CLOCK_MONOTONIC: return kMonotonic;
    case CLOCK_MONOTONIC_RAW: return kMonotonicRaw;
    case CLOCK_MONOTONIC_COARSE: return kMonotonicCoarse;
    case CLOCK_BOOTTIME: return kBoottime;
    case CLOCK_REALTIME: return kRealtime;
    case CLOCK_REALTIME_COARSE: return kRealtimeCoarse;
    default: return -1;
  }
}

inline clockid_t clock_id(int index) {
  static constexpr clockid_t kIds[kClockCount] = {
      CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_COARSE,
      CLOCK_BOOTTIME,  CLOCK_REALTIME,      CLOCK_REALTIME_COARSE};
  return kIds[index];
}

}  // namespace vgpu::vclock_shim
