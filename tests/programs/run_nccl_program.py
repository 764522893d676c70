"""Runs tests/programs/nccl_program (NCCL from the toolkit, one process driving every rank) through
vgpu-run on the sim backend, as a user would, and checks that it ends and what it reports.

Usage: run_nccl_program.py RANKS   (environment: VGPU_RUN, NCCL_PROGRAM, CUDA_LIB_DIR)

Checks:
- the job ends within the timeout with status 0 and destroys its communicators (it used to hang
  in ncclCommDestroy: NCCL's network proxy waited for kernels the sim backend never runs);
- NCCL used its P2P transport, not the network (the plugin's transport needs running kernels).
"""
import os
import re
import subprocess
import sys

TIMEOUT_S = 180


def main():
    ranks = int(sys.argv[1])
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]  # libnccl.so.2, libcudart; vgpu-run puts vgpu's first
    env["NCCL_DEBUG"] = "INFO"
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--",
           env["NCCL_PROGRAM"], str(ranks), "1", "1", "256"]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        print(out[-4000:])
        print(f"FAIL the job did not end within {TIMEOUT_S} s (hang)")
        return 1
    out = r.stdout + r.stderr
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok   " if ok else "FAIL ") + what)
        failures += not ok

    check(r.returncode == 0, f"exit status {r.returncode}")
    check(f"ok   ncclCommDestroy of {ranks} communicators" in out, "ncclCommDestroy returned")
    check("via P2P" in out and "via NET" not in out, "ranks connect through P2P, none through the network")
    times = [(int(b), float(ms)) for b, ms in re.findall(r"^allreduce (\d+) B ([0-9.]+) ms", out, re.M)]
    check(len(times) == 3, f"three all-reduces timed: {times}")
    if failures:
        print("\n".join(l for l in out.splitlines() if "NCCL INFO" not in l)[-4000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
