// The shim's per-thread rule (vgpu/vclock/thread_clock.h) with fake clocks: real until the
// driver first answers, then real-at-the-switch plus virtual progress; continuous and monotonic
// across every switch, for every clock; REALTIME moves with the virtual clock too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "vclock/thread_clock.h"

namespace {

using namespace vgpu::vclock_shim;

// The fake real clocks: each one a different base, all advancing together.
int64_t g_real[kClockCount];
int64_t fake_real(int c) { return g_real[c]; }

void set_real(int64_t t) {
  for (int c = 0; c < kClockCount; ++c) g_real[c] = t + static_cast<int64_t>(c) * 1'000'000'000'000;
}
void advance_real(int64_t d) {
  for (int64_t& r : g_real) r += d;
}

int64_t read(ThreadClock& t, int c, bool has_virtual, int64_t v) {
  return job_reading(t, c, g_real[c], has_virtual, v, fake_real);
}

constexpr int64_t kMs = 1'000'000;

TEST(ThreadClockRule, RealUntilTheDriverAnswers) {
  ThreadClock t{};
  set_real(5 * kMs);
  for (int c = 0; c < kClockCount; ++c) EXPECT_EQ(read(t, c, false, 0), g_real[c]);
  advance_real(7 * kMs);
  EXPECT_EQ(read(t, kRealtime, false, 0), g_real[kRealtime]);
  EXPECT_EQ(t.mode, ThreadClock::kReal);
}

TEST(ThreadClockRule, SwitchStartsFromTheRealReadingAndFollowsTheVirtualClock) {
  ThreadClock t{};
  set_real(100 * kMs);
  const int64_t at_switch_mono = g_real[kMonotonic];
  const int64_t at_switch_rt = g_real[kRealtime];
  // The first virtual answer: no jump, whatever the virtual clock says (here 3 s).
  EXPECT_EQ(read(t, kMonotonic, true, 3000 * kMs), at_switch_mono);
  EXPECT_EQ(t.mode, ThreadClock::kVirtual);
  // Real time runs on by 10 ms, virtual by 2 s: the readings move by 2 s.
  advance_real(10 * kMs);
  EXPECT_EQ(read(t, kMonotonic, true, 5000 * kMs), at_switch_mono + 2000 * kMs);
  // Every other clock kept its own base from the same moment and moves by the same amount.
  EXPECT_EQ(read(t, kRealtime, true, 5000 * kMs), at_switch_rt + 2000 * kMs);
  EXPECT_EQ(read(t, kBoottime, true, 5000 * kMs), (100 * kMs + 3'000'000'000'000) + 2000 * kMs);
  // Real time passing alone moves nothing.
  advance_real(500 * kMs);
  EXPECT_EQ(read(t, kMonotonicRaw, true, 5000 * kMs), 100 * kMs + 1'000'000'000'000 + 2000 * kMs);
}

TEST(ThreadClockRule, AVirtualClockThatWentBackIsWaitedFor) {
  ThreadClock t{};
  set_real(0);
  read(t, kMonotonic, true, 50 * kMs);
  EXPECT_EQ(read(t, kMonotonic, true, 80 * kMs), 30 * kMs);
  EXPECT_EQ(read(t, kMonotonic, true, 60 * kMs), 30 * kMs);
  EXPECT_EQ(read(t, kMonotonic, true, 90 * kMs), 40 * kMs);
}

TEST(ThreadClockRule, LosingTheVirtualClockGoesOnAtRealSpeedFromWhereItWas) {
  ThreadClock t{};
  set_real(1000 * kMs);
  read(t, kMonotonic, true, 0);
  advance_real(1 * kMs);
  EXPECT_EQ(read(t, kMonotonic, true, 4000 * kMs), 5000 * kMs);
  // The driver stops answering (thread exiting, forked child): continuous, then real speed.
  advance_real(3 * kMs);
  EXPECT_EQ(read(t, kMonotonic, false, 0), 5000 * kMs);
  EXPECT_EQ(t.mode, ThreadClock::kRealAfterVirtual);
  advance_real(20 * kMs);
  EXPECT_EQ(read(t, kMonotonic, false, 0), 5020 * kMs);
  EXPECT_EQ(read(t, kRealtime, false, 0), 4'000'000'000'000 + 5020 * kMs);
  // It answers again: continuous, then virtual speed.
  advance_real(5 * kMs);
  EXPECT_EQ(read(t, kRealtimeCoarse, true, 9000 * kMs), 5'000'000'000'000 + 5025 * kMs);
  advance_real(5 * kMs);
  EXPECT_EQ(read(t, kMonotonic, true, 9100 * kMs), 5125 * kMs);
}

// Any interleaving of real progress, virtual progress and answers that come and go: no clock
// ever reads less than it did before.
TEST(ThreadClockRule, EveryClockIsMonotonicUnderAnySequence) {
  std::mt19937_64 rng(20240611);
  for (int run = 0; run < 200; ++run) {
    ThreadClock t{};
    set_real(static_cast<int64_t>(rng() % 1'000'000'000));
    int64_t v = static_cast<int64_t>(rng() % 10'000'000'000);
    int64_t last[kClockCount];
    for (int c = 0; c < kClockCount; ++c) last[c] = INT64_MIN;
    for (int step = 0; step < 300; ++step) {
      advance_real(static_cast<int64_t>(rng() % (5 * kMs)));
      const int64_t dv = static_cast<int64_t>(rng() % (50 * kMs)) - 5 * kMs;  // may go back
      v += dv;
      const bool has = rng() % 5 != 0;
      const int c = static_cast<int>(rng() % kClockCount);
      const int64_t r = read(t, c, has, v);
      ASSERT_GE(r, last[c]) << "run " << run << " step " << step << " clock " << c;
      last[c] = r;
    }
  }
}

TEST(ThreadClockRule, SecondsToNanoseconds) {
  EXPECT_EQ(seconds_to_ns(1.5), 1'500'000'000);
  EXPECT_EQ(seconds_to_ns(0), 0);
  EXPECT_EQ(seconds_to_ns(-2), 0);
  EXPECT_EQ(seconds_to_ns(std::nan("")), 0);
  EXPECT_EQ(seconds_to_ns(1e300), INT64_MAX);
}

}  // namespace
