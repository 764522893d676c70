"""Runs tests/programs/p2p_pipeline_program (two pipeline stages: stage 0 computes, then sends 4 MiB
to stage 1, which receives at once) through vgpu-run on the sim backend, and checks on the
simulated timeline that the receive waited for the send (issue 23).

Usage: run_p2p_pipeline.py MODE [late-receiver]   (threads, group, procs, serial, crossed, chain-threads,
chain-procs or chain-group: see the program;
environment: VGPU_RUN, P2P_PROGRAM, COLLECTIVE_ESTIMATE, CUDA_LIB_DIR, and LAUNCHER,
launch_ranks.py, for procs)

Checks:
- the job ends with status 0 (a receive waiting for a send must not hang);
- stage 1's receive kernel (GPU 1) starts no earlier than stage 0's computation ended (its last
  `busy` kernel on GPU 0: the send's arrival), and ends no earlier than that plus the model's
  send/recv time (collective_estimate); before issue 23 it started at stage 1's own arrival,
  near 0, and ended after the transfer time alone;
- the send kernel (GPU 0) does not end before the receive's start;
- both kernels last the model's send/recv time between GPUs 0 and 1;
- the program's own CUDA-event timing of the receive (from an event recorded right before it)
  is at least the transfer time and reaches past stage 0's computation.
With late-receiver, stage 1 computes before its receive and stage 0 sends 16 MiB at once (past
NCCL's Simple buffer): the send kernel starts no earlier than stage 1's computation ended (the
receive's arrival) and ends no earlier than that plus the transfer; stage 0's CUDA events time
its send across most of stage 1's computation. Before, it ended after the transfer time alone.
With chain-threads / chain-procs (four stages on one communicator of four ranks, as threads or as
processes: stage 0 computes, then sends 4 MiB to stage 1; stage r receives from r-1, then sends to
r+1): stage r's receive starts no earlier than stage r-1's receive ended (stage 0's computation for
stage 1), so stage 3's ends no earlier than the computation plus three transfers; every send/recv
kernel lasts the model's time between its two GPUs; stage 3's CUDA events time its receive across
most of stage 0's computation. Before, stage 3's receive started at its own arrival, near 0.
With chain-group (one thread, every stage's calls in one group: a stage's receive and send run in
one kernel, together), stage 1's kernel starts no earlier than stage 0's computation ended, and
the others do not wait for it.
With crossed (both ranks send 1 MiB first, then receive, each call alone: below NCCL's buffer a
send must not wait for its receiver), the job must end well within the launch's wait limit, and
each receive starts no earlier than the other rank's send.
"""
import json
import os
import re
import subprocess
import sys

from job_check import run_checked, scratch_dir

TIMEOUT_S = 120
SMALL_BYTES = 4 << 20  # the pipeline's activations: within NCCL's Simple buffer
LARGE_BYTES = 16 << 20  # the late receiver's: past it


def check_crossed(check, timeline):
    """Both ranks sent 1 MiB to each other first: each receive starts with or after the other's send."""
    with open(timeline) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    kernels = [e for e in events if e.get("ph") == "X"]
    nbytes = 1 << 20
    sends = {e["pid"]: e for e in kernels if f"[Send {nbytes} B" in e.get("name", "")}
    recvs = {e["pid"]: e for e in kernels if f"[Recv {nbytes} B" in e.get("name", "")}
    check(sorted(sends) == [0, 1] and sorted(recvs) == [0, 1], f"a send and a receive on each GPU: {sorted(sends)}, "
          f"{sorted(recvs)}")
    if check.failures:
        return 1
    for g in (0, 1):
        print(f"     GPU {g}: send {sends[g]['ts']:.3f} + {sends[g]['dur']:.3f} us, receive {recvs[g]['ts']:.3f} + "
              f"{recvs[g]['dur']:.3f} us")
        check(recvs[g]["ts"] >= sends[1 - g]["ts"] - 1e-3,
              f"GPU {g}'s receive starts no earlier than GPU {1 - g}'s send: {recvs[g]['ts']:.3f} >= "
              f"{sends[1 - g]['ts']:.3f} us")
    return 1 if check.failures else 0


