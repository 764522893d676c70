"""Runs tests/programs/nccl_links_program (NCCL from the toolkit, one process driving the four GPUs of
two virtual nodes of two) through vgpu-run on the sim backend, and checks from the timeline that
collectives share the fabric's links (issue 23; vgpu/sim/exec/nccl_link_share.h).

Usage: run_nccl_links.py [procs]   (environment: VGPU_RUN, LINKS_PROGRAM, COLLECTIVE_ESTIMATE,
CUDA_LIB_DIR; VGPU_NODES=2 and VGPU_GPUS_PER_NODE=2, or 1 with procs; LAUNCHER with procs)

procs: the ranks are two processes (launch_ranks.py, as torchrun), each driving one GPU of its own
virtual node and holding a rank of A and of B, each process placing its own rank's transfers (to
the next rank and from the previous one): A alone lasts T exactly, A and B at once each about
T + B (within 2%); T and B over GPUs 0 and 1; and the p2p step below from GPU 0 to GPU 1 (the
receiving process sees the message meet B's transfer into its GPU).
one-nic: as without procs, on nodes whose two GPUs share one NIC (VGPU_CONFIG =
data/one_nic_per_node.toml): A and C at once then cross the same NICs too, and each lasts about
T + B (within 2%), as A and B do: what eight data-parallel groups of a node sharing its NIC read.
Without procs, one process drives the four GPUs of two nodes of two:
- p2p: a message of BYTES on A from GPU 0 to GPU 2 (T_P, B_P the model's send/recv time and
  bandwidth part between them): alone its receive lasts T_P exactly (kernel to "nccl p2p end");
  beside B's all-reduce (one group), whose transfer 0 -> 2 crosses the same NICs, both lose the
  time their transfers share the NICs at half rate: min(B, B_P) less the difference d of their
  latency parts (T_P - B_P against T - B: the later transfer starts d after the other), so the
  receive lasts about T_P + min(B, B_P) - d and B about T + min(B, B_P) - d (within 2%);

A collective's time is from the last of its ranks' arrivals to the latest "nccl collective end"
of its ranks (where every rank's stream goes on). With T the model's time of an all-reduce of
BYTES over GPUs 0 and 2 and B its bandwidth part (collective_estimate [--bandwidth]):
- alone: A lasts T exactly (to 1 ns);
- shared: A and B, over the same two NICs at once, each last about T + B (their transfers get half
  of each NIC), within 2%;
- disjoint: A (GPUs 0, 2) and C (GPUs 1, 3) at once: each lasts T exactly;
- copy: D (GPUs 0 and 1, NVLink; T_D and B_D its model's time and bandwidth part) beside a copy
  of 4 x BYTES from GPU 0 to GPU 1 (c its time alone, about 4 B_D): the copy and D's transfer
  0 -> 1 share GPU 0's NVLink to the switch and GPU 1's from it, half each while both run, and
  the copy outlasts D's transfer: D lasts about T_D + B_D (its transfer at half rate all along)
  and the copy about c + B_D, each within 2% of B_D (the copy's flow on the timeline).
"""
import os
import re
import subprocess
import sys

from job_check import nccl_sequences, run_checked, scratch_dir

TIMEOUT_S = 180
MIB = 256
BYTES = MIB << 20


