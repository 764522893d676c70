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
// `interp` instead times a small bytecode interpreter (a switch over 16 opcodes through a fixed
// 512-instruction program, with data-dependent branches): front-end- and branch-bound code, as
// NCCL's and Python's host paths are, which a busy sibling hyperthread slows more than the walk.
//
// Build: cc -O2 -o cpu_speed cpu_speed.c
// Run:   ./cpu_speed [tries] [walk|interp]   prints "cpu <n> <ns per step>" per CPU, fastest first
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

// One pass of the interpreter over `prog` (kTable bytes: opcodes); returns a value the compiler
// cannot drop.
static uint32_t interp(const uint32_t* prog) {
  uint32_t r[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint32_t pc = 0;
  for (int i = 0; i < kSteps; ++i) {
    uint32_t op = prog[pc];
    switch (op & 15) {
      case 0: r[0] += r[1]; break;
      case 1: r[1] ^= r[2] << 3; break;
      case 2: r[2] = r[2] * 2654435761u + r[3]; break;
      case 3: if (r[3] & 4) r[4] += 7; else r[4] -= 3; break;
      case 4: r[5] = (r[5] >> 1) | (r[0] << 31); break;
      case 5: r[6] += prog[(r[6] + pc) & 511]; break;
      case 6: r[7] = r[7] ? r[7] - 1 : r[1]; break;
      case 7: r[0] ^= r[7]; break;
      case 8: if ((r[1] ^ r[2]) & 1) r[3] += r[4]; break;
      case 9: r[4] = r[4] * 31 + (op >> 4); break;
      case 10: r[5] += r[6] & 0xff; break;
      case 11: r[6] ^= r[5] >> 7; break;
      case 12: if (r[0] > r[1]) r[2] ^= r[0]; else r[2] += r[1]; break;
      case 13: r[1] += op; break;
      case 14: r[3] = (r[3] << 5) ^ r[2]; break;
      default: r[7] += r[0] >> 3; break;
    }
    pc = (pc + 1 + ((op >> 4) & r[op & 7] & 1)) & 511;
  }
  return r[0] ^ r[1] ^ r[2] ^ r[3] ^ r[4] ^ r[5] ^ r[6] ^ r[7];
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
  int use_interp = argc > 2 && argv[2][0] == 'i';
  uint32_t (*work)(const uint32_t*) = use_interp ? interp : walk;
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
    sink += work(next);  // warm the table and the core
    double best = 1e300;
    for (int t = 0; t < tries; ++t) {
      double t0 = thread_ns();
      sink += work(next);
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