def estimate(env, nbytes, a, b):
    """The model's send/recv time between GPUs a and b, us (collective_estimate)."""
    return float(subprocess.run([env["COLLECTIVE_ESTIMATE"], "Send", str(nbytes), str(a), str(b)], capture_output=True,
                                text=True, check=True).stdout)


def check_chain_group(check, env, events, out, stages):
    """One thread, every stage's calls in one group: each stage's kernel receives and sends at once,
    so only stage 1's waits for stage 0's computation; the others meet their senders' arrivals."""
    kernels = [e for e in events if e.get("ph") == "X"]
    busy_end = max((e["ts"] + e["dur"] for e in kernels if e["pid"] == 0 and "busy" in e.get("name", "")),
                   default=None)
    recvs = {g: [e for e in kernels if e["pid"] == g and f"Recv {SMALL_BYTES} B" in e.get("name", "")]
             for g in range(1, stages)}
    check(busy_end is not None and all(len(r) == 1 for r in recvs.values()),
          f"GPU 0's computation and one receiving kernel on each other GPU: {busy_end}, "
          f"{[len(r) for r in recvs.values()]}")
    if check.failures:
        return 1
    eps = 1e-3
    model = estimate(env, SMALL_BYTES, 0, 1)
    r1 = recvs[1][0]
    print(f"     GPU 0's computation ends at {busy_end:.3f} us; GPU 1's kernel {r1['ts']:.3f} + {r1['dur']:.3f} us; "
          + "; ".join(f"GPU {g}'s {recvs[g][0]['ts']:.3f} us" for g in range(2, stages)))
    check(r1["ts"] >= busy_end - eps, f"GPU 1's receive starts after GPU 0's computation: {r1['ts']:.3f} >= "
          f"{busy_end:.3f} us")
    check(r1["ts"] + r1["dur"] >= busy_end + model - eps, f"and ends no earlier than it plus the transfer: "
          f"{r1['ts'] + r1['dur']:.3f} >= {busy_end + model:.3f} us")
    for g in range(2, stages):
        check(recvs[g][0]["ts"] < busy_end, f"GPU {g}'s kernel, whose sender did not compute, does not wait for "
              f"GPU 0: {recvs[g][0]['ts']:.3f} < {busy_end:.3f} us")
    p2p_ms = re.findall(r"^rank 1 p2p ([0-9.]+) ms$", out, re.M)
    busy_ms = re.findall(r"^rank 0 busy ([0-9.]+) ms$", out, re.M)
    check(len(busy_ms) == 1 and len(p2p_ms) == 1 and float(p2p_ms[0]) >= 0.5 * float(busy_ms[0]),
          f"GPU 1's CUDA events time its exchange across most of GPU 0's computation: {p2p_ms}, {busy_ms} ms")
    return 1 if check.failures else 0


