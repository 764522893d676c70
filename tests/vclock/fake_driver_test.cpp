// The shim (libvgpu-vclock.so, preloaded) against a fake driver whose per-thread answers the
// test sets (fake_driver.cpp): exact offsets, the switch, the driver's own readings inside its
// calls (answer "real for now"), losing the clock, and deadlines. The fake driver is dlopened
// late with RTLD_LOCAL, as PyTorch loads libcuda.so.1, and pushes its table to the shim.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

#include "contracts/vgpu_clock_table.h"

namespace {

using vgpu::darkapi::kClockNone;
using vgpu::darkapi::kClockRealForNow;
using vgpu::darkapi::kClockVirtual;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

int64_t ns(const timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * kS + ts.tv_nsec; }
int64_t sys_now(clockid_t id) {
  timespec ts{};
  syscall(SYS_clock_gettime, id, &ts);
  return ns(ts);
}
int64_t now(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return ns(ts);
}

using SetFn = void (*)(int, double);
SetFn fake_set() {
  static SetFn set = [] {
    void* h = dlopen(FAKE_DRIVER, RTLD_NOW | RTLD_LOCAL);
    return h ? reinterpret_cast<SetFn>(dlsym(h, "fake_clock_set")) : nullptr;
  }();
  return set;
}

void on_new_thread(void (*body)()) {
  std::thread t(body);
  t.join();
}

TEST(ShimWithFakeDriver, RealBeforeTheDriverIsLoadedAndWithoutAnAnswer) {
  on_new_thread([] {
    EXPECT_NEAR(static_cast<double>(now(CLOCK_MONOTONIC) - sys_now(CLOCK_MONOTONIC)), 0, 20.0 * kMs);
    ASSERT_NE(fake_set(), nullptr);
    fake_set()(kClockNone, 0);
    EXPECT_NEAR(static_cast<double>(now(CLOCK_MONOTONIC) - sys_now(CLOCK_MONOTONIC)), 0, 20.0 * kMs);
    EXPECT_NEAR(static_cast<double>(now(CLOCK_REALTIME) - sys_now(CLOCK_REALTIME)), 0, 20.0 * kMs);
  });
}

TEST(ShimWithFakeDriver, ReadingsFollowTheVirtualClockExactlyFromTheSwitch) {
  on_new_thread([] {
    ASSERT_NE(fake_set(), nullptr);
    fake_set()(kClockVirtual, 10.0);
    const int64_t mono0 = now(CLOCK_MONOTONIC);  // the switch: no jump
    EXPECT_NEAR(static_cast<double>(mono0 - sys_now(CLOCK_MONOTONIC)), 0, 20.0 * kMs);
    const int64_t real0 = now(CLOCK_REALTIME);
    fake_set()(kClockVirtual, 12.5);
    EXPECT_EQ(now(CLOCK_MONOTONIC), mono0 + 2500 * kMs);
    EXPECT_EQ(now(CLOCK_REALTIME), real0 + 2500 * kMs);
    // Real time passing moves nothing; the virtual clock going back moves nothing either.
    usleep(20'000);
    fake_set()(kClockVirtual, 12.0);
    EXPECT_EQ(now(CLOCK_MONOTONIC), mono0 + 2500 * kMs);
    fake_set()(kClockVirtual, 13.0);
    EXPECT_EQ(now(CLOCK_MONOTONIC), mono0 + 3000 * kMs);
  });
}

TEST(ShimWithFakeDriver, TheDriversOwnReadingsAreRealAndLeaveTheThreadsClockAlone) {
  on_new_thread([] {
    ASSERT_NE(fake_set(), nullptr);
    fake_set()(kClockVirtual, 100.0);
    const int64_t mono0 = now(CLOCK_MONOTONIC);
    fake_set()(kClockVirtual, 104.0);
    EXPECT_EQ(now(CLOCK_MONOTONIC), mono0 + 4 * kS);
    // "Inside a driver call" for 50 ms: real readings, no switch.
    fake_set()(kClockRealForNow, 0);
    const int64_t inside0 = now(CLOCK_MONOTONIC);
    EXPECT_NEAR(static_cast<double>(inside0 - sys_now(CLOCK_MONOTONIC)), 0, 20.0 * kMs);
    usleep(50'000);
    EXPECT_GE(now(CLOCK_MONOTONIC) - inside0, 45 * kMs);
    // Out again: exactly where the virtual clock says, the 50 ms of the call not added.
    fake_set()(kClockVirtual, 104.5);
    EXPECT_EQ(now(CLOCK_MONOTONIC), mono0 + 4500 * kMs);
  });
}

TEST(ShimWithFakeDriver, LosingTheClockGoesOnAtRealSpeed) {
  on_new_thread([] {
    ASSERT_NE(fake_set(), nullptr);
    fake_set()(kClockVirtual, 1.0);
    const int64_t mono0 = now(CLOCK_MONOTONIC);
    fake_set()(kClockVirtual, 6.0);
    EXPECT_EQ(now(CLOCK_MONOTONIC), mono0 + 5 * kS);
    fake_set()(kClockNone, 0);  // e.g. the thread is exiting
    const int64_t after = now(CLOCK_MONOTONIC);
    EXPECT_GE(after, mono0 + 5 * kS);
    EXPECT_LT(after, mono0 + 5 * kS + 20 * kMs);
    usleep(50'000);
    const int64_t later = now(CLOCK_MONOTONIC);
    EXPECT_GE(later - after, 45 * kMs);
    EXPECT_LT(later - after, 1000 * kMs);
  });
}

TEST(ShimWithFakeDriver, DeadlinesAreMovedOntoTheRealClock) {
  on_new_thread([] {
    ASSERT_NE(fake_set(), nullptr);
    fake_set()(kClockVirtual, 0.0);
    now(CLOCK_MONOTONIC);
    fake_set()(kClockVirtual, 100.0);  // the thread's readings lead real time by 100 s
    const int64_t d = now(CLOCK_MONOTONIC) + 50 * kMs;
    const timespec abs{static_cast<time_t>(d / kS), static_cast<long>(d % kS)};
    const int64_t r0 = sys_now(CLOCK_MONOTONIC);
    EXPECT_EQ(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, nullptr), 0);
    const int64_t real = sys_now(CLOCK_MONOTONIC) - r0;
    EXPECT_GE(real, 45 * kMs);
    EXPECT_LT(real, 1000 * kMs);
    // A deadline the driver computes inside its own call is real already: left alone.
    fake_set()(kClockRealForNow, 0);
    const int64_t rd = now(CLOCK_MONOTONIC) + 50 * kMs;
    const timespec rabs{static_cast<time_t>(rd / kS), static_cast<long>(rd % kS)};
    const int64_t r1 = sys_now(CLOCK_MONOTONIC);
    EXPECT_EQ(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &rabs, nullptr), 0);
    EXPECT_GE(sys_now(CLOCK_MONOTONIC) - r1, 45 * kMs);
  });
}

TEST(ShimWithFakeDriver, OtherThreadsAreUnaffected) {
  ASSERT_NE(fake_set(), nullptr);
  std::thread gpu([] {
    fake_set()(kClockVirtual, 0.0);
    now(CLOCK_MONOTONIC);
    fake_set()(kClockVirtual, 50.0);
    EXPECT_GT(now(CLOCK_MONOTONIC) - sys_now(CLOCK_MONOTONIC), 49 * kS);
  });
  gpu.join();
  on_new_thread([] {
    EXPECT_NEAR(static_cast<double>(now(CLOCK_MONOTONIC) - sys_now(CLOCK_MONOTONIC)), 0, 20.0 * kMs);
  });
}

}  // namespace
