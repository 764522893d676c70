// The definitions the shim stands in front of: the next ones after it in the process's lookup
// order (dlsym(RTLD_NEXT), i.e. the C library's), resolved on first use, so that a call made
// before the shim's constructor ran still works. When one cannot be found the clock readings
// fall back to the raw system call, the waits answer ENOSYS.
#pragma once

#include <pthread.h>
#include <semaphore.h>
#include <sys/time.h>
#include <time.h>

#include <cstdint>

namespace vgpu::vclock_shim::real {

int clock_gettime(clockid_t id, timespec* ts);
int gettimeofday(timeval* tv, void* tz);
time_t time(time_t* out);

int clock_nanosleep(clockid_t id, int flags, const timespec* req, timespec* rem);
int pthread_cond_signal(pthread_cond_t* cond);
int pthread_cond_broadcast(pthread_cond_t* cond);
int pthread_cond_wait(pthread_cond_t* cond, pthread_mutex_t* mutex);
int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex, const timespec* abs);
int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t id,
                           const timespec* abs);
int sem_timedwait(sem_t* sem, const timespec* abs);
int sem_clockwait(sem_t* sem, clockid_t id, const timespec* abs);
int pthread_mutex_timedlock(pthread_mutex_t* mutex, const timespec* abs);
int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t id, const timespec* abs);

// The real reading of the clock with that ClockIndex, nanoseconds (0 if it cannot be read).
int64_t now_ns(int clock_index);

// Resolves every definition now (the shim's constructor: before threads race for them).
void resolve_all();

}  // namespace vgpu::vclock_shim::real
