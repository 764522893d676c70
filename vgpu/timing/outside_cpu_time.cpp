#include "timing/outside_cpu_time.h"

#include <algorithm>

#include "common/settings.h"

#if defined(__x86_64__)
#include "timing/tsc_clock.h"
#endif

#include <dlfcn.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
// The wall clock from the TSC where it runs at one rate (tsc_clock.h), else the vDSO's.
double vdso_monotonic() { return read_clock(CLOCK_MONOTONIC, true); }

TscClock& process_tsc() {
  static TscClock clock(TscClock::cpuid_says_invariant(), vdso_monotonic);  // the process's: one rate for every thread
  return clock;
}

double wall_clock() { return process_tsc().seconds(); }
#else
double wall_clock() { return read_clock(CLOCK_MONOTONIC, true); }
#endif

}  // namespace

double OutsideCpuTime::wall_seconds() { return wall_clock(); }

// The vDSO has no CPU clocks (it would make the system call itself): go straight to it.
double OutsideCpuTime::thread_cpu_seconds() { return read_clock(CLOCK_THREAD_CPUTIME_ID, false); }

bool OutsideCpuTime::exact_by_setting() {
  static const bool exact = settings::text(settings::Id::cpu_clock) == "exact";
  return exact;
}

// The system call is the driver's work, not the program's: it costs 1-5 us where the CPU clock
// is not in the vDSO's reach (5.3 us a reading on the H200 host under a hypervisor, 2026-11-26),
// and a thread whose calls are often long (launches that wait while 8 contexts time-slice one
// GPU) reads it after nearly every call. Its wall time is taken as CPU time, half before the
// reading and half after, and neither half is charged: the count restarts after it. Only up to
// kMostReading of it (reading_half): a thread preempted in the system call (a loaded machine) spent that wall time
// off the CPU, and taking it all off would leave CPU time uncharged (a CI run under TSan charged
// 1.66 ms for 3 ms of CPU time after a preempted reading).
double OutsideCpuTime::reading_half(double wall_before, double wall_after) {
  return wall_after > wall_before ? std::min(wall_after - wall_before, kMostReading) / 2 : 0;
}

OutsideCpuTime::Exact OutsideCpuTime::read_cpu(double wall) {
  ++exact_reads_;
  const double cpu = thread_cpu_seconds();
  const double after = wall_now();
  const double half = reading_half(wall, after);
  exact_at_ = exact_ ? kNever : after;
  mark_ = after;
#if defined(__x86_64__)
  // Calibrated (50-100 ms after the process's first reading): readings inline from here on.
  if (tsc_ == nullptr && process_tsc().on_tsc()) tsc_ = &process_tsc();
#endif
  return {cpu - half, cpu + half};
}

double OutsideCpuTime::take_exact(double wall) {
  mark_ = wall;
  if (cpu_ < 0) {
    exact_ = exact_ || exact_by_setting();
    cpu_ = read_cpu(wall).after;
    return 0;
  }
  const Exact cpu = read_cpu(wall);
  if (!(cpu.before > cpu_)) {  // estimates ran ahead (preempted): keep the debt for next time
    cpu_ += cpu.after - cpu.before;
    return 0;
  }
  const double charged = cpu.before - cpu_;
  cpu_ = cpu.after;
  return charged;
}


}  // namespace vgpu
