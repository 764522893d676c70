"""Runs tests/programs/nccl_graph_links_program (NCCL from the toolkit, one process driving the four
GPUs of two virtual nodes of two) through vgpu-run on the sim backend, and checks from the timeline
that collectives captured into CUDA graphs share the fabric's links on every replay as directly
launched ones do (issue 23; vgpu/sim/exec/nccl_graph_replay.cpp).

Usage: run_nccl_graph_links.py [procs]   (environment: VGPU_RUN, GRAPH_LINKS_PROGRAM, COLLECTIVE_ESTIMATE,
CUDA_LIB_DIR; VGPU_NODES=2 and VGPU_GPUS_PER_NODE=2, or 1 with procs; LAUNCHER with procs)

procs: the ranks are two processes (launch_ranks.py, as torchrun), each driving one GPU of its own
virtual node (GPUs 0 and 1) and holding a rank of A and of B; each process's replays place its own
rank's transfers and the one into its GPU (the other rank is another process's); no p2p steps.

A collective's time: from the latest start of its ranks' all-reduce kernels (every rank's starts at
the program's gate) to the latest end of its ranks (the "nccl collective end" right after a kernel
on its stream's row; none: the kernel's end). With T the model's time of an all-reduce of BYTES
over GPUs 0 and 2 (collective_estimate):
- direct alone and graph alone: A lasts T exactly (to 1 ns);
- graph shared: A's and B's replays, over the same two NICs at once, each last what the same
  all-reduces launched directly at once last (direct shared: about T + B, their transfers at half
  of each NIC's rate), to 1 ns; and longer than T (by more than half of B);
- graph p2p: A's send from GPU 0 to GPU 2 and B's all-reduce, replayed at once, last what they
  last launched directly at once (direct p2p), to 1 ns: the receive (its kernel's start to the
  "nccl p2p end" after it) longer than the model's send/recv time T_P, B longer than T.
"""
import json
import os
import re
import subprocess
import sys

from job_check import run_checked, scratch_dir

TIMEOUT_S = 180
MIB = 256
BYTES = MIB << 20
# Each communicator's all-reduces of BYTES, in the program's order.
STEPS = {"A": ["direct alone", "direct shared", "graph alone", "graph shared"],
         "B": ["direct shared", "graph shared", "direct p2p", "graph p2p"]}


