// Whether this host gives perf's per-thread task clock a user-space time (perf_event_mmap_page
// cap_user_time): then a thread's CPU time reads without a system call (rdtsc and the page), where
// clock_gettime(CLOCK_THREAD_CPUTIME_ID) costs ~5 us on the H200 hosts. Prints the caps, the
// clock against CLOCK_THREAD_CPUTIME_ID over a busy stretch and a sleep, and each read's cost.
//   g++ -O2 -o /tmp/perf_task_clock tests/gpu/probe/perf_task_clock.cpp && /tmp/perf_task_clock
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <ctime>
#include <chrono>
static perf_event_mmap_page* pg;
static inline uint64_t task_ns() {
  uint32_t seq; uint64_t enabled, cyc = 0, off = 0; uint32_t mult = 0; uint16_t shift = 0; bool cap;
  do {
    seq = pg->lock; __atomic_signal_fence(__ATOMIC_SEQ_CST);
    enabled = pg->time_enabled;
    cap = pg->cap_user_time;
    if (cap) { cyc = __rdtsc(); off = pg->time_offset; mult = pg->time_mult; shift = pg->time_shift; }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  } while (pg->lock != seq);
  if (!cap) return enabled;
  uint64_t quot = cyc >> shift, rem = cyc & ((uint64_t(1) << shift) - 1);
  return enabled + off + quot * mult + ((rem * mult) >> shift);
}
static uint64_t cpu_ns() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
int main() {
  perf_event_attr a; memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE; a.size = sizeof a; a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.exclude_kernel = 0; a.disabled = 0;
  int fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) { perror("perf_event_open"); return 1; }
  void* m = mmap(nullptr, sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) { perror("mmap"); return 1; }
  pg = (perf_event_mmap_page*)m;
  printf("cap_user_time %d cap_user_time_zero %d cap_user_rdpmc %d index %u\n", (int)pg->cap_user_time, (int)pg->cap_user_time_zero, (int)pg->cap_user_rdpmc, pg->index);
  uint64_t p0 = task_ns(), c0 = cpu_ns();
  volatile double x = 0; for (int i = 0; i < 50000000; ++i) x += i * 1e-9;
  usleep(200000);
  for (int i = 0; i < 30000000; ++i) x += i * 1e-9;
  uint64_t p1 = task_ns(), c1 = cpu_ns();
  printf("perf delta %.3f ms, thread cpu delta %.3f ms\n", (p1 - p0) / 1e6, (c1 - c0) / 1e6);
  const int N = 1000000; auto t0 = std::chrono::steady_clock::now(); uint64_t s = 0;
  for (int i = 0; i < N; ++i) s += task_ns();
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < N; ++i) s += cpu_ns();
  auto t2 = std::chrono::steady_clock::now();
  printf("perf read %.1f ns, clock_gettime %.1f ns (%llu)\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / N, std::chrono::duration<double, std::nano>(t2 - t1).count() / N, (unsigned long long)(s & 1));
  // monotonic check across many reads
  uint64_t prev = task_ns(); long back = 0; for (int i = 0; i < N; ++i) { uint64_t v = task_ns(); if (v < prev) ++back; prev = v; }
  printf("went back %ld times\n", back);
}
