"""Runs tests/programs/nccl_graph_meet_program (NCCL from the toolkit, one process driving two GPUs)
through vgpu-run on the sim backend: a captured all-reduce replayed while one rank is late (a
memset on its stream) ends on both ranks where the same all-reduce launched directly does, the
late rank launched second or first, on two replays in a row (issue 23;
vgpu/sim/exec/nccl_graph_meet.h). The program compares the times itself (its "ok"/"FAIL" lines).

With `procs`, the two ranks are processes (launch_ranks.py, as torchrun starts them): each
replay must meet the other process's rank as the direct launch does (each rank's replay reads
as its direct launch), and the direct launch must end at the same time on both ranks (the
step's premise: every step starts at the end of an all-reduce shared by both ranks).
With `procs2`, each of the two processes holds two ranks (four GPUs, one thread a process driving
its two through NCCL groups): a replay meets its own process's other rank and the other
process's two at once; every rank is late in turn.

Usage: run_nccl_graph_meet.py [procs | procs2]
Environment: VGPU_RUN, GRAPH_MEET_PROGRAM, CUDA_LIB_DIR, and LAUNCHER for procs."""
import os
import re
import sys

from job_check import run_checked, scratch_dir

TIMEOUT_S = 180


def main():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    procs = mode in ("procs", "procs2")
    per = 2 if mode == "procs2" else 1
    ranks = list(range(2 * per)) if procs else [0, 1]
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--"]
    if procs:
        id_file = os.path.join(scratch_dir(prefix="vgpu-graph-meet-"), "nccl_id")
        cmd += [sys.executable, env["LAUNCHER"], "--nproc-per-node", "2", "--timeout", str(TIMEOUT_S - 20), "--",
                env["GRAPH_MEET_PROGRAM"], "--procs", id_file, "64", str(per)]
    else:
        cmd += [env["GRAPH_MEET_PROGRAM"], "64"]
    ran = run_checked(cmd, env, TIMEOUT_S)
    if ran is None:
        return 1
    out, check = ran
    for line in out.splitlines():
        if re.match(r"^(rank \d+ )?late rank", line):
            print(line)
    if procs:
        steps = [f"rank {r} late rank {late}" for r in ranks for late in ranks]
        steps += [f"rank {r} ncclCommDestroy" for r in ranks]
        for late in ranks:
            direct = {int(r): float(ms) for r, ms in
                      re.findall(rf"^rank (\d+) late rank {late}: direct ([0-9.]+) ms$", out, re.M)}
            check(sorted(direct) == ranks and
                  max(direct.values()) - min(direct.values()) <= 1e-5 * direct[0] + 1e-6,
                  f"late rank {late}: the direct all-reduce ends together on every rank: {direct}")
    else:
        steps = ["late rank 1", "late rank 0", "ncclCommDestroy"]
    for step in steps:
        check(re.search(rf"^ok   {step}$", out, re.M) is not None, f"the program printed 'ok   {step}'")
    check(re.search(r"^FAIL ", out, re.M) is None, "no replay differs from its direct launch")
    return check.verdict(out)


if __name__ == "__main__":
    sys.exit(main())