def main():
    procs = len(sys.argv) > 1 and sys.argv[1] == "procs"
    wide = len(sys.argv) > 1 and sys.argv[1] == "wide"
    update = len(sys.argv) > 1 and sys.argv[1] == "update"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]
    work = scratch_dir(prefix="vgpu-nccl-graph-links-")
    timelines = [os.path.join(work, "timeline.json")]
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--timeline", timelines[0], "--",
           env["GRAPH_LINKS_PROGRAM"], str(MIB)] + (["wide"] if wide else ["update"] if update else [])
    gpus = [0, 2]
    steps = STEPS
    if procs:
        # One timeline per process, read together.
        env["NCCL_ID_FILE"] = os.path.join(work, "nccl_id")
        timelines = [os.path.join(work, f"timeline.{p}.json") for p in range(2)]
        cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", "--", sys.executable, env["LAUNCHER"],
               "--nproc-per-node", "2", "--timeout", str(TIMEOUT_S - 20), "--", "sh", "-c",
               f'VGPU_TIMELINE={work}/timeline.$RANK.json exec "$0" "$@"', env["GRAPH_LINKS_PROGRAM"], str(MIB)]
        gpus = [0, 1]
        steps = {"A": STEPS["A"], "B": ["direct shared", "graph shared"]}
    ran = run_checked(cmd, env, TIMEOUT_S)
    if ran is None:
        return 1
    out, check = ran
    for step in [s for s in ("direct alone", "direct shared", "graph alone", "graph shared", "direct p2p",
                             "graph p2p", "graph p2p alone", "ncclCommDestroy")
                 if (not procs or "p2p" not in s) and (wide or s != "graph p2p alone")]:
        found = len(re.findall(rf"^(?:proc \d+ )?ok   {step}$", out, re.M))
        check(found == (2 if procs else 1), f"the program reached '{step}' in {found} process(es)")
    if check.failures:
        return check.verdict(out)

    def estimate(*args):
        r = subprocess.run([env["COLLECTIVE_ESTIMATE"], *args], capture_output=True, text=True, check=True)
        return float(r.stdout)

    pair = [str(g) for g in gpus]
    t_us = estimate("AllReduce", str(BYTES), *pair)
    b_us = estimate("--bandwidth", "AllReduce", str(BYTES), *pair)
    print(f"     the model: all-reduce of {BYTES} B over GPUs {pair[0]} and {pair[1]}: {t_us:.3f} us, "
          f"of which bandwidth {b_us:.3f} us")

    events = []
    for path in timelines:
        with open(path) as f:
            data = json.load(f)
        events += [e for e in (data["traceEvents"] if isinstance(data, dict) else data) if e.get("ph") == "X"]
    # Per (GPU, stream row): its all-reduce kernels of BYTES, each (start, end) with the end op
    # that follows it on the row.
    rows = {}
    for e in events:
        if f"[AllReduce {BYTES} B]" in e.get("name", "") or e.get("name") == "nccl collective end":
            rows.setdefault((e["pid"], e["tid"]), []).append(e)
    spans = {}
    for key, evs in rows.items():
        evs.sort(key=lambda e: (e["ts"], e["name"] == "nccl collective end"))
        seq = []
        for i, e in enumerate(evs):
            if e["name"] == "nccl collective end":
                continue
            end = e["ts"] + e["dur"]
            if i + 1 < len(evs) and evs[i + 1]["name"] == "nccl collective end":
                end = max(end, evs[i + 1]["ts"])
            seq.append((e["ts"], end))
        if seq:
            spans[key] = seq
    # A's rows (GPUs 0 and 2) and B's hold four all-reduces of BYTES each: told apart by the steps
    # (B's first is A's second, both at the same gate).
    comm_rows = {"A": [], "B": []}
    for gpu in gpus:
        # A's first all-reduce of BYTES (direct alone) comes before B's first.
        mine = sorted((k for k in spans if k[0] == gpu), key=lambda k: spans[k][0][0])
        if len(mine) == 2:
            comm_rows["A"].append(mine[0])
            comm_rows["B"].append(mine[1])
    for c, keys in comm_rows.items():
        counts = [len(spans[k]) for k in keys]
        check(sorted(k[0] for k in keys) == gpus and counts == [len(steps[c])] * 2,
              f"communicator {c}: rows on GPUs {[k[0] for k in keys]} with {counts} all-reduces of {BYTES} B, "
              f"GPUs {gpus} with {len(steps[c])} each expected")
    if check.failures:
        return check.verdict(out)

    def span_us(comm, step):
        k = steps[comm].index(step)
        parts = [spans[row][k] for row in comm_rows[comm]]
        return max(p[1] for p in parts) - max(p[0] for p in parts)

    times = {(c, s): span_us(c, s) for c, names in steps.items() for s in names}
    for (c, s), t in times.items():
        print(f"     {s}: {c} {t:.3f} us")
    for step in ("direct alone", "graph alone"):
        check(abs(times["A", step] - t_us) < 1e-3, f"{step}: A lasts {times['A', step]:.3f} us, the model's {t_us:.3f} us")
    for c in ("A", "B"):
        direct, graph = times[c, "direct shared"], times[c, "graph shared"]
        check(abs(graph - direct) < 1e-3, f"shared: {c}'s replay lasts {graph:.3f} us, as directly launched "
              f"({direct:.3f} us)")
        check(graph > t_us + b_us / 2, f"shared: {c}'s replay lasts {graph:.3f} us, past T + B/2 = "
              f"{t_us + b_us / 2:.3f} us (its transfers shared the NICs)")
    if procs:
        return check.verdict(out)

    # The receives of BYTES on GPU 2 (direct, then replayed; with wide, then replayed alone), each to
    # the p2p end op after it (on any of GPU 2's rows: wide's receiver has a stream of its own).
    tp_us = estimate("SendRecv", str(BYTES), "0", "2")
    receives = []
    for key in {(e["pid"], e["tid"]) for e in events if e["pid"] == 2}:
        evs = sorted((e for e in events if (e["pid"], e["tid"]) == key and
                      (f"[Recv {BYTES} B" in e["name"] or e["name"] == "nccl p2p end")), key=lambda e: e["ts"])
        for i, e in enumerate(evs):
            if f"[Recv {BYTES} B" in e["name"]:
                after = evs[i + 1] if i + 1 < len(evs) else None
                end = after["ts"] if after is not None and after["name"] == "nccl p2p end" else e["ts"] + e["dur"]
                receives.append((e["ts"], end - e["ts"]))
    receives.sort()
    expected = 3 if wide else 2
    check(len(receives) == expected, f"{expected} receives of {BYTES} B on GPU 2: {len(receives)}")
    if wide and len(receives) == 3:
        alone = receives[2][1]
        print(f"     p2p: the receive replayed alone lasts {alone:.3f} us")
        check(abs(alone - tp_us) < 1e-3, f"p2p: the receive replayed alone lasts {alone:.3f} us, the model's "
              f"send/recv {tp_us:.3f} us")
    if len(receives) == expected:
        direct, graph = receives[0][1], receives[1][1]
        print(f"     p2p: the receive lasts {direct:.3f} us directly, {graph:.3f} us replayed; T_P {tp_us:.3f} us")
        check(abs(graph - direct) < 1e-3 and direct > tp_us + 1e-3,
              f"p2p: the replayed receive lasts {graph:.3f} us, as directly launched ({direct:.3f} us), past the "
              f"model's send/recv {tp_us:.3f} us (its transfer shared the NICs with B's)")
    direct, graph = times["B", "direct p2p"], times["B", "graph p2p"]
    check(abs(graph - direct) < 1e-3 and direct > t_us + 1e-3,
          f"p2p: B's replay beside the message lasts {graph:.3f} us, as directly launched ({direct:.3f} us), past T")
    return check.verdict(out)


if __name__ == "__main__":
    sys.exit(main())
