// A thread's call state reached through its slot (passthrough/thread_clock.h, ThreadSlot): the
// slot leads to the thread's own state, and is freed when the thread exits and, in a forked
// child, for every thread but the forking one, so that a later thread with the same thread
// pointer never finds a dead thread's state (issue 21).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "passthrough/kept_address.h"
#include "passthrough/thread_clock.h"

namespace vgpu::pt::thread_clock {
namespace {

using detail::call_thread_with_clock;
using detail::t_call_thread;
using detail::thread_key;
using detail::thread_slot;

CallThread* own_state() { return &kept_address(t_call_thread); }

TEST(ThreadSlot, AThreadFindsItsOwnCallStateThroughItsSlot) {
  std::thread([] {
    CallThread& first = call_thread_with_clock();  // claims the slot
    EXPECT_EQ(&first, own_state());
    EXPECT_NE(first.clock, nullptr);
    const uintptr_t key = thread_key();
    // The slot is the thread's now (no other thread of this test holds one that collides).
    EXPECT_EQ(thread_slot(key).key.load(), key);
    EXPECT_EQ(thread_slot(key).thread.load(), own_state());
    EXPECT_EQ(&call_thread_with_clock(), own_state());
  }).join();
}

TEST(ThreadSlot, AnExitedThreadsSlotIsFreedAndANewThreadFindsItsOwnState) {
  uintptr_t first_key = 0;
  std::thread([&] {
    call_thread_with_clock();
    first_key = thread_key();
    ASSERT_EQ(thread_slot(first_key).key.load(), first_key);
  }).join();
  EXPECT_EQ(thread_slot(first_key).key.load(), 0u);
  EXPECT_EQ(thread_slot(first_key).thread.load(), nullptr);
  // glibc gives the next thread the stack (and thread pointer) of the one that ended; whether or
  // not it does here, the new thread's state is its own.
  std::thread([&] {
    EXPECT_EQ(&call_thread_with_clock(), own_state());
    if (thread_key() == first_key) EXPECT_EQ(thread_slot(first_key).thread.load(), own_state());
  }).join();
}

TEST(ThreadSlot, AForkedChildFreesEveryOtherThreadsSlot) {
  call_thread_with_clock();
  const uintptr_t main_key = thread_key();
  std::mutex mu;
  std::condition_variable cv;
  bool claimed = false, done = false;
  uintptr_t other_key = 0;
  // A thread whose slot another thread holds keeps __tls_get_addr (thread_clock.h): 1024 slots
  // chosen by the thread pointer collide now and then (a TSan CI run: the other thread's slot
  // was taken), so the other thread is made again until it holds a slot of its own.
  std::thread other;
  for (int attempt = 0; attempt < 16; ++attempt) {
    claimed = false;
    other = std::thread([&] {
      call_thread_with_clock();
      std::unique_lock l(mu);
      other_key = thread_key();
      claimed = true;
      cv.notify_all();
      cv.wait(l, [&] { return done || !claimed; });
    });
    {
      std::unique_lock l(mu);
      cv.wait(l, [&] { return claimed; });
    }
    if (thread_slot(other_key).key.load() == other_key && &thread_slot(other_key) != &thread_slot(main_key)) break;
    {
      std::lock_guard l(mu);
      claimed = false;  // let this one end
    }
    cv.notify_all();
    other.join();
  }
  if (!other.joinable()) GTEST_SKIP() << "no thread got a slot of its own in 16 tries";
  ASSERT_EQ(thread_slot(other_key).key.load(), other_key);
  ASSERT_EQ(thread_slot(main_key).key.load(), main_key);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only this thread lives here: the other's slot is free, this one's kept.
    const bool other_freed = thread_slot(other_key).key.load() == 0 && thread_slot(other_key).thread.load() == nullptr;
    const bool own_kept = thread_slot(main_key).key.load() == main_key && &call_thread_with_clock() == own_state();
    _exit((other_freed ? 0 : 1) | (own_kept ? 0 : 2));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the other thread's slot was kept; 2: the forking thread's was lost";
  // The parent's slots are untouched.
  EXPECT_EQ(thread_slot(other_key).key.load(), other_key);
  {
    std::lock_guard l(mu);
    done = true;
  }
  cv.notify_all();
  other.join();
}

}  // namespace
}  // namespace vgpu::pt::thread_clock
