// The CPU time a host thread spends outside driver calls, which is what its virtual CPU clock
// advances by (sim/core/virtual_clock.h), read cheaply.
//
// Why: the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) is a system call (~0.3 us, more under
// seccomp or a hypervisor), and reading it on entry and exit of every call was half the cost of
// the sim backend's cuLaunchKernel. The wall clock is cheap: the CPU's time-stamp counter where
// it runs at one rate, calibrated against CLOCK_MONOTONIC (~7 ns, tsc_clock.h), else the vDSO's
// (~20-40 ns). Over a short stretch a thread that is not blocked uses CPU time at the rate of
// wall time, so:
//   - a call shorter than kShortCall that did not block spent its wall time on the CPU;
//   - a stretch outside the driver shorter than kShortGap is charged its wall time;
//   - anything longer (a sleep, I/O, a wait on another thread, a synchronization that blocked),
//     and at least every kRefresh of wall time, reads the CPU clock itself. An exact reading on
//     the way in settles the estimates made since the last one: what was charged too much (the
//     thread was preempted in a short stretch) is taken off the next charges. One on the way out
//     of a long call restarts the count from there. Either way the error is bounded by the
//     preempted part of the short stretches within one kRefresh and never accumulates.
// A program that sleeps or blocks outside the driver is therefore never charged for it; one that
// calls the driver in a tight loop costs no system call per call.
// VGPU_CPU_CLOCK=exact reads the CPU clock on every entry and exit instead (a system call each):
// to check the estimate where a job's threads block briefly between calls and make long calls
// often (an exit reading restarts the count, so what a short stretch was overcharged before a
// long call is not taken back).
//
// Every reading bypasses an interposed clock_gettime (the clock shim, vgpu/vclock), which may ask
// this very clock for the thread's virtual time.
#pragma once

#include <limits>

#include "timing/inline_constants.h"

#if defined(__x86_64__)
#include "timing/tsc_clock.h"
#endif

namespace vgpu {

class OutsideCpuTime {
 public:
  static constexpr double kShortGap = 50e-6;   // seconds outside charged as wall time
  static constexpr double kShortCall = 50e-6;  // seconds inside taken as CPU time
  static constexpr double kRefresh = 1e-3;     // wall time between exact readings, at most

  // The CPU seconds the thread ran outside since the last take() or leave() (0 on the first
  // call, which starts the count). Call only while outside a call. (Inline, as leave(): both run
  // on every timed driver call, issue 21; the exact readings are out of line.)
  double take() {
    const double wall = wall_now();
    const double gap = wall > mark_ ? wall - mark_ : 0;
    // Not started and VGPU_CPU_CLOCK=exact fail the second test too (exact_at_, below).
    // (Constants as immediates, inline_constants.h: two .rodata lines fewer on every call.)
    if (gap < immediate(kShortGap) && wall - exact_at_ < immediate(kRefresh)) [[likely]] {
      mark_ = wall;
      cpu_ += gap;
      return gap;
    }
    return take_exact(wall);
  }
  // The thread enters a call: take() and mark the call's start. Returns take()'s charge.
  double enter() { return take(); }
  // The thread leaves the call entered last. `blocked`: the call is known to have waited, so
  // its wall time is not CPU time (also assumed for any call longer than kShortCall).
  void leave(bool blocked = false) {
    const double wall = wall_now();
    const double inside = wall > mark_ ? wall - mark_ : 0;
    mark_ = wall;
    if (blocked || inside >= immediate(kShortCall) || !(wall - exact_at_ < immediate(kRefresh))) [[unlikely]] {
      // The call's own CPU time is unknown, so what the estimates owed is settled here: exact
      // from this point on (once the count started).
      if (cpu_ >= 0) cpu_ = read_cpu(wall).after;
      return;
    }
    cpu_ += inside;
  }

  // Every entry and exit reads the CPU clock (VGPU_CPU_CLOCK=exact; tests may set it directly).
  // (Back to estimates, the next take() reads the CPU clock once more: exact_at_ says when.)
  void set_exact(bool exact) {
    exact_ = exact;
    if (exact) exact_at_ = kNever;
  }

  // How many times the CPU clock itself was read (for tests and benches).
  unsigned long exact_reads() const { return exact_reads_; }

  // The two clocks, seconds; both bypass an interposed clock_gettime. The wall clock is
  // CLOCK_MONOTONIC's (read from the invariant TSC once its rate is known: outside_cpu_time.cpp).
  static double wall_seconds();
  static double thread_cpu_seconds();

  // An exact reading's own cost, at most (5.3 us seen under a hypervisor): a reading that took
  // longer was preempted, and the rest of its wall time was spent off the CPU.
  static constexpr double kMostReading = 20e-6;
  // What an exact reading between wall times `wall_before` and `wall_after` leaves uncharged on
  // each side of the CPU clock's value: half its wall time, up to half of kMostReading.
  static double reading_half(double wall_before, double wall_after);

 private:
  // wall_seconds(), inline once this thread's first reading found the process's clock: the
  // out-of-line call and its guard were two thirds of a reading, twice a call (issue 21).
  double wall_now() {
#if defined(__x86_64__)
    if (tsc_ != nullptr) [[likely]] return tsc_->calibrated_seconds();
#endif
    return wall_seconds();
  }
  // An exact reading taken at `wall`: the thread's CPU time just before the system call and
  // just after it; the count restarts after it (mark_).
  struct Exact {
    double before, after;
  };
  Exact read_cpu(double wall);
  double take_exact(double wall);  // take() past its estimate: the first reading, or an exact one

  double cpu_ = -1;         // the thread's CPU time at mark_ (exact or estimated); < 0: not started
  double mark_ = 0;         // wall time of the last take() or leave()
  // Wall time of the last exact reading, or kNever before the first one and while every
  // reading is exact (exact_): then `wall - exact_at_ < kRefresh` fails and take() and leave()
  // read the CPU clock. One test on their common path where three were (the count started, not
  // exact, the refresh due: issue 21).
  static constexpr double kNever = -std::numeric_limits<double>::infinity();
  double exact_at_ = kNever;
  unsigned long exact_reads_ = 0;
  bool exact_ = false;  // or the setting's, from the first take()
#if defined(__x86_64__)
  // The process's wall clock (wall_seconds()) once this thread saw it read the TSC (an exact
  // reading, at least every kRefresh, looks): read inline from then on.
  TscClock* tsc_ = nullptr;
#endif

  static bool exact_by_setting();  // VGPU_CPU_CLOCK, read once per process
};

}  // namespace vgpu
