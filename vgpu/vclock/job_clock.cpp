#include "vclock/job_clock.h"

#include <pthread.h>

#include "contracts/vgpu_clock_table.h"
#include "vclock/clock_ids.h"
#include "vclock/driver_clock.h"
#include "vclock/real_calls.h"
#include "vclock/thread_clock.h"

namespace vgpu::vclock_shim {
namespace {

// initial-exec: the shim is loaded at start (LD_PRELOAD), so its TLS is in the static block and
// touching it never calls into the loader or allocates, whatever the thread is doing.
#define VCLOCK_TLS __thread __attribute__((tls_model("initial-exec")))
VCLOCK_TLS ThreadClock t_clock;
VCLOCK_TLS bool t_inside;

constexpr int64_t kNsPerSecond = 1'000'000'000;
// Deadlines past this (year 2262 on CLOCK_REALTIME) are taken as "forever", and are left alone
// rather than overflow nanosecond arithmetic.
constexpr time_t kForeverSeconds = 9'000'000'000;

class Guard {
 public:
  Guard() { t_inside = true; }
  ~Guard() { t_inside = false; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

int64_t reading(int c, int64_t real_ns) {
  const int64_t mono = c == kMonotonic ? real_ns : real::now_ns(kMonotonic);
  double seconds = 0;
  const int answer = driver_virtual_now(mono, &seconds);
  // The driver's own reading inside one of its calls: real, and no switch (a switch would add
  // the real time of the call to the thread's readings when it switched back).
  if (answer == darkapi::kClockRealForNow) return real_ns;
  return job_reading(t_clock, c, real_ns, answer == darkapi::kClockVirtual,
                     seconds_to_ns(seconds), real::now_ns);
}

void after_fork_in_child() { forget_driver_after_fork(); }

}  // namespace

int64_t job_now_ns(int c, int64_t real_ns) {
  if (t_inside) return real_ns;
  const Guard guard;
  return reading(c, real_ns);
}

bool real_deadline(int c, const timespec& abs, timespec* out) {
  // A thread still on real time computed `abs` from real readings: nothing to move. (It is not
  // switched here: the deadline was computed before any switch.)
  if (t_inside || t_clock.mode == ThreadClock::kReal) return false;
  if (abs.tv_nsec < 0 || abs.tv_nsec >= kNsPerSecond || abs.tv_sec < 0) return false;  // EINVAL
  if (abs.tv_sec > kForeverSeconds) return false;  // "wait forever" stays forever
  const Guard guard;
  const int64_t real_ns = real::now_ns(c);
  const int64_t ahead = reading(c, real_ns) - real_ns;  // how far the thread's readings lead
  const int64_t abs_ns = static_cast<int64_t>(abs.tv_sec) * kNsPerSecond + abs.tv_nsec;
  int64_t moved = abs_ns - ahead;
  if (moved < 0) moved = 0;
  out->tv_sec = static_cast<time_t>(moved / kNsPerSecond);
  out->tv_nsec = static_cast<long>(moved % kNsPerSecond);
  return true;
}

bool job_virtual_seconds(double* seconds) {
  if (t_inside) return false;
  const Guard guard;
  return driver_virtual_now(real::now_ns(kMonotonic), seconds) == darkapi::kClockVirtual;
}

bool job_handoff(double seconds) {
  if (t_inside) return false;
  const Guard guard;
  return driver_handoff(seconds);
}

void install() {
  real::resolve_all();
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

}  // namespace vgpu::vclock_shim
