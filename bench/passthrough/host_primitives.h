// What the host's CPU charges for the few operations a settled vgpu call is built of, timed
// here in a loop each: a TSC read (vgpu reads it on entry and exit of every timed call,
// timing/tsc_clock.h), an uncontended locked compare-exchange with its release (the timeline's
// lock, passthrough/futex_lock.h), and one cycle (a chain of dependent additions, one a cycle):
// vgpu's own time per call divided by the cycle is its cycles where no PMU counts them.
//
// Why: the GPU hosts are KVM guests without a virtual PMU (no /sys/bus/event_source/devices/cpu,
// hw_counters.h then says n/a), and the event record's own time there was ~2.2x the build
// container's for the same instructions (issue 21). On the first H200 host measured (2026-11-27,
// callcost15) a TSC read took 17.6 ns and the locked pair 10.2 ns against 7.6 and 6.4 on the
// build container: these lines say how much of a host's own time those are.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

struct HostPrimitives {
  double tsc_read_ns = -1;    // one rdtsc, back to back (< 0: not x86-64)
  double locked_pair_ns = 0;  // compare-exchange acquire + release store, uncontended
  double cycle_ns = 0;        // one dependent addition

  // The least of `rounds` timings of each (the host's other work only adds).
  static HostPrimitives measure(int rounds = 5) {
    HostPrimitives best{1e9, 1e9, 1e9};
    for (int r = 0; r < rounds; ++r) {
      const HostPrimitives h = once();
      best.tsc_read_ns = std::min(best.tsc_read_ns, h.tsc_read_ns);
      best.locked_pair_ns = std::min(best.locked_pair_ns, h.locked_pair_ns);
      best.cycle_ns = std::min(best.cycle_ns, h.cycle_ns);
    }
    return best;
  }

 private:
  static HostPrimitives once() {
    using clock = std::chrono::steady_clock;
    constexpr int kN = 2000000;
    auto per = [](clock::time_point t0, double n) {
      return std::chrono::duration<double, std::nano>(clock::now() - t0).count() / n;
    };
    HostPrimitives h;
#if defined(__x86_64__)
    uint64_t sum = 0;
    auto t0 = clock::now();
    for (int i = 0; i < kN; ++i) sum += __rdtsc();
    h.tsc_read_ns = per(t0, kN);
    sink(sum);
#endif
    std::atomic<int> lock{0};
    auto t1 = clock::now();
    for (int i = 0; i < kN; ++i) {
      int expected = 0;
      lock.compare_exchange_strong(expected, 1, std::memory_order_acquire);
      lock.store(0, std::memory_order_release);
    }
    h.locked_pair_ns = per(t1, kN);
    // 8 dependent additions an iteration, in a register (the empty asm after each keeps the
    // compiler from folding them): the loop's own increment and branch run beside them.
    uint64_t x = 1;
    auto t2 = clock::now();
    for (int i = 0; i < kN; ++i) {
      for (int k = 0; k < 8; ++k) {
        x += x;
        asm volatile("" : "+r"(x));
      }
    }
    h.cycle_ns = per(t2, 8.0 * kN);
    sink(x);
    return h;
  }
  static void sink(uint64_t v) { asm volatile("" : : "r"(v)); }
};
