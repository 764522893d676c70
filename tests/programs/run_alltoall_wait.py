"""Runs tests/programs/alltoall_wait_program (an all-to-all of sends and receives, 1 MiB to each
rank, which rank 0 joins only after a long computation) through vgpu-run on the sim backend, and
checks on the simulated timeline that no rank's all-to-all kernel started before rank 0's (issue
23: each rank needs rank 0's share; before, every kernel started at its own rank's arrival).

Usage: run_alltoall_wait.py MODE RANKS   (threads, group or procs: see the program; environment:
VGPU_RUN, ALLTOALL_PROGRAM, CUDA_LIB_DIR, and LAUNCHER, launch_ranks.py, for procs)
"""
import json
import os
import re
import sys
import tempfile

from job_check import Checks, run_job

TIMEOUT_S = 120
SHARE = 1 << 20  # bytes to each rank


def main():
    mode, ranks = sys.argv[1], int(sys.argv[2])
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]  # libnccl.so.2, libcudart; vgpu-run puts vgpu's first
    work = tempfile.mkdtemp(prefix="vgpu-alltoall-")
    program = [env["ALLTOALL_PROGRAM"], mode, str(ranks)]
    timeline = os.path.join(work, "timeline.json")
    timelines = [timeline]
    run_args = ["--timeline", timeline]
    if mode == "procs":
        env["NCCL_ID_FILE"] = os.path.join(work, "nccl_id")
        timelines = [os.path.join(work, f"timeline.{p}.json") for p in range(ranks)]
        run_args = []
        program = [sys.executable, env["LAUNCHER"], "--nproc-per-node", str(ranks), "--timeout", str(TIMEOUT_S - 20),
                   "--", "sh", "-c", f'VGPU_TIMELINE={work}/timeline.$RANK.json exec "$0" "$@"'] + program
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--gpus", str(max(ranks, 2)), *run_args, "--"] + program
    ran = run_job(cmd, env, TIMEOUT_S)
    if ran is None:
        return 1
    out, status = ran
    check = Checks()
    check(status == 0, f"exit status {status}")
    oks = re.findall(r"^ok   alltoall$", out, re.M)
    check(len(oks) == (ranks if mode == "procs" else 1), f"every process ended: {len(oks)}")
    if check.failures:
        print(out[-4000:])
        return 1
    events = []
    for path in timelines:
        with open(path) as f:
            data = json.load(f)
        events += data["traceEvents"] if isinstance(data, dict) else data
    kernels = [e for e in events if e.get("ph") == "X"]
    busy_end = max((e["ts"] + e["dur"] for e in kernels if e["pid"] == 0 and "busy" in e.get("name", "")),
                   default=None)
    others = SHARE * (ranks - 1)
    timed = {}
    for e in kernels:
        if f"[Send {others} B" in e.get("name", ""):
            timed.setdefault(e["pid"], []).append(e)
    check(busy_end is not None and sorted(timed) == list(range(ranks)) and all(len(v) == 1 for v in timed.values()),
          f"rank 0's computation and one timed all-to-all kernel on every GPU: {busy_end}, "
          f"{ {g: len(v) for g, v in sorted(timed.items())} }")
    if check.failures:
        return 1
    starts = {g: v[0]["ts"] for g, v in timed.items()}
    print(f"     rank 0's computation ends at {busy_end:.3f} us; all-to-all kernels start at "
          f"{ {g: round(t, 3) for g, t in sorted(starts.items())} } us")
    check(all(t >= busy_end - 1e-3 for t in starts.values()),
          f"every rank's all-to-all kernel starts after rank 0's computation ({busy_end:.3f} us): "
          f"earliest {min(starts.values()):.3f} us")
    if check.failures:
        print("\n".join(l for l in out.splitlines() if "NCCL INFO" not in l)[-4000:])
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
