"""Runs tests/programs/nccl_graph_meet_program (NCCL from the toolkit, one process driving two GPUs)
through vgpu-run on the sim backend: a captured all-reduce replayed while one rank is late (a
memset on its stream) ends on both ranks where the same all-reduce launched directly does, the
late rank launched second or first, on two replays in a row (issue 23;
vgpu/sim/exec/nccl_graph_meet.h). The program compares the times itself (its "ok"/"FAIL" lines).

Environment: VGPU_RUN, GRAPH_MEET_PROGRAM, CUDA_LIB_DIR."""
import os
import re
import sys

from job_check import run_checked

TIMEOUT_S = 180


def main():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--", env["GRAPH_MEET_PROGRAM"], "64"]
    ran = run_checked(cmd, env, TIMEOUT_S)
    if ran is None:
        return 1
    out, check = ran
    for line in out.splitlines():
        if line.startswith("late rank"):
            print(line)
    for step in ("late rank 1", "late rank 0", "ncclCommDestroy"):
        check(re.search(rf"^ok   {step}$", out, re.M) is not None, f"the program printed 'ok   {step}'")
    check(re.search(r"^FAIL ", out, re.M) is None, "no replay differs from its direct launch")
    return check.verdict(out)


if __name__ == "__main__":
    sys.exit(main())
