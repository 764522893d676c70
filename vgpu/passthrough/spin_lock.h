// A lock for critical sections of a few dozen instructions on a hot path, where a pthread
// mutex's lock and unlock (two locked instructions, the calls and their checks: ~60
// instructions and more) cost more than the section itself. A waiter spins briefly, then yields: a
// holder preempted mid-section does not keep others spinning for a whole time slice.
// BasicLockable (std::lock_guard); not recursive.
#pragma once

#include <sched.h>

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace vgpu::pt {

class SpinLock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
          _mm_pause();
#endif
        } else {
          sched_yield();
        }
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpins = 64;
  std::atomic<bool> locked_{false};
};

}  // namespace vgpu::pt
