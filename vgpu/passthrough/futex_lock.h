// A mutex for the passthrough's hot paths whose sections are mostly short but may be long (the
// virtual timeline's: a few comparisons on a launch or an event record, a whole resolve, which
// may read measurements and wait for the GPU, on a synchronization): uncontended, its lock is one
// atomic read-modify-write and its unlock none (a load and a store), inline; a waiter spins
// briefly, then sleeps in the kernel (futex) until the holder wakes it, so a long holder costs
// the waiters no CPU.
//
// Why not std::mutex: pthread_mutex_lock and unlock are calls through the PLT with their type
// checks, ~80 instructions a pair, a tenth of an event record's own work (issue 21). Why not
// SpinLock (spin_lock.h): its waiters never sleep, and this lock's holder may wait for the GPU.
//
// The classic three-state futex mutex (Drepper, "Futexes Are Tricky", mutex 2): 0 free, 1 held,
// 2 held and maybe waited for; unlock wakes one sleeper only from state 2. Lockable
// (std::lock_guard, std::unique_lock with try_lock); not recursive.
//
// The unlock reads the state and then stores "free", where the classic one exchanges it: a
// locked instruction is a full barrier (it waits for the store buffer to drain, which right after
// the real driver's own writes may be long), and the timeline's lock is taken on every event
// record, launch and copy: over the stand-in driver the event record's own time fell from ~46 to
// ~40 ns without it (issue 21, docs/results.md). The price: a waiter that marks the lock "waited" between the
// holder's load and its store may go to sleep unwoken (the store overwrote its mark). So a
// sleeper never sleeps longer than kSleepNs: it wakes, finds the lock free and takes it. The
// window is the two instructions of the unlock, while a waiter spins kSpins times before
// sleeping. The cost: a sleeper behind a long holder (a resolve waiting for the GPU) looks once a
// millisecond, a system call each.
#pragma once

#include <errno.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "timing/outside_cpu_time.h"
#include "timing/thread_clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace vgpu::pt {

class FutexLock {
 public:
  void lock() noexcept {
    uint32_t c = kFree;
    if (state_.compare_exchange_strong(c, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) return;
    lock_contended(c);
  }
  bool try_lock() noexcept {
    uint32_t c = kFree;
    return state_.compare_exchange_strong(c, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() noexcept {
    const uint32_t c = state_.load(std::memory_order_relaxed);
    state_.store(kFree, std::memory_order_release);
    if (c == kWaited) wake_one();
  }

 private:
  static constexpr uint32_t kFree = 0, kHeld = 1, kWaited = 2;
  static constexpr int kSpins = 100;
  static constexpr long kSleepNs = 1'000'000;  // the longest sleep: a missed wake-up (see above)

  __attribute__((noinline)) void lock_contended(uint32_t c) noexcept {
    // A short section is likely over within a few hundred cycles: spin first.
    for (int i = 0; i < kSpins && c != kFree; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      _mm_pause();
#endif
      c = state_.load(std::memory_order_relaxed);
      if (c == kFree &&
          state_.compare_exchange_strong(c, kHeld, std::memory_order_acquire, std::memory_order_relaxed))
        return;
    }
    // Sleep until woken with the state at "waited", so that whoever unlocks wakes the next one,
    // or for kSleepNs at most (a wake-up the unlock missed, see above). (errno kept: a driver
    // call must not change the program's; FUTEX_WAIT sets it when the state moved before the
    // sleep or the sleep timed out.) A traced thread (VGPU_CLOCK_TRACE) records how long it waited
    // here, since the spinning: what a thread lost to another's hold on vgpu's state.
    timing::ThreadClock& clock = timing::this_thread_clock();
    const double since = clock.traced() ? OutsideCpuTime::wall_seconds() : 0;
    const int saved = errno;
    const timespec most{0, kSleepNs};
    while (state_.exchange(kWaited, std::memory_order_acquire) != kFree)
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kWaited, &most, nullptr, 0);
    errno = saved;
    if (since > 0) clock.note_wait(OutsideCpuTime::wall_seconds() - since, __builtin_return_address(0));
  }
  __attribute__((noinline)) void wake_one() noexcept {
    const int saved = errno;
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    errno = saved;
  }

  std::atomic<uint32_t> state_{kFree};
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
};

}  // namespace vgpu::pt
