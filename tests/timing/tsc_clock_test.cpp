// The TSC as the wall clock (vgpu/timing/tsc_clock.h): taken where CPUID vouches for it; where it
// does not (a sandbox hides the leaf), taken once a second calibration window agrees, and left
// for CLOCK_MONOTONIC for good when its rate moves before or after. The "monotonic clock" here is
// CLOCK_MONOTONIC itself until a chosen moment and then runs 1% fast: the TSC (which the clock
// under test reads for real) then disagrees with it, as a TSC whose rate moved would.
#include "timing/tsc_clock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <cmath>

namespace {

using vgpu::TscClock;

double real_monotonic() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::atomic<double> g_fast_from{1e300};  // CLOCK_MONOTONIC seconds from which the fake clock runs 1% fast

double fake_monotonic() {
  const double t = real_monotonic();
  const double from = g_fast_from.load();
  return t < from ? t : from + (t - from) * 1.01;
}

// Reads `clock` for `seconds` of real time; returns the largest difference from `reference`.
double read_for(TscClock& clock, double seconds, double (*reference)()) {
  const double until = real_monotonic() + seconds;
  double worst = 0;
  while (real_monotonic() < until) {
    const double a = reference(), b = clock.seconds(), c = reference();
    worst = std::max(worst, std::max(std::fabs(b - a), std::fabs(b - c)) - std::fabs(c - a));
  }
  return worst;
}

TEST(TscClock, TakenWhereCpuidVouches) {
  TscClock clock(true, real_monotonic);
  read_for(clock, 2 * TscClock::kCalibrationSeconds, real_monotonic);
  EXPECT_TRUE(clock.on_tsc());
  EXPECT_LT(read_for(clock, 0.05, real_monotonic), 1e-3);
}

TEST(TscClock, TakenWithoutCpuidOnceTwoWindowsAgree) {
  TscClock clock(false, real_monotonic);
  read_for(clock, 1.5 * TscClock::kCalibrationSeconds, real_monotonic);
  EXPECT_FALSE(clock.on_tsc()) << "one window is not enough without CPUID";
  read_for(clock, 1.5 * TscClock::kCalibrationSeconds, real_monotonic);
  EXPECT_TRUE(clock.on_tsc());
  EXPECT_LT(read_for(clock, 0.05, real_monotonic), 1e-3);
}

TEST(TscClock, LeftWhenItsRateMovesDuringCalibration) {
  g_fast_from = real_monotonic() + 1.5 * TscClock::kCalibrationSeconds;  // in the second window
  TscClock clock(false, fake_monotonic);
  read_for(clock, 4 * TscClock::kCalibrationSeconds, fake_monotonic);
  EXPECT_FALSE(clock.on_tsc());
  EXPECT_LT(read_for(clock, 0.05, fake_monotonic), 1e-4) << "CLOCK_MONOTONIC's readings";
  g_fast_from = 1e300;
}

TEST(TscClock, LeftWhenItsRateMovesLater) {
  g_fast_from = 1e300;
  TscClock clock(false, fake_monotonic);
  read_for(clock, 3 * TscClock::kCalibrationSeconds, fake_monotonic);
  ASSERT_TRUE(clock.on_tsc());
  g_fast_from = real_monotonic();
  read_for(clock, TscClock::kCheckSeconds + 0.2, fake_monotonic);
  EXPECT_FALSE(clock.on_tsc()) << "the check against CLOCK_MONOTONIC must see the 1% it ran fast";
  EXPECT_LT(read_for(clock, 0.05, fake_monotonic), 1e-4) << "CLOCK_MONOTONIC's readings";
  g_fast_from = 1e300;
}

TEST(TscClock, CpuidVouchingIsNotChecked) {
  // Where CPUID vouches, the TSC stays (as before this rule existed) whatever the clock does.
  g_fast_from = 1e300;
  TscClock clock(true, fake_monotonic);
  read_for(clock, 2 * TscClock::kCalibrationSeconds, fake_monotonic);
  ASSERT_TRUE(clock.on_tsc());
  g_fast_from = real_monotonic();
  read_for(clock, TscClock::kCheckSeconds + 0.2, fake_monotonic);
  EXPECT_TRUE(clock.on_tsc());
  g_fast_from = 1e300;
}

}  // namespace
