#!/usr/bin/env python3
"""Simulation slowdown and kernel-estimation accuracy of the passthrough backend, on a GPU.

  multiplex_bench.py LIBDIR OUTDIR

Runs a GPT-2 training step (tests/gpu/gpt2_tiny.py) four ways, each in fresh processes:
  real        one process on the real driver, no vgpu: the baseline step time;
  alone       one process on virtual device 0 of vgpu: every kernel signature measured with
              nothing else on the GPU (the measurements go to a kernel-time database);
  shared      8 processes at once, one per virtual device, all on the one physical GPU, with
              vgpu's default measurement (each measured launch holds the GPU's measurement lock);
  concurrent  the same 8 processes with VGPU_MEASURE=concurrent (measurements may overlap).
Prints three tables: the wall time of one step of the 8-device job over the real single-GPU
step (simulation slowdown); per kernel signature the duration measured under multiplexing
against the same kernel measured alone (median and p95 of the relative error over the kernels);
and the step time each virtual device reports through its own CUDA events (virtual time)
against the step time of the same job alone.
"""
import os
import sqlite3
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STEPS, WARMUP = 20, 5

WORKER = r"""
import os, sys, time, torch
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "gpu"))
import gpt2_tiny
rank, steps, warmup = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.cuda.set_device(rank)
model, opt = gpt2_tiny.make(f"cuda:{rank}", layers=4)
for _ in range(warmup):
    gpt2_tiny.step(model, opt, batch=8, seq=512)
torch.cuda.synchronize()
t0 = time.perf_counter()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record()
for _ in range(steps):
    gpt2_tiny.step(model, opt, batch=8, seq=512)
b.record()
torch.cuda.synchronize()
print("WALL_PER_STEP_MS", (time.perf_counter() - t0) / steps * 1e3, flush=True)
print("EVENT_PER_STEP_MS", a.elapsed_time(b) / steps, flush=True)
"""


def run(ranks, env_extra, libdir=None, db_root=None):
    procs = []
    for r in ranks:
        env = dict(os.environ, **env_extra)
        if libdir:
            env["LD_LIBRARY_PATH"] = f"{libdir}/passthrough:{libdir}:" + env.get("LD_LIBRARY_PATH", "")
        if db_root:
            os.makedirs(f"{db_root}/rank{r}", exist_ok=True)
            env["VGPU_KERNEL_DB"] = f"{db_root}/rank{r}"
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, ROOT, str(r), str(STEPS), str(WARMUP)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    walls, events = [], []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        vals = [float(l.split()[1]) for l in out.splitlines() if l.startswith("WALL_PER_STEP_MS")]
        ev = [float(l.split()[1]) for l in out.splitlines() if l.startswith("EVENT_PER_STEP_MS")]
        if p.returncode != 0 or not vals:
            print(out[-3000:])
            raise SystemExit(f"worker failed ({p.returncode})")
        walls.append(vals[0])
        events.append(ev[0] if ev else float("nan"))
    run.events = events
    return walls


def durations(db_root):
    """signature -> (name, mean duration ns) over every rank's database."""
    acc = {}
    for dirpath, _, files in os.walk(db_root):
        for f in files:
            if not f.endswith(".sqlite"):
                continue
            con = sqlite3.connect(os.path.join(dirpath, f))
            for sig, name, ns, n in con.execute("select signature, kernel_name, duration_ns, samples from kernel_times"):
                s = acc.setdefault(bytes(sig), [name, 0, 0])
                s[1] += ns * n
                s[2] += n
    return {k: (v[0], v[1] / v[2]) for k, v in acc.items() if v[2]}


def accuracy(alone, other):
    errs = []
    for sig, (name, ns) in alone.items():
        if sig in other and ns > 0:
            errs.append(abs(other[sig][1] - ns) / ns * 100)
    errs.sort()
    if not errs:
        return None
    return len(errs), statistics.median(errs), errs[min(len(errs) - 1, int(0.95 * len(errs)))]


def main():
    libdir, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    real = run([0], {})[0]
    real_event = run.events[0]
    alone_wall = run([0], {}, libdir, f"{out}/alone")[0]
    alone_event = run.events[0]
    shared_walls = run(range(8), {}, libdir, f"{out}/shared")
    shared_events = run.events
    concurrent_walls = run(range(8), {"VGPU_MEASURE": "concurrent"}, libdir, f"{out}/concurrent")
    concurrent_events = run.events
    alone = durations(f"{out}/alone")
    print(f"\nSimulation slowdown (GPT-2, 4 layers, batch 8, seq 512, bf16; {STEPS} steps after {WARMUP}):")
    print(f"{'run':52s} {'ms per step':>12s} {'x real':>8s}")
    print(f"{'real GPU, no vgpu (baseline)':52s} {real:12.2f} {1:8.2f}")
    print(f"{'vgpu, 1 virtual device':52s} {alone_wall:12.2f} {alone_wall / real:8.2f}")
    print(f"{'vgpu, 8 virtual devices at once (measured alone)':52s} {max(shared_walls):12.2f} {max(shared_walls) / real:8.2f}")
    print(f"{'vgpu, 8 virtual devices at once (concurrent)':52s} {max(concurrent_walls):12.2f} {max(concurrent_walls) / real:8.2f}")
    print(f"\nKernel-estimation accuracy ({len(alone)} kernel signatures measured alone):")
    print(f"{'measured while 8 virtual devices share the GPU':52s} {'kernels':>8s} {'median err %':>13s} {'p95 err %':>10s}")
    for label, root in [("default (measurement lock)", "shared"), ("VGPU_MEASURE=concurrent", "concurrent")]:
        a = accuracy(alone, durations(f"{out}/{root}"))
        if a:
            print(f"{label:52s} {a[0]:8d} {a[1]:13.2f} {a[2]:10.2f}")
        else:
            print(f"{label:52s} no common signatures")
    print("\nStep time by the job's own CUDA events (virtual time under vgpu):")
    print(f"real GPU {real_event:.3f} ms; vgpu alone {alone_event:.3f} ms "
          f"(error {abs(alone_event - real_event) / real_event * 100:.2f}%)")
    for label, ev in [("8 devices, measurement lock", shared_events), ("8 devices, concurrent", concurrent_events)]:
        errs = sorted(abs(e - alone_event) / alone_event * 100 for e in ev)
        print(f"{label}: per device {', '.join(f'{e:.2f}' for e in ev)} ms; vs alone median error "
              f"{statistics.median(errs):.2f}%, max {errs[-1]:.2f}%")


if __name__ == "__main__":
    main()
