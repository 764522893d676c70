#include "vclock/thread_clock.h"

#include <cmath>

namespace vgpu::vclock_shim {
namespace {

// Moves every clock's base to where its reading is now (the source advanced `elapsed_ns` since
// the last switch), so that the next mode starts from there.
void rebase(ThreadClock& t, int64_t elapsed_ns) {
  if (elapsed_ns < 0) elapsed_ns = 0;
  for (int64_t& b : t.base_ns) b += elapsed_ns;
}

}  // namespace

int64_t seconds_to_ns(double seconds) {
  if (!(seconds > 0)) return 0;  // also NaN
  if (seconds > 9.2e9) return INT64_MAX;
  return static_cast<int64_t>(std::llround(seconds * 1e9));
}

int64_t job_reading(ThreadClock& t, int c, int64_t real_ns, bool has_virtual, int64_t virtual_ns,
                    RealNowFn real_now) {
  switch (t.mode) {
    case ThreadClock::kReal:
      if (!has_virtual) return real_ns;
      // The switch: every clock starts from its real reading now.
      for (int i = 0; i < kClockCount; ++i) t.base_ns[i] = i == c ? real_ns : real_now(i);
      t.source_at_switch_ns = virtual_ns;
      t.last_virtual_ns = virtual_ns;
      t.mode = ThreadClock::kVirtual;
      return t.base_ns[c];

    case ThreadClock::kVirtual:
      if (has_virtual) {
        // The driver's clock never moves back; should it ever, the readings wait for it.
        if (virtual_ns > t.last_virtual_ns) t.last_virtual_ns = virtual_ns;
        return t.base_ns[c] + (t.last_virtual_ns - t.source_at_switch_ns);
      } else {
        rebase(t, t.last_virtual_ns - t.source_at_switch_ns);
        const int64_t mono = c == kMonotonic ? real_ns : real_now(kMonotonic);
        t.source_at_switch_ns = mono;
        t.mode = ThreadClock::kRealAfterVirtual;
        return t.base_ns[c];
      }

    default: {  // kRealAfterVirtual
      const int64_t mono = c == kMonotonic ? real_ns : real_now(kMonotonic);
      if (!has_virtual) {
        const int64_t d = mono - t.source_at_switch_ns;
        return t.base_ns[c] + (d > 0 ? d : 0);
      }
      rebase(t, mono - t.source_at_switch_ns);
      t.source_at_switch_ns = virtual_ns;
      t.last_virtual_ns = virtual_ns;
      t.mode = ThreadClock::kVirtual;
      return t.base_ns[c];
    }
  }
}

}  // namespace vgpu::vclock_shim
