#!/usr/bin/env python3
"""cpu_speed.py: the thread CPU time of train_step.py's host probe (a fixed pure-Python loop) on
each logical CPU this process may use, the least of several tries, fastest first.

The interpreter's loop is branchy, front-end-bound code, as a training step's Python and dispatch
are, where cpu_speed.c's walk is a dependent chain of loads and multiplies: the two can tell
different slowdowns apart (a busy sibling hyperthread of the host slows the first more).
Usage: python3 cpu_speed.py [tries]   prints "cpu <n> <ms>" per CPU."""
import os
import sys
import time


def probe_ms():
    t0 = time.thread_time()
    acc = 0
    for i in range(40000):
        acc += (i * i) % 7
    return (time.thread_time() - t0) * 1e3


def main():
    tries = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    allowed = sorted(os.sched_getaffinity(0))
    speeds = []
    for cpu in allowed:
        os.sched_setaffinity(0, [cpu])
        probe_ms()
        speeds.append((min(probe_ms() for _ in range(tries)), cpu))
    os.sched_setaffinity(0, allowed)
    for ms, cpu in sorted(speeds):
        print(f"cpu {cpu} {ms:.3f}")


if __name__ == "__main__":
    main()
