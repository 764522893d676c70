// What the lock tests share: read-modify-writes of a plain counter by several threads under a
// lock lose nothing when the lock excludes (without one, threads on two cores lose some of
// 4 x 200,000).
#pragma once

#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace test_locks {

constexpr int kThreads = 4, kEach = 200000;

// The counter after kThreads threads each added 1 kEach times under `lock`.
template <class Lock>
uint64_t counted_under(Lock& lock) {
  uint64_t counter = 0;
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        std::lock_guard l(lock);
        const uint64_t seen = counter;
        asm volatile("" ::: "memory");  // a read, then a write: a real read-modify-write
        counter = seen + 1;
      }
    });
  for (std::thread& t : threads) t.join();
  return counter;
}

}  // namespace test_locks
