// cpu_speed: how fast each logical CPU of this host runs a fixed piece of host code, now.
//
// Why: the machines lent for fidelity runs are virtual machines whose logical CPUs do not all run
// at one speed (the same Python loop took 2.05-2.3 ms on some steps and 3.3-4.3 ms on others, on
// one rank of one run: docs/results.md, fifteenth session). A host-bound figure (nccl-tests below
// 4 MiB, an FSDP2 step) then depends on where the scheduler put the thread. This prints, for each
// CPU the process may use, the thread CPU time of one fixed workload pinned there (the least of
// several tries, so an interrupt does not count), so a comparison can be run on CPUs of one speed
// and say which.
//
// Workload: a dependent walk through a 16 KiB table (L1-resident loads, as an interpreter's or a
// driver's pointer chasing) mixed with multiplies and a data-dependent branch: no vector units, no
// memory bandwidth.
//
// Build: cc -O2 -o cpu_speed cpu_speed.c
// Run:   ./cpu_speed [tries]          prints "cpu <n> <ns per step>" per CPU, fastest first
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kTable = 4096, kSteps = 200000 };

static double thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

// One pass of the workload; returns a value the compiler cannot drop.
static uint32_t walk(const uint32_t* next) {
  uint32_t at = 0, acc = 1;
  for (int i = 0; i < kSteps; ++i) {
    at = next[at];
    acc = acc * 2654435761u + at;
    if (acc & 0x10) acc ^= at << 3;
  }
  return acc;
}

struct Speed {
  int cpu;
  double ns_per_step;
};

static int by_speed(const void* a, const void* b) {
  double x = ((const struct Speed*)a)->ns_per_step, y = ((const struct Speed*)b)->ns_per_step;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int tries = argc > 1 ? atoi(argv[1]) : 5;
  if (tries < 1) tries = 1;
  uint32_t* next = malloc(sizeof(uint32_t) * kTable);
  // A single cycle through the table in a scrambled order (a full-period affine map).
  for (uint32_t i = 0; i < kTable; ++i) next[i] = (i * 1103u + 12345u) % kTable;
  cpu_set_t allowed;
  sched_getaffinity(0, sizeof(allowed), &allowed);
  struct Speed speeds[CPU_SETSIZE];
  int n = 0;
  volatile uint32_t sink = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) continue;
    sink += walk(next);  // warm the table and the core
    double best = 1e300;
    for (int t = 0; t < tries; ++t) {
      double t0 = thread_ns();
      sink += walk(next);
      double dt = thread_ns() - t0;
      if (dt < best) best = dt;
    }
    speeds[n].cpu = cpu;
    speeds[n].ns_per_step = best / kSteps;
    ++n;
  }
  sched_setaffinity(0, sizeof(allowed), &allowed);
  qsort(speeds, n, sizeof(speeds[0]), by_speed);
  for (int i = 0; i < n; ++i) printf("cpu %d %.3f\n", speeds[i].cpu, speeds[i].ns_per_step);
  free(next);
  return sink == 0xFFFFFFFFu;  // keeps `sink` live; 0 in practice
}
