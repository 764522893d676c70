"""tests/gpu/fidelity/cpu_speed.c and cpu_speed.py (the per-CPU host speed the fidelity runs print):
each prints one line "cpu <n> <time>" for every logical CPU this process may use, fastest first,
with positive times, and leaves the process's affinity as it was."""
import os
import subprocess
import sys

root = os.environ["VGPU_SOURCE_ROOT"]
speed_c = os.environ["CPU_SPEED"]  # the built cpu_speed.c
allowed = sorted(os.sched_getaffinity(0))
failed = 0


def check(name, cmd):
    global failed
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    rows = [line.split() for line in out.stdout.splitlines()]
    cpus = sorted(int(r[1]) for r in rows if len(r) == 3 and r[0] == "cpu")
    times = [float(r[2]) for r in rows if len(r) == 3 and r[0] == "cpu"]
    ok = out.returncode == 0 and cpus == allowed and all(t > 0 for t in times) and times == sorted(times)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {out.returncode}, CPUs {cpus} (allowed {allowed}), "
          f"times {times}")
    failed += not ok


check("cpu_speed.c", [speed_c, "2"])
check("cpu_speed.c interp", [speed_c, "2", "interp"])
check("cpu_speed.py", [sys.executable, os.path.join(root, "tests", "gpu", "fidelity", "cpu_speed.py"), "2"])
# The Python probe restores the caller's affinity when imported and used (train_step.py imports it).
sys.path.insert(0, os.path.join(root, "tests", "gpu", "fidelity"))
import cpu_speed  # noqa: E402
before = os.sched_getaffinity(0)
ms = cpu_speed.probe_ms()
after = os.sched_getaffinity(0)
ok = ms > 0 and before == after
print(f"{'ok  ' if ok else 'FAIL'} probe_ms() = {ms:.3f} ms, affinity kept: {before == after}")
failed += not ok
sys.exit(1 if failed else 0)