def check_chain(check, env, events, out, stages):
    """Stage r's receive waited for stage r-1's (for stage 1: stage 0's computation)."""
    kernels = [e for e in events if e.get("ph") == "X"]
    busy_end = max((e["ts"] + e["dur"] for e in kernels if e["pid"] == 0 and "busy" in e.get("name", "")),
                   default=None)
    sends = {g: [e for e in kernels if e["pid"] == g and f"[Send {SMALL_BYTES} B" in e.get("name", "")]
             for g in range(stages)}
    recvs = {g: [e for e in kernels if e["pid"] == g and f"[Recv {SMALL_BYTES} B" in e.get("name", "")]
             for g in range(stages)}
    check(busy_end is not None, "GPU 0's computation is on the timeline")
    for g in range(stages):
        check(len(sends[g]) == (1 if g + 1 < stages else 0) and len(recvs[g]) == (1 if g > 0 else 0),
              f"GPU {g}: {len(sends[g])} send and {len(recvs[g])} receive kernel(s) of {SMALL_BYTES} B")
    if check.failures:
        return 1
    eps = 1e-3  # us
    ready = busy_end  # when stage g's data could leave stage g-1
    total = 0.0
    print(f"     GPU 0's computation ends at {busy_end:.3f} us")
    for g in range(1, stages):
        model = estimate(env, SMALL_BYTES, g - 1, g)
        total += model
        send, recv = sends[g - 1][0], recvs[g][0]
        print(f"     stage {g}: GPU {g - 1}'s send {send['ts']:.3f} + {send['dur']:.3f} us, GPU {g}'s receive "
              f"{recv['ts']:.3f} + {recv['dur']:.3f} us; the model's transfer {model:.3f} us")
        check(abs(send["dur"] - model) < eps and abs(recv["dur"] - model) < eps,
              f"stage {g}'s send and receive last the model's {model:.3f} us: {send['dur']:.3f}, {recv['dur']:.3f}")
        check(recv["ts"] >= ready - eps, f"GPU {g}'s receive starts after its sender had the data: "
              f"{recv['ts']:.3f} >= {ready:.3f} us")
        check(send["ts"] + send["dur"] >= recv["ts"] - eps,
              f"GPU {g - 1}'s send does not end before GPU {g}'s receive starts: {send['ts'] + send['dur']:.3f} >= "
              f"{recv['ts']:.3f} us")
        ready = recv["ts"] + recv["dur"]
    check(ready >= busy_end + total - eps, f"the last stage's receive ends no earlier than the computation plus "
          f"{stages - 1} transfers: {ready:.3f} >= {busy_end + total:.3f} us")
    busy_ms = re.findall(r"^rank 0 busy ([0-9.]+) ms$", out, re.M)
    p2p_ms = re.findall(rf"^rank {stages - 1} p2p ([0-9.]+) ms$", out, re.M)
    check(len(busy_ms) == 1 and len(p2p_ms) == 1, f"the program timed the first and last stages: {busy_ms}, {p2p_ms}")
    if busy_ms and p2p_ms:
        check(float(p2p_ms[0]) * 1e3 >= total - eps and float(p2p_ms[0]) >= 0.5 * float(busy_ms[0]),
              f"GPU {stages - 1}'s CUDA events time its receive at {float(p2p_ms[0]) * 1e3:.3f} us: the transfers "
              f"({total:.3f} us) and most of GPU 0's computation ({float(busy_ms[0]) * 1e3:.3f} us)")
    return check.verdict(out)


