#!/usr/bin/env python3
"""VGPU_LAZY_CONTEXTS on the passthrough backend (over the sim backend as its real driver): a
process makes a real context only for the virtual devices it uses, although cudart asks for the
primary context of all eight at start-up; without the setting it makes all eight. Each run's own
checks (lazy_contexts_program.cu: one handle per primary context from every call that gives one,
every handle accepted back) must pass too.

usage: lazy_contexts_check.py [--results] PROGRAM   (the environment selects the passthrough
library; --results, on a GPU: also check what the kernels computed)"""
import os
import re
import subprocess
import sys

CONTEXT_LINE = re.compile(r"a real context for virtual device (\d+) on GPU")


def run(program, devices, lazy, results):
    env = dict(os.environ)
    env.pop("VGPU_JOB_ID", None)
    env["LD_PRELOAD"] = env.pop("VGPU_TEST_PRELOAD", "")  # sanitizer builds: the program's own
    env["LD_LIBRARY_PATH"] = env.pop("VGPU_TEST_LIBRARY_PATH", env.get("LD_LIBRARY_PATH", ""))
    env["VGPU_LOG_LEVEL"] = "info"
    env["VGPU_LAZY_CONTEXTS"] = "1" if lazy else "0"
    flags = ["--results"] if results else []  # a GPU runs the kernels
    r = subprocess.run([program] + flags + [str(d) for d in devices], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=240)
    made = sorted(int(m.group(1)) for m in CONTEXT_LINE.finditer(r.stderr))
    failed = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    return r.returncode, made, failed, r


def main():
    results = "--results" in sys.argv[1:]
    program = [a for a in sys.argv[1:] if a != "--results"][0]
    failures = []
    cases = [([3], True, [3]), ([0], True, [0]), ([2, 5], True, [2, 5]), ([3], False, list(range(8)))]
    for devices, lazy, expected in cases:
        rc, made, failed, r = run(program, devices, lazy, results)
        what = f"devices {devices} with VGPU_LAZY_CONTEXTS={int(lazy)}"
        print(f"{what}: exit {rc}, real contexts made for virtual devices {made}")
        if rc != 0 or failed:
            failures.append(f"{what}: exit {rc}: " + "; ".join(failed[:5]) + "\n" + r.stderr[-1500:])
        if made != expected:
            failures.append(f"{what}: real contexts for {made}, expected {expected}")
    for f in failures:
        print("FAIL", f)
    print("lazy contexts:", "FAILED" if failures else "passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
