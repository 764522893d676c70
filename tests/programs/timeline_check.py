#!/usr/bin/env python3
"""VGPU_TIMELINE on either backend (the passthrough over the sim backend as its real driver, or the
sim backend itself): an unmodified cudart program's kernels, copies and memsets appear in the trace
with their virtual times, and the processes of one job (VGPU_JOB_ID: torchrun's ranks under vgpu-run)
leave one merged trace, not the last process's alone.

usage: timeline_check.py PROGRAM   (VGPU_TEST_LIBRARY_PATH selects the backend's library)"""
import json
import os
import subprocess
import sys
import tempfile


def run(program, env):
    r = subprocess.run([program], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    if r.returncode != 0:
        # The program's own failed checks first (a CI log keeps only so much of a long tail).
        failed = [l for l in r.stdout.splitlines() if l.startswith("FAIL")]
        sys.exit(f"FAIL {program} exited {r.returncode}\n" + "\n".join(failed) +
                 f"\n--- tail\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def events(path):
    with open(path) as f:
        trace = json.load(f)
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def main():
    program = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("VGPU_JOB_ID", None)
        env["LD_PRELOAD"] = env.pop("VGPU_TEST_PRELOAD", "")  # sanitizer builds: the program's own
        env["LD_LIBRARY_PATH"] = env.pop("VGPU_TEST_LIBRARY_PATH", env.get("LD_LIBRARY_PATH", ""))
        single = os.path.join(tmp, "single.json")
        env["VGPU_TIMELINE"] = single
        # The program checks launch timings of its own (20 launches against 5); the CPU time between
        # calls read exactly, so that a preempted stretch under a loaded sanitizer run is not charged
        # its wall time (2 of 9 loaded ASan runs failed there: "20 launches take 6.50 ms, 3.18 x 5").
        env["VGPU_CPU_CLOCK"] = "exact"
        run(program, env)
        one = events(single)
        kernels = [e for e in one if "scale" in e["name"]]
        # The passthrough labels a copy "copy host<->device ...", the sim backend "memcpy HtoD/DtoH ...".
        copies = [e for e in one if e["name"].startswith(("copy host<->device", "memcpy HtoD", "memcpy DtoH"))]
        print(f"one process: {len(one)} ops, {len(kernels)} launches of scale, {len(copies)} host copies")
        if len(kernels) < 20:  # the program launches `scale` 27 times
            failures.append(f"expected the program's launches of scale in the trace, found {len(kernels)}")
        if not copies:
            failures.append("no host<->device copy in the trace")
        # Stream order: on each lane, ops do not overlap and have non-negative durations.
        lanes = {}
        for e in one:
            if e["dur"] < 0:
                failures.append(f"negative duration: {e}")
            lanes.setdefault((e["pid"], e["tid"]), []).append(e)
        for lane, ops in lanes.items():
            ops.sort(key=lambda e: e["ts"])
            for a, b in zip(ops, ops[1:]):
                if b["ts"] < a["ts"] + a["dur"] - 1e-3:
                    failures.append(f"lane {lane}: {b['name']} starts at {b['ts']} before {a['name']} ends")
                    break
        # Two processes of one job: one trace with both processes' ops.
        merged = os.path.join(tmp, "job.json")
        env["VGPU_TIMELINE"] = merged
        env["VGPU_JOB_ID"] = "timeline-check-" + str(os.getpid())
        # The program's own launch-timing check ran in the single process above; here the two
        # processes' measurements share one "real" driver's host time (cudart_program.cu).
        env["CUDART_PROGRAM_NO_LAUNCH_RATIO"] = "1"
        # Each process's output kept: a process that failed says why (seen once under ASan in a
        # loaded CI run, 2026-11-28, with its output thrown away).
        procs = [subprocess.Popen([program], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(2)]
        outputs = [p.communicate(timeout=240)[0] for p in procs]
        codes = [p.returncode for p in procs]
        if any(codes):
            failures.append(f"the job's processes exited {codes}")
            for i, (code, out) in enumerate(zip(codes, outputs)):
                if code != 0:
                    print(f"process {i} (exit {code}), its last output:\n{out[-3000:]}")
        both = events(merged)
        print(f"two processes of one job: {len(both)} ops in the merged trace")
        if len(both) != 2 * len(one):
            failures.append(f"merged trace holds {len(both)} ops, expected 2 x {len(one)}")
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