def main():
    procs = len(sys.argv) > 1 and sys.argv[1] == "procs"
    one_nic = len(sys.argv) > 1 and sys.argv[1] == "one-nic"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]
    work = scratch_dir(prefix="vgpu-nccl-links-")
    timelines = [os.path.join(work, "timeline.json")]
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--timeline", timelines[0], "--",
           env["LINKS_PROGRAM"], str(MIB)]
    if procs:
        # One timeline per process (the sim backend does not merge a job's parts), read together.
        env["NCCL_ID_FILE"] = os.path.join(work, "nccl_id")
        timelines = [os.path.join(work, f"timeline.{p}.json") for p in range(2)]
        cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--", sys.executable, env["LAUNCHER"],
               "--nproc-per-node", "2", "--timeout", str(TIMEOUT_S - 20), "--", "sh", "-c",
               f'VGPU_TIMELINE={work}/timeline.$RANK.json exec "$0" "$@"', env["LINKS_PROGRAM"], str(MIB)]
    ran = run_checked(cmd, env, TIMEOUT_S)
    if ran is None:
        return 1
    out, check = ran
    ended = len(re.findall(r"^(?:proc \d+ )?ok   ncclCommDestroy$", out, re.M))
    check(ended == (2 if procs else 1), f"the program ran to the end in {ended} process(es)")
    if check.failures:
        print(out[-4000:])
        return 1

    def estimate(*args):
        r = subprocess.run([env["COLLECTIVE_ESTIMATE"], *args], capture_output=True, text=True, check=True)
        return float(r.stdout)

    pair = ["0", "1"] if procs else ["0", "2"]
    t_us = estimate("AllReduce", str(BYTES), *pair)
    b_us = estimate("--bandwidth", "AllReduce", str(BYTES), *pair)
    td_us = estimate("AllReduce", str(BYTES), "0", "1")
    bd_us = estimate("--bandwidth", "AllReduce", str(BYTES), "0", "1")
    print(f"     the model: all-reduce of {BYTES} B over GPUs {pair[0]} and {pair[1]}: {t_us:.3f} us, "
          f"of which bandwidth {b_us:.3f} us" + ("" if procs else f"; over GPUs 0 and 1 (D): {td_us:.3f} us, "
                                                 f"bandwidth {bd_us:.3f} us"))

    # Per (GPU, stream row): its NCCL collectives in order, each an arrival, a kernel, an end.
    seqs, events = nccl_sequences(timelines)
    # Which communicator a row is, in the order of their first collectives (A, B, C, D): GPU 0
    # holds A's, B's and D's rows, GPU 1 C's and D's, GPU 2 A's and B's, GPU 3 C's.
    # With procs, each GPU holds A's row and B's.
    comm_rows = {"A": [], "B": []} if procs else {"A": [], "B": [], "C": [], "D": []}
    layout = [["A", "B"], ["A", "B"]] if procs else [["A", "B", "D"], ["C", "D"], ["A", "B"], ["C"]]
    for gpu, names in enumerate(layout):
        mine = sorted((k for k in seqs if k[0] == gpu), key=lambda k: seqs[k][0]["arrival"]["ts"])
        check(len(mine) == len(names), f"GPU {gpu}: {len(mine)} rows of NCCL collectives, {len(names)} expected")
        for name, key in zip(names, mine):
            comm_rows[name].append(key)
    if check.failures:
        return 1
    # Each communicator's collectives in the program's order (the first: its connection setup).
    steps = {"A": ["setup", "alone", "shared", "disjoint"], "B": ["setup", "shared"],
             "C": ["setup", "disjoint"], "D": ["setup", "copy"]}
    if procs:
        steps = {"A": ["setup", "alone", "shared"], "B": ["setup", "shared"]}
    steps["B"].append("p2p")

    def span_us(comm, step):
        k = steps[comm].index(step)
        parts = [seqs[row][k] for row in comm_rows[comm]]
        if not all("kernel" in p for p in parts):
            return None
        start = max(p["arrival"]["ts"] for p in parts)
        # A process of one GPU whose collective placed no transfers has no end op: its kernel's.
        return max(p["end"]["ts"] if "end" in p else p["kernel"]["ts"] + p["kernel"]["dur"] for p in parts) - start

    for comm, names in steps.items():
        counts = [len(seqs[row]) for row in comm_rows[comm]]
        check(all(c == len(names) for c in counts), f"communicator {comm}: {counts} collectives per rank, "
              f"{len(names)} expected")
    if check.failures:
        return 1

    def us(t):
        return "none" if t is None else f"{t:.3f}"

    def close(got, want, rel):
        return got is not None and abs(got - want) <= rel * want

    alone = span_us("A", "alone")
    check(alone is not None and abs(alone - t_us) < 1e-3,
          f"alone: A lasts {us(alone)} us, the model's {t_us:.3f} us")
    shared = [span_us(c, "shared") for c in ("A", "B")]
    want = t_us + b_us
    check(all(close(s, want, 0.02) for s in shared),
          f"shared: A and B last {us(shared[0])} and {us(shared[1])} us, about T + B = {want:.3f} us")
    if procs:
        check_p2p(check, events, estimate, span_us, close, us, t_us, b_us, receiver=1)
        return check.verdict(out)
    disjoint = [span_us(c, "disjoint") for c in ("A", "C")]
    if one_nic:
        check(all(close(s, want, 0.02) for s in disjoint),
              f"one NIC a node: A and C (GPUs 0, 2 and 1, 3) last {us(disjoint[0])} and {us(disjoint[1])} us, "
              f"about T + B = {want:.3f} us")
    else:
        check(all(s is not None and abs(s - t_us) < 1e-3 for s in disjoint),
              f"disjoint: A and C last {us(disjoint[0])} and {us(disjoint[1])} us, the model's {t_us:.3f} us")
    # The copies' own flows on the timeline (the program's events around them would add the host
    # time between the event record and the copy's issue, which moves with the machine's load).
    flows = sorted((e for e in events if e.get("ph") == "X" and e.get("name") == f"memcpy PtoP {4 * BYTES} B"),
                   key=lambda e: e["ts"])
    copies = {"copy alone": flows[0]["dur"], "copy beside D": flows[1]["dur"]} if len(flows) == 2 else {}
    check(len(copies) == 2, f"both copies on the timeline: {len(flows)} found")
    if len(copies) == 2:
        beside = span_us("D", "copy")
        if beside is None:
            check(False, "copy: D's collective found on the timeline")
            return 1
        c_alone = copies["copy alone"]
        lost_d = beside - td_us
        lost_copy = copies["copy beside D"] - c_alone
        check(abs(lost_d - bd_us) < 0.02 * bd_us and abs(lost_copy - bd_us) < 0.02 * bd_us,
              f"copy: D beside the copy lasts {beside:.3f} us (T_D {td_us:.3f} + {lost_d:.3f}), the copy "
              f"{copies['copy beside D']:.3f} us (alone {c_alone:.3f} + {lost_copy:.3f}); B_D {bd_us:.3f} us")
    check_p2p(check, events, estimate, span_us, close, us, t_us, b_us, receiver=2)
    return check.verdict(out)


