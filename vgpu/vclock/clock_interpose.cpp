// The clock readings the shim answers: clock_gettime (the six clocks of clock_ids.h),
// gettimeofday and time. What Python's time.perf_counter/monotonic/time and libstdc++'s
// steady_clock/system_clock read. Each takes the real reading first, so a thread without a
// virtual clock gets exactly the C library's answer.
#include <sys/time.h>
#include <time.h>

#include <cstdint>

#include "vclock/clock_ids.h"
#include "vclock/job_clock.h"
#include "vclock/real_calls.h"

namespace {

using namespace vgpu::vclock_shim;

constexpr int64_t kNsPerSecond = 1'000'000'000;

int64_t to_ns(const timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * kNsPerSecond + ts.tv_nsec; }

// glibc declares gettimeofday's timeval pointer nonnull, so the compiler would drop a null
// check on it; but gettimeofday(NULL, tz) is accepted by the C library and must not crash here.
template <typename T>
T* opaque(T* p) {
  asm("" : "+r"(p));
  return p;
}

}  // namespace

#define VCLOCK_EXPORT extern "C" __attribute__((visibility("default")))

VCLOCK_EXPORT int clock_gettime(clockid_t id, struct timespec* ts) noexcept {
  const int rc = real::clock_gettime(id, ts);
  const int c = clock_index(id);
  // rc == 0: the C library wrote *ts, so ts is valid.
  if (rc != 0 || c < 0) return rc;
  const int64_t ns = job_now_ns(c, to_ns(*ts));
  ts->tv_sec = static_cast<time_t>(ns / kNsPerSecond);
  ts->tv_nsec = static_cast<long>(ns % kNsPerSecond);
  return 0;
}

VCLOCK_EXPORT int gettimeofday(struct timeval* tv, void* tz) noexcept {
  const int rc = real::gettimeofday(tv, tz);
  tv = opaque(tv);
  if (rc != 0 || tv == nullptr) return rc;
  const int64_t real_ns = real::now_ns(kRealtime);
  const int64_t ns = job_now_ns(kRealtime, real_ns);
  if (ns == real_ns) return 0;  // real time: keep the C library's own answer
  tv->tv_sec = static_cast<time_t>(ns / kNsPerSecond);
  tv->tv_usec = static_cast<suseconds_t>((ns % kNsPerSecond) / 1000);
  return 0;
}

VCLOCK_EXPORT time_t time(time_t* out) noexcept {
  const time_t t = real::time(nullptr);
  time_t result = t;
  if (t != static_cast<time_t>(-1)) {
    const int64_t real_ns = real::now_ns(kRealtime);
    const int64_t ns = job_now_ns(kRealtime, real_ns);
    if (ns != real_ns) result = static_cast<time_t>(ns / kNsPerSecond);
  }
  if (out != nullptr) *out = result;
  return result;
}
