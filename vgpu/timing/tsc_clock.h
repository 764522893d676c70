// The CPU's time-stamp counter as a wall clock (x86-64), for OutsideCpuTime (outside_cpu_time.h).
//
// Why: the TSC reads in ~7 ns, the vDSO's clock_gettime in ~20-40 ns (and a system call where the
// kernel's clocksource is not the TSC), and vgpu reads its wall clock twice per timed driver call.
// Its rate is measured against CLOCK_MONOTONIC over the process's first kCalibrationSeconds of
// readings, which return that clock meanwhile; from then on it runs at that clock's rate to within
// the calibration's error (a few parts per million: the wall clock here measures short stretches;
// its readings are only ever subtracted from one another).
//
// Whether the TSC runs at one rate: CPUID says so (leaf 0x80000007, "invariant TSC", as Linux's
// own clocksource requires) on hosts and most virtual machines, but a sandbox may hide the leaf:
// gVisor answers only the CPUID leaves it knows, this one is not among them, and its own vDSO
// clock is the TSC all the same. Where CPUID does not say, the TSC is taken once a second
// calibration window agrees with the first's rate (to kAgree of the time since calibration
// began), and is checked against CLOCK_MONOTONIC every kCheckSeconds from then on; a disagreement
// beyond kDrift (more than NTP's slewing, 500 ppm) sends every later reading to CLOCK_MONOTONIC
// for good. A switch between the two clocks costs at most one odd stretch estimate, which the next
// exact reading of the thread's CPU clock settles (outside_cpu_time.h). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace vgpu {

// On a cache line of its own, whose first 32 bytes are all a reading reads (the scale, its
// pointer, the next check's tick): they lay on two lines, the 0x78 and 0x80 of the object,
// which a framework's work evicts between two driver calls (issue 21).
class alignas(64) TscClock {
 public:
  static constexpr double kCalibrationSeconds = 0.05;
  static constexpr double kAgree = 1e-4;
  static constexpr double kDrift = 1e-3;
  static constexpr double kSlackSeconds = 20e-6;  // the samples' own error
  static constexpr double kCheckSeconds = 1.0;

  using Monotonic = double (*)();  // CLOCK_MONOTONIC, seconds
  // `cpuid_vouches`: CPUID says the TSC is invariant (cpuid_says_invariant()).
  TscClock(bool cpuid_vouches, Monotonic monotonic);
  TscClock(const TscClock&) = delete;
  TscClock& operator=(const TscClock&) = delete;

  static bool cpuid_says_invariant();

  // The wall clock, seconds (CLOCK_MONOTONIC's, from the TSC once its rate is known). Inline:
  // read twice per timed driver call, and the calls around it were half its cost (issue 21).
  double seconds() {
#if defined(__x86_64__)
    if (const Scale* s = scale_.load(std::memory_order_acquire)) {
      const uint64_t tick = __rdtsc();
      if (tick < check_at_.load(std::memory_order_relaxed)) return s->at(tick);
      return checked(*s, tick);
    }
#endif
    return uncalibrated();
  }
  // seconds() for a caller that saw on_tsc() true before, on its own thread (the scale is then
  // published for good): the scale's pointer is not read again (outside_cpu_time.h reads the
  // clock twice a call, issue 21). A later check that finds the rate moved still sends the
  // readings to CLOCK_MONOTONIC (checked()).
  double calibrated_seconds() {
#if defined(__x86_64__)
    const uint64_t tick = __rdtsc();
    if (tick < check_at_.load(std::memory_order_relaxed)) [[likely]] return published_.at(tick);
    return checked(published_, tick);
#else
    return seconds();
#endif
  }
  // Whether readings come from the TSC now (tests, benches).
  bool on_tsc() const;

 private:
  struct Scale {
    double seconds_per_tick = 0;
    double offset = 0;  // CLOCK_MONOTONIC seconds at tick 0
    // (A tick count is below 2^63, so it converts as a signed one: one instruction.)
    double at(uint64_t tick) const { return offset + static_cast<double>(static_cast<int64_t>(tick)) * seconds_per_tick; }
  };
  struct Sample {
    uint64_t tick = 0;
    double mono = 0;
  };
  // What seconds() reads, first (see above).
  Scale published_;                             // the scale, written once before scale_ points to it
  std::atomic<const Scale*> scale_{nullptr};    // set once
  std::atomic<uint64_t> check_at_{UINT64_MAX};  // the tick of the next check against CLOCK_MONOTONIC

  double uncalibrated();  // seconds() before the scale is published, or without a TSC
  Sample sample() const;
  static Scale fit(const Sample& a, const Sample& b);
  void calibrate(double mono);
  void publish(const Scale& s, uint64_t check_at);
  double checked(const Scale& s, uint64_t tick);

  const bool invariant_;
  const Monotonic monotonic_;
  const Sample start_;
  std::mutex mu_;  // calibration
  Sample first_;   // the end of the first window (CPUID did not vouch)
  bool have_first_ = false;
  double calibrated_at_ = 0;  // CLOCK_MONOTONIC seconds of the calibration's end (set before the scale)
  std::atomic<bool> unusable_{false};           // the TSC's rate moved: CLOCK_MONOTONIC from here on
};

}  // namespace vgpu
