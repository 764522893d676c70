#include "timing/outside_cpu_time.h"

#include <dlfcn.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace vgpu {
namespace {

using ClockGettime = int (*)(clockid_t, timespec*);

// The kernel's vDSO clock_gettime, found once: calling it directly skips any interposed
// clock_gettime (the clock shim answers virtual time to threads outside the driver) and the
// C library's wrapper. Without it, the system call.
ClockGettime vdso_clock_gettime() {
  static const ClockGettime fn = [] {
    void* vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (vdso == nullptr) {
      dlerror();  // leave no error behind for the program's own dlerror() checks
      return ClockGettime{nullptr};
    }
    auto f = reinterpret_cast<ClockGettime>(dlsym(vdso, "__vdso_clock_gettime"));
    if (f == nullptr) dlerror();
    return f;
  }();
  return fn;
}

double read_clock(clockid_t id, bool allow_vdso) {
  timespec ts{};
  int rc = -1;
  if (ClockGettime f = allow_vdso ? vdso_clock_gettime() : nullptr) rc = f(id, &ts);
  if (rc != 0 && syscall(SYS_clock_gettime, id, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

#if defined(__x86_64__)
// The CPU's time-stamp counter as the wall clock, where it is invariant (one rate in every
// power state, as Linux's own clocksource requires): one instruction (~7 ns) instead of the
// vDSO's clock_gettime (~20 ns, and a system call where the kernel's clocksource is not the
// TSC), read twice per timed driver call. Its rate is measured against CLOCK_MONOTONIC over the
// process's first kCalibrationSeconds of readings, which use the vDSO meanwhile; from then on
// it runs at that clock's rate to within the calibration's error (a few parts per million: the
// wall clock here measures short stretches, outside_cpu_time.h; its readings are only ever
// subtracted from one another).
class TscClock {
 public:
  static constexpr double kCalibrationSeconds = 0.05;

  double seconds() {
    if (const Scale* s = scale_.load(std::memory_order_acquire))
      return s->offset + static_cast<double>(__rdtsc()) * s->seconds_per_tick;
    const double mono = read_clock(CLOCK_MONOTONIC, true);
    if (usable_ && mono - start_.mono >= kCalibrationSeconds) {
      const Sample end = sample();
      if (end.tick > start_.tick) {
        auto* s = new Scale;
        s->seconds_per_tick = (end.mono - start_.mono) / static_cast<double>(end.tick - start_.tick);
        s->offset = end.mono - static_cast<double>(end.tick) * s->seconds_per_tick;
        const Scale* none = nullptr;
        if (!scale_.compare_exchange_strong(none, s, std::memory_order_acq_rel)) delete s;  // another thread's
      }
    }
    return mono;
  }

 private:
  struct Scale {
    double seconds_per_tick = 0;
    double offset = 0;  // CLOCK_MONOTONIC seconds at tick 0
  };
  // One reading of both clocks: the monotonic clock between two ticks, the closest pair of a few
  // tries (a thread preempted between them would skew the rate).
  struct Sample {
    uint64_t tick = 0;
    double mono = 0;
  };
  static Sample sample() {
    Sample best;
    uint64_t best_width = UINT64_MAX;
    for (int i = 0; i < 8; ++i) {
      const uint64_t t1 = __rdtsc();
      const double mono = read_clock(CLOCK_MONOTONIC, true);
      const uint64_t t2 = __rdtsc();
      if (t2 >= t1 && t2 - t1 < best_width) {
        best_width = t2 - t1;
        best = {t1 + (t2 - t1) / 2, mono};
      }
    }
    return best;
  }
  static bool invariant() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)) != 0;
  }

  const bool usable_ = invariant();
  const Sample start_ = sample();
  std::atomic<const Scale*> scale_{nullptr};  // set once, never freed (readers hold it)
};

double wall_clock() {
  static TscClock clock;  // the process's: one rate for every thread
  return clock.seconds();
}
#else
double wall_clock() { return read_clock(CLOCK_MONOTONIC, true); }
#endif

}  // namespace

double OutsideCpuTime::wall_seconds() { return wall_clock(); }

// The vDSO has no CPU clocks (it would make the system call itself): go straight to it.
double OutsideCpuTime::thread_cpu_seconds() { return read_clock(CLOCK_THREAD_CPUTIME_ID, false); }

double OutsideCpuTime::read_cpu(double wall) {
  ++exact_reads_;
  exact_at_ = wall;
  return thread_cpu_seconds();
}

double OutsideCpuTime::take() {
  const double wall = wall_seconds();
  if (cpu_ < 0) {
    cpu_ = read_cpu(wall);
    mark_ = wall;
    return 0;
  }
  const double gap = wall > mark_ ? wall - mark_ : 0;
  mark_ = wall;
  if (gap < kShortGap && wall - exact_at_ < kRefresh) {
    cpu_ += gap;
    return gap;
  }
  const double cpu = read_cpu(wall);
  if (!(cpu > cpu_)) return 0;  // estimates ran ahead (preempted): keep the debt for next time
  const double charged = cpu - cpu_;
  cpu_ = cpu;
  return charged;
}

void OutsideCpuTime::leave(bool blocked) {
  const double wall = wall_seconds();
  const double inside = wall > mark_ ? wall - mark_ : 0;
  mark_ = wall;
  if (cpu_ < 0) return;
  if (blocked || inside >= kShortCall || wall - exact_at_ >= kRefresh) {
    // The call's own CPU time is unknown, so what the estimates owed is settled here: exact
    // from this point on.
    cpu_ = read_cpu(wall);
    return;
  }
  cpu_ += inside;
}

}  // namespace vgpu
