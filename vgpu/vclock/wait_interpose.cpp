// Waits with an absolute deadline. A program computes such a deadline from a clock reading plus
// a timeout (Python 3.11's time.sleep, its lock and Event timeouts, and the GIL's switch
// interval; libstdc++'s condition_variable::wait_for and timed mutexes), but the kernel waits on
// the real clock. On a thread whose readings are virtual the deadline is moved onto the real
// clock (job_clock.h real_deadline), so a 100 ms timeout waits 100 ms, not 0 or however far the
// virtual clock runs ahead of the real one. Relative waits (nanosleep, poll, select, epoll) need
// nothing.
//
// Condition variables: pthread_cond_timedwait's clock is the condvar's own (CLOCK_REALTIME
// unless set with pthread_condattr_setclock). The deadline is moved by the CLOCK_MONOTONIC
// offset; the REALTIME offset differs from it only by how much the real clocks drifted apart
// since the thread switched (NTP slewing), which is negligible for a timeout.
//
// Condition variables also carry virtual time from the thread that signals to the thread that
// wakes (handoff.h), so every wait on one is interposed, the untimed one too.
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "vclock/clock_ids.h"
#include "vclock/handoff.h"
#include "vclock/job_clock.h"
#include "vclock/real_calls.h"

namespace {

using namespace vgpu::vclock_shim;

// The deadline to hand to the real call: `abs` itself, or `moved` filled in.
const timespec* deadline(clockid_t id, const timespec* abs, timespec* moved) {
  const int c = clock_index(id);
  if (abs == nullptr || c < 0) return abs;
  return real_deadline(c, *abs, moved) ? moved : abs;
}

}  // namespace

#define VCLOCK_EXPORT extern "C" __attribute__((visibility("default")))

VCLOCK_EXPORT int clock_nanosleep(clockid_t id, int flags, const struct timespec* req,
                                  struct timespec* rem) {
  timespec moved{};
  if ((flags & TIMER_ABSTIME) != 0) req = deadline(id, req, &moved);
  return real::clock_nanosleep(id, flags, req, rem);
}

VCLOCK_EXPORT int pthread_cond_signal(pthread_cond_t* cond) {
  handoff::signalled(cond);
  return real::pthread_cond_signal(cond);
}

VCLOCK_EXPORT int pthread_cond_broadcast(pthread_cond_t* cond) {
  handoff::signalled(cond);
  return real::pthread_cond_broadcast(cond);
}

VCLOCK_EXPORT int pthread_cond_wait(pthread_cond_t* cond, pthread_mutex_t* mutex) {
  const int r = real::pthread_cond_wait(cond, mutex);
  if (r == 0) handoff::woke(cond);
  return r;
}

VCLOCK_EXPORT int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                         const struct timespec* abs) {
  timespec moved{};
  const int r = real::pthread_cond_timedwait(cond, mutex, deadline(CLOCK_MONOTONIC, abs, &moved));
  if (r == 0) handoff::woke(cond);
  return r;
}

VCLOCK_EXPORT int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                         clockid_t id, const struct timespec* abs) {
  timespec moved{};
  const int r = real::pthread_cond_clockwait(cond, mutex, id, deadline(id, abs, &moved));
  if (r == 0) handoff::woke(cond);
  return r;
}

VCLOCK_EXPORT int sem_timedwait(sem_t* sem, const struct timespec* abs) {
  timespec moved{};
  return real::sem_timedwait(sem, deadline(CLOCK_REALTIME, abs, &moved));
}

VCLOCK_EXPORT int sem_clockwait(sem_t* sem, clockid_t id, const struct timespec* abs) {
  timespec moved{};
  return real::sem_clockwait(sem, id, deadline(id, abs, &moved));
}

VCLOCK_EXPORT int pthread_mutex_timedlock(pthread_mutex_t* mutex, const struct timespec* abs) noexcept {
  timespec moved{};
  return real::pthread_mutex_timedlock(mutex, deadline(CLOCK_REALTIME, abs, &moved));
}

VCLOCK_EXPORT int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t id,
                                          const struct timespec* abs) noexcept {
  timespec moved{};
  return real::pthread_mutex_clocklock(mutex, id, deadline(id, abs, &moved));
}
