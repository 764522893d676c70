#include "timing/tsc_clock.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>

#include <algorithm>
#include <cmath>

namespace vgpu {

TscClock::TscClock(bool cpuid_vouches, Monotonic monotonic)
    : invariant_(cpuid_vouches), monotonic_(monotonic), start_(sample()) {}

bool TscClock::cpuid_says_invariant() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)) != 0;
}

double TscClock::uncalibrated() {
  const double mono = monotonic_();
  if (mono - start_.mono >= kCalibrationSeconds && !unusable_.load(std::memory_order_relaxed)) calibrate(mono);
  return mono;
}

bool TscClock::on_tsc() const {
  return scale_.load(std::memory_order_acquire) != nullptr && !unusable_.load(std::memory_order_relaxed);
}

// One reading of both clocks: the monotonic clock between two ticks, the closest pair of a few
// tries (a thread preempted between them would skew the rate).
TscClock::Sample TscClock::sample() const {
  Sample best;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 8; ++i) {
    const uint64_t t1 = __rdtsc();
    const double mono = monotonic_();
    const uint64_t t2 = __rdtsc();
    if (t2 >= t1 && t2 - t1 < best_width) {
      best_width = t2 - t1;
      best = {t1 + (t2 - t1) / 2, mono};
    }
  }
  return best;
}

TscClock::Scale TscClock::fit(const Sample& a, const Sample& b) {
  Scale s;
  s.seconds_per_tick = (b.mono - a.mono) / static_cast<double>(b.tick - a.tick);
  s.offset = b.mono - static_cast<double>(b.tick) * s.seconds_per_tick;
  return s;
}

// Once kCalibrationSeconds have passed (`mono`): the rate, at once where CPUID vouches for it,
// else after a second window that agrees with the first.
void TscClock::calibrate(double mono) {
  std::lock_guard l(mu_);
  if (scale_.load(std::memory_order_relaxed) != nullptr || unusable_.load(std::memory_order_relaxed)) return;
  if (!invariant_ && have_first_ && mono - first_.mono < kCalibrationSeconds) return;
  const Sample now = sample();
  if (now.tick <= start_.tick) return;
  if (invariant_) {
    publish(fit(start_, now), UINT64_MAX);
    return;
  }
  if (!have_first_) {
    first_ = now;
    have_first_ = true;
    return;
  }
  if (now.tick <= first_.tick) return;
  const double predicted = fit(start_, first_).at(now.tick);
  if (std::fabs(predicted - now.mono) > kAgree * (now.mono - start_.mono) + kSlackSeconds) {
    unusable_.store(true, std::memory_order_relaxed);  // its rate moved
    return;
  }
  const Scale s = fit(start_, now);
  calibrated_at_ = now.mono;
  publish(s, now.tick + static_cast<uint64_t>(kCheckSeconds / s.seconds_per_tick));
}

void TscClock::publish(const Scale& s, uint64_t check_at) {
  // Once (under mu_, while scale_ is unset): readers that see the pointer see the scale.
  published_ = s;
  check_at_.store(check_at, std::memory_order_relaxed);
  scale_.store(&published_, std::memory_order_release);
}

// A reading due for a check against CLOCK_MONOTONIC (only where CPUID did not vouch).
double TscClock::checked(const Scale& s, uint64_t tick) {
  const double mono = monotonic_();
  if (unusable_.load(std::memory_order_relaxed)) return mono;
  const double t = s.at(tick);
  if (std::fabs(t - mono) > kDrift * std::max(0.0, mono - calibrated_at_) + kSlackSeconds) {
    unusable_.store(true, std::memory_order_relaxed);
    check_at_.store(0, std::memory_order_relaxed);  // every reading asks, and gets CLOCK_MONOTONIC
    return mono;
  }
  check_at_.store(tick + static_cast<uint64_t>(kCheckSeconds / s.seconds_per_tick), std::memory_order_relaxed);
  return t;
}

}  // namespace vgpu
#endif  // __x86_64__
