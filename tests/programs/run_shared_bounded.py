"""Runs tests/programs/ddp_ranks_program as two rank processes (launch_ranks.py, as torchrun) through
vgpu-run on the sim backend, on two virtual nodes of one GPU, for STEPS and 4 x STEPS training steps,
and reads what the job's vgpud says at its exit (its log: VGPU_DAEMON_DIR/<job>.log):

- bounded memory (issue 23, sim28): the events vgpud's engine keeps live, their flow segments,
  history and result bytes after 4 x STEPS steps are those after STEPS (within MARGIN), while the
  events submitted there grow with the steps (each all-reduce's flows are placed there). Each
  process registers a rank in vgpud and moves its floor there, and releases its flows' ids once it
  has read their finish (vgpu/sim/exec/nccl_shared_fabric.h). Without: everything stays, and the
  kept counts grow four times;
- one request a collective a process (protocol 7, sim30): each process's flows of a collective,
  its answer and its floor in one ShareCollectives, and nothing else of the kind: no AddFlows, no
  Query (before: an AddFlows at the launch and a FinishRelease at the group's end, plus two
  barriers in the rendezvous table; before sim28, one Query per own flow of each collective).
  Each process's requests are at most one per all-reduce: 3 a step.

Usage: run_shared_bounded.py   (environment: VGPU_RUN, DDP_PROGRAM, LAUNCHER, CUDA_LIB_DIR)
"""
import os
import re
import sys

from job_check import Checks, run_job, scratch_dir

TIMEOUT_S = 240
STEPS = 15
BUCKET = 1 << 20       # three all-reduces a step
GRAD = 3 * BUCKET
MARGIN = 1.25          # what 4 x STEPS may keep against STEPS
SLACK = {"live": 64, "segments": 64, "history": 64 << 10, "results": 4096 * 20}


def run(env, steps, work):
    """vgpud's exit counters and requests served for a job of `steps` steps, or None (after a check)."""
    job = f"bounded{steps}x{os.getpid()}"
    id_file = os.path.join(work, f"nccl_id.{steps}")
    env = dict(env, VGPU_DAEMON_DIR=work, VGPU_JOB_ID=job, VGPU_LOG_LEVEL="info")
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--nodes", "2", "--gpus", "1", "--",
           sys.executable, env["LAUNCHER"], "--nproc-per-node", "2", "--timeout", str(TIMEOUT_S - 20), "--",
           env["DDP_PROGRAM"], id_file, str(steps), str(GRAD), str(BUCKET), "0"]
    ran = run_job(cmd, env, TIMEOUT_S)
    check = Checks()
    if ran is None:
        check(False, f"{steps} steps: the job ended")
        return None, check
    out, status = ran
    check(status == 0, f"{steps} steps: exit status {status}")
    done = set(int(x) for x in re.findall(r"^rank (\d+) ok   done$", out, re.M))
    check(done == {0, 1}, f"{steps} steps: both ranks ended after ncclCommDestroy: {sorted(done)}")
    try:
        with open(os.path.join(work, job + ".log")) as f:
            log = f.read()
    except OSError as e:
        check(False, f"{steps} steps: vgpud's log read ({e})")
        return None, check
    m = re.search(r"vgpud: engine at exit: (\d+) events submitted, (\d+) live, (\d+) flow segments, (\d+) B history, "
                  r"(\d+) B results", log)
    served = re.search(r"vgpud: requests served: (.*)", log)
    check(m is not None and served is not None, f"{steps} steps: vgpud's exit counters in its log")
    if m is None or served is None:
        print(log[-3000:])
        return None, check
    moved = re.findall(r".*lies before the floor.*", log)
    check(not moved, f"{steps} steps: no placement moved up to vgpud's floor: {moved[:1]}")
    got = dict(zip(["submitted", "live", "segments", "history", "results"], map(int, m.groups())))
    got["served"] = {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", served.group(1))}
    print(f"     {steps} steps: vgpud kept {got['live']} live events, {got['segments']} flow segments, "
          f"{got['history']} B history, {got['results']} B results of {got['submitted']} submitted; "
          f"requests {got['served']}")
    return got, check


def main():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]
    work = scratch_dir(prefix="vgpu-shared-bounded-")
    os.chmod(work, 0o700)
    few, c1 = run(env, STEPS, work)
    many, c2 = run(env, 4 * STEPS, work)
    check = Checks()
    check.failures = c1.failures + c2.failures
    if few is None or many is None:
        return 1
    check(many["submitted"] >= 3 * few["submitted"] and few["submitted"] >= 3 * STEPS,
          f"the flows went to vgpud: {few['submitted']} then {many['submitted']} events submitted")
    for key in ("live", "segments", "history", "results"):
        check(many[key] <= few[key] * MARGIN + SLACK[key],
              f"vgpud's {key} after {4 * STEPS} steps: {many[key]}, after {STEPS}: {few[key]} (bounded)")
    for got, steps in ((few, STEPS), (many, 4 * STEPS)):
        s = got["served"]
        shared = s.get("ShareCollectives", 0)
        # Two processes, three all-reduces a step (and NCCL's own setup collectives, a few).
        collectives = 2 * 3 * steps
        check(s.get("Query", 0) == 0 and s.get("AddFlows", 0) == 0 and collectives <= shared <= collectives + 2 * 8,
              f"{steps} steps: one request a collective a process: {shared} ShareCollectives for about "
              f"{collectives} (2 processes x 3 all-reduces x {steps} steps), {s.get('AddFlows', 0)} AddFlows, "
              f"{s.get('Query', 0)} Query")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
