#include "vclock/real_calls.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "vclock/clock_ids.h"

namespace vgpu::vclock_shim::real {
namespace {

// One lazily resolved definition. Resolving twice from two threads is harmless (same answer).
struct Next {
  const char* name;
  std::atomic<void*> fn{nullptr};

  template <typename Fn>
  Fn get() {
    void* p = fn.load(std::memory_order_acquire);
    if (p == nullptr) {
      p = dlsym(RTLD_NEXT, name);
      fn.store(p, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(p);
  }
};

Next g_clock_gettime{"clock_gettime"};
Next g_gettimeofday{"gettimeofday"};
Next g_time{"time"};
Next g_clock_nanosleep{"clock_nanosleep"};
Next g_cond_signal{"pthread_cond_signal"};
Next g_cond_broadcast{"pthread_cond_broadcast"};
Next g_cond_wait{"pthread_cond_wait"};
Next g_cond_timedwait{"pthread_cond_timedwait"};
Next g_cond_clockwait{"pthread_cond_clockwait"};
Next g_sem_timedwait{"sem_timedwait"};
Next g_sem_clockwait{"sem_clockwait"};
Next g_mutex_timedlock{"pthread_mutex_timedlock"};
Next g_mutex_clocklock{"pthread_mutex_clocklock"};

int sem_enosys() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

int clock_gettime(clockid_t id, timespec* ts) {
  if (auto f = g_clock_gettime.get<int (*)(clockid_t, timespec*)>()) return f(id, ts);
  return static_cast<int>(syscall(SYS_clock_gettime, id, ts));
}

int gettimeofday(timeval* tv, void* tz) {
  if (auto f = g_gettimeofday.get<int (*)(timeval*, void*)>()) return f(tv, tz);
  return static_cast<int>(syscall(SYS_gettimeofday, tv, tz));
}

time_t time(time_t* out) {
  if (auto f = g_time.get<time_t (*)(time_t*)>()) return f(out);
  timespec ts{};
  if (real::clock_gettime(CLOCK_REALTIME, &ts) != 0) return static_cast<time_t>(-1);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

int clock_nanosleep(clockid_t id, int flags, const timespec* req, timespec* rem) {
  if (auto f = g_clock_nanosleep.get<int (*)(clockid_t, int, const timespec*, timespec*)>())
    return f(id, flags, req, rem);
  return ENOSYS;
}

int pthread_cond_signal(pthread_cond_t* cond) {
  if (auto f = g_cond_signal.get<int (*)(pthread_cond_t*)>()) return f(cond);
  return ENOSYS;
}

int pthread_cond_broadcast(pthread_cond_t* cond) {
  if (auto f = g_cond_broadcast.get<int (*)(pthread_cond_t*)>()) return f(cond);
  return ENOSYS;
}

int pthread_cond_wait(pthread_cond_t* cond, pthread_mutex_t* mutex) {
  if (auto f = g_cond_wait.get<int (*)(pthread_cond_t*, pthread_mutex_t*)>()) return f(cond, mutex);
  return ENOSYS;
}

int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex, const timespec* abs) {
  using Fn = int (*)(pthread_cond_t*, pthread_mutex_t*, const timespec*);
  if (auto f = g_cond_timedwait.get<Fn>()) return f(cond, mutex, abs);
  return ENOSYS;
}

int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t id,
                           const timespec* abs) {
  using Fn = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const timespec*);
  if (auto f = g_cond_clockwait.get<Fn>()) return f(cond, mutex, id, abs);
  return ENOSYS;
}

int sem_timedwait(sem_t* sem, const timespec* abs) {
  if (auto f = g_sem_timedwait.get<int (*)(sem_t*, const timespec*)>()) return f(sem, abs);
  return sem_enosys();
}

int sem_clockwait(sem_t* sem, clockid_t id, const timespec* abs) {
  if (auto f = g_sem_clockwait.get<int (*)(sem_t*, clockid_t, const timespec*)>())
    return f(sem, id, abs);
  return sem_enosys();
}

int pthread_mutex_timedlock(pthread_mutex_t* mutex, const timespec* abs) {
  if (auto f = g_mutex_timedlock.get<int (*)(pthread_mutex_t*, const timespec*)>())
    return f(mutex, abs);
  return ENOSYS;
}

int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t id, const timespec* abs) {
  if (auto f = g_mutex_clocklock.get<int (*)(pthread_mutex_t*, clockid_t, const timespec*)>())
    return f(mutex, id, abs);
  return ENOSYS;
}

int64_t now_ns(int clock_index) {
  timespec ts{};
  if (real::clock_gettime(clock_id(clock_index), &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void resolve_all() {
  for (Next* n : {&g_clock_gettime, &g_gettimeofday, &g_time, &g_clock_nanosleep,
                  &g_cond_signal, &g_cond_broadcast, &g_cond_wait, &g_cond_timedwait, &g_cond_clockwait, &g_sem_timedwait, &g_sem_clockwait,
                  &g_mutex_timedlock, &g_mutex_clocklock})
    n->get<void*>();
}

}  // namespace vgpu::vclock_shim::real