def main():
    mode = sys.argv[1]
    late = len(sys.argv) > 2 and sys.argv[2] == "late-receiver"
    BYTES = LARGE_BYTES if late else SMALL_BYTES
    busy_gpu, other_gpu = (1, 0) if late else (0, 1)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]  # libnccl.so.2, libcudart; vgpu-run puts vgpu's first
    work = scratch_dir(prefix="vgpu-p2p-")
    program = [env["P2P_PROGRAM"], mode, str(BYTES >> 20)] + (["late-receiver"] if late else [])
    timeline = os.path.join(work, "timeline.json")
    timelines = [timeline]
    run_args = ["--timeline", timeline]
    stages = 4 if mode.startswith("chain") else 2
    if mode in ("procs", "chain-procs"):
        env["NCCL_ID_FILE"] = os.path.join(work, "nccl_id")
        timelines = [os.path.join(work, f"timeline.{p}.json") for p in range(stages)]
        run_args = []
        program = [sys.executable, env["LAUNCHER"], "--nproc-per-node", str(stages), "--timeout", str(TIMEOUT_S - 20),
                   "--", "sh", "-c", f'VGPU_TIMELINE={work}/timeline.$RANK.json exec "$0" "$@"'] + program
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", *run_args, "--"] + program
    ran = run_checked(cmd, env, TIMEOUT_S)
    if ran is None:
        return 1
    out, check = ran
    oks = re.findall(r"^ok   pipeline$", out, re.M)
    check(len(oks) == (stages if "procs" in mode else 1), f"every process ended its pipeline: {len(oks)}")
    if check.failures:
        print(out[-4000:])
        return 1
    if mode == "crossed":
        return check_crossed(check, timeline)
    events = []
    for path in timelines:
        with open(path) as f:
            data = json.load(f)
        events += data["traceEvents"] if isinstance(data, dict) else data
    if mode == "chain-group":
        return check_chain_group(check, env, events, out, stages)
    if mode.startswith("chain"):
        return check_chain(check, env, events, out, stages)
    kernels = [e for e in events if e.get("ph") == "X"]
    busy_end = max((e["ts"] + e["dur"] for e in kernels if e["pid"] == busy_gpu and "busy" in e.get("name", "")),
                   default=None)
    sends = [e for e in kernels if e["pid"] == 0 and f"[Send {BYTES} B" in e.get("name", "")]
    recvs = [e for e in kernels if e["pid"] == 1 and f"[Recv {BYTES} B" in e.get("name", "")]
    check(busy_end is not None and len(sends) == 1 and len(recvs) == 1,
          f"GPU {busy_gpu}'s computation, one send kernel on GPU 0 and one receive kernel on GPU 1: "
          f"{busy_end}, {len(sends)}, {len(recvs)}")
    if check.failures:
        return 1
    model = estimate(env, BYTES, 0, 1)
    send, recv = sends[0], recvs[0]
    eps = 1e-3  # us
    print(f"     GPU {busy_gpu}'s computation ends at {busy_end:.3f} us; send {send['ts']:.3f} + {send['dur']:.3f} us, "
          f"receive {recv['ts']:.3f} + {recv['dur']:.3f} us; the model's transfer {model:.3f} us")
    check(abs(send["dur"] - model) < eps and abs(recv["dur"] - model) < eps,
          f"the send and the receive last the model's {model:.3f} us: {send['dur']:.3f}, {recv['dur']:.3f}")
    check(recv["ts"] >= busy_end - eps,
          f"the receive starts after GPU {busy_gpu}'s computation: {recv['ts']:.3f} >= {busy_end:.3f} us")
    check(recv["ts"] + recv["dur"] >= busy_end + model - eps,
          f"the receive ends no earlier than the computation plus the transfer: "
          f"{recv['ts'] + recv['dur']:.3f} >= {busy_end + model:.3f} us")
    check(send["ts"] + send["dur"] >= recv["ts"] - eps,
          f"the send does not end before the receive starts: {send['ts'] + send['dur']:.3f} >= {recv['ts']:.3f} us")
    if late:
        check(send["ts"] >= busy_end - eps,
              f"the {BYTES} B send waits for its receiver's arrival: starts {send['ts']:.3f} >= {busy_end:.3f} us")
    busy_ms = re.findall(rf"^rank {busy_gpu} busy ([0-9.]+) ms$", out, re.M)
    p2p_ms = re.findall(rf"^rank {other_gpu} p2p ([0-9.]+) ms$", out, re.M)
    check(len(busy_ms) == 1 and len(p2p_ms) == 1, f"the program timed both stages: {busy_ms}, {p2p_ms}")
    if busy_ms and p2p_ms:
        # The other stage recorded its event near the job's start: its send/receive's own timing
        # spans the computing stage's computation (less what its setup took before) and the transfer.
        check(float(p2p_ms[0]) * 1e3 >= model - eps and float(p2p_ms[0]) * 1e3 >= 0.5 * float(busy_ms[0]) * 1e3,
              f"GPU {other_gpu}'s CUDA events time its {'send' if late else 'receive'} at "
              f"{float(p2p_ms[0]) * 1e3:.3f} us: the transfer ({model:.3f} us) and most of GPU {busy_gpu}'s "
              f"computation ({float(busy_ms[0]) * 1e3:.3f} us)")
    return check.verdict(out)


if __name__ == "__main__":
    sys.exit(main())
