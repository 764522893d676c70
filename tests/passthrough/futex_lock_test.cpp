// FutexLock (passthrough/futex_lock.h): excludes, hands the lock on to sleeping waiters, and
// try_lock answers without waiting.
#include "lock_exclusion.h"
#include "passthrough/futex_lock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

// Read-modify-writes of a plain counter under it lose nothing (without it, threads on two cores
// lose some of 4 x 200,000).
TEST(FutexLock, Excludes) {
  vgpu::pt::FutexLock lock;
  EXPECT_EQ(test_locks::counted_under(lock), static_cast<uint64_t>(test_locks::kThreads) * test_locks::kEach);
}

// Waiters that went to sleep behind a long holder (past the spinning) are all woken in turn: a
// lost wake-up hangs this test.
TEST(FutexLock, SleepingWaitersAllGetTheLock) {
  vgpu::pt::FutexLock lock;
  uint64_t counter = 0;
  constexpr int kThreads = 8, kEach = 1000;
  lock.lock();
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        std::lock_guard l(lock);
        ++counter;
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // long enough for them to sleep
  EXPECT_EQ(counter, 0u);
  lock.unlock();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, static_cast<uint64_t>(kThreads) * kEach);
}

TEST(FutexLock, TryLockFailsWhileHeld) {
  vgpu::pt::FutexLock lock;
  ASSERT_TRUE(lock.try_lock());
  bool other = true;
  std::thread([&] { other = lock.try_lock(); }).join();
  EXPECT_FALSE(other);
  lock.unlock();
  std::thread([&] {
    other = lock.try_lock();
    if (other) lock.unlock();
  }).join();
  EXPECT_TRUE(other);
}

}  // namespace