def check_p2p(check, events, estimate, span_us, close, us, t_us, b_us, receiver):
    """The message from GPU 0 to GPU `receiver`: its receive kernel and the "nccl p2p end" after it
    on its row, alone and beside B's all-reduce (the p2p step)."""
    tp_us = estimate("SendRecv", str(BYTES), "0", str(receiver))
    bp_us = estimate("--bandwidth", "SendRecv", str(BYTES), "0", str(receiver))
    p2p_rows = {}
    for e in events:
        if e.get("ph") == "X" and e["pid"] == receiver and (f"[Recv {BYTES} B" in e["name"] or e["name"] == "nccl p2p end"):
            p2p_rows.setdefault(e["tid"], []).append(e)
    spans = []
    for evs in p2p_rows.values():
        evs.sort(key=lambda e: e["ts"])
        for i, e in enumerate(evs):
            if f"[Recv {BYTES} B" in e["name"]:
                # Its end op comes right after it on its stream's row (none: the kernel's end).
                after = evs[i + 1] if i + 1 < len(evs) else None
                end = after["ts"] if after is not None and after["name"] == "nccl p2p end" else e["ts"] + e["dur"]
                spans.append(end - e["ts"])
    check(len(spans) == 2, f"two receives of {BYTES} B on GPU {receiver}: {len(spans)}")
    if len(spans) == 2:
        check(abs(spans[0] - tp_us) < 1e-3, f"p2p alone: the receive lasts {spans[0]:.3f} us, the model's send/recv "
              f"{tp_us:.3f} us")
        b_beside = span_us("B", "p2p")
        lost = min(b_us, bp_us) - abs((tp_us - bp_us) - (t_us - b_us))
        check(close(spans[1], tp_us + lost, 0.02) and close(b_beside, t_us + lost, 0.02),
              f"p2p beside B: the receive lasts {spans[1]:.3f} us, about T_P + {lost:.3f} = {tp_us + lost:.3f} us; "
              f"B {us(b_beside)} us, about T + {lost:.3f} = {t_us + lost:.3f} us")


if __name__ == "__main__":
    sys.exit(main())
