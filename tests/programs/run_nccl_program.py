"""Runs tests/programs/nccl_program (NCCL from the toolkit, one process driving every rank, or
PROCS processes each driving RANKS ranks) through vgpu-run on the sim backend, as a user would,
and checks that it ends and what it reports.

Usage: run_nccl_program.py RANKS [PROCS]   (environment: VGPU_RUN, NCCL_PROGRAM,
COLLECTIVE_ESTIMATE, CUDA_LIB_DIR; VGPU_NODES for ranks on several virtual nodes; LAUNCHER,
tests/programs/launch_ranks.py, when PROCS is given: it starts the processes as torchrun does,
and they share their ncclUniqueId through a file)

Checks:
- the job ends within the timeout with status 0 and destroys its communicators (it used to hang
  in ncclCommDestroy: NCCL's network proxy waited for kernels the sim backend never runs);
- NCCL used its P2P transport, not the network (the plugin's transport needs running kernels);
- on the simulated timeline (--timeline), every rank's all-reduce kernel lasts what the collective
  model says (collective_estimate, the model on the same cluster), the last rank to arrive starts
  its kernel when every rank has arrived (from the second collective on, every rank's kernel
  does: one thread launched them all), and every rank's stream goes on only after the
  collective's end;
- the program's own CUDA-event timing of each all-reduce is never shorter than the model's (in
  every process);
- the ring of sends and receives (each rank's kernel sends 4000 B to the next rank and receives
  as much from the one before) lasts the model's send/recv time on every rank, not the fallback
  duration of an unknown kernel (its group's calls describe it at the launch);
- an all-reduce of 2 MiB captured into a CUDA graph on every rank and replayed three times: each
  replay's kernel lasts the model's time on every GPU (NCCL ties the captured plan to the graph
  with a user object, which the sim backend keeps);
- with four ranks or more: two-rank communicators {g, g + ranks/2} (split off the world) exchange
  3 MiB both ways twice; the second exchange's kernels last the model's send/recv time between
  the pair's own GPUs (on two nodes, across the NICs), which the job's roster tells each rank
  once its partner has launched (the first exchange may not know it yet);
- a ring of 20,000-byte sends and receives over the whole communicator, twice: the second ring's
  kernel on every GPU lasts the model's send/recv between its GPU and the slower of its two
  neighbours' (learnt from the first ring's tasks: across the NICs where a neighbour is on
  another node);
- the data moved (issue 23): after the timed all-reduces, every process checks the values an
  all-reduce, all-gather, broadcast, reduce-scatter and a ring of send/recv of small buffers
  leave in every rank's recv buffer ("ok   values after <Collective>");
- NCCL's host cost model (issue 18, [collectives.host]): in every process the thread that calls
  NCCL was charged at least the modeled cost of those five groups (VGPU_CLOCK_REPORT's nccl_s:
  each group costs `group` plus `communicator` per rank the thread drives); without the model
  it is 0.
With several processes the collectives meet across processes (vgpud's rendezvous table), so the
timeline checks hold for the ranks of every process together.
"""
import json
import os
import re
import subprocess
import sys
import tomllib

from job_check import run_checked, scratch_dir

TIMEOUT_S = 180
GRAPH_BYTES = 2 << 20  # nccl_program.cu's graph-captured all-reduce
PAIR_BYTES = 3 << 20  # and its pairs' exchanges, each way
RING_BYTES = 4000  # its values' ring of sends and receives (1000 floats)
WORLD_RING_BYTES = 20000  # and the ring it sends twice
DEFAULT_CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "simcore", "cluster",
                               "default_cluster.toml")


def default_host_costs_us(*keys):
    """NCCL's host cost model's figures in the embedded cluster configuration, microseconds."""
    with open(DEFAULT_CLUSTER, "rb") as f:
        host = tomllib.load(f)["collectives"]["host"]
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}
    out = []
    for k in keys:
        m = re.fullmatch(r"([\d.]+)\s*(ns|us|ms)", host[k])
        out.append(float(m.group(1)) * scale[m.group(2)])
    return out


def main():
    per_proc = int(sys.argv[1])
    procs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    ranks = per_proc * procs
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = env["CUDA_LIB_DIR"]  # libnccl.so.2, libcudart; vgpu-run puts vgpu's first
    env["NCCL_DEBUG"] = "INFO"
    work = scratch_dir(prefix="vgpu-nccl-")
    timeline = os.path.join(work, "timeline.json")
    program = [env["NCCL_PROGRAM"], str(per_proc), "1", "1", "256"]
    timelines = [timeline]
    run_args = ["--timeline", timeline]
    if procs > 1:
        # The sim backend writes one timeline per process (it does not merge a job's parts):
        # each process names its own, and their events are read together (the trace processes
        # are global GPU numbers, the times those of the job's one virtual clock).
        env["NCCL_ID_FILE"] = os.path.join(work, "nccl_id")
        timelines = [os.path.join(work, f"timeline.{p}.json") for p in range(procs)]
        run_args = []
        program = [sys.executable, env["LAUNCHER"], "--nproc-per-node", str(procs), "--timeout",
                   str(TIMEOUT_S - 20), "--", "sh", "-c",
                   f'VGPU_TIMELINE={work}/timeline.$RANK.json exec "$0" "$@"'] + program
    clock_report = os.path.join(work, "clock_report.jsonl")
    env["VGPU_CLOCK_REPORT"] = clock_report
    cmd = [env["VGPU_RUN"], "--backend", "sim", "--no-summary", *run_args, "--"] + program
    ran = run_checked(cmd, env, TIMEOUT_S)
    if ran is None:
        return 1
    out, check = ran
    destroyed = re.findall(rf"^(?:proc \d+ )?ok   ncclCommDestroy of {per_proc} communicators$", out, re.M)
    check(len(destroyed) == procs, f"ncclCommDestroy returned in {len(destroyed)} of {procs} process(es)")
    check(("via P2P" in out or "via SHM" in out) and "via NET" not in out,
          "ranks connect through P2P (or SHM across virtual nodes), none through the network")
    by_proc = {}
    for p, b, ms in re.findall(r"^(?:proc (\d+) )?allreduce (\d+) B ([0-9.]+) ms", out, re.M):
        by_proc.setdefault(int(p or 0), []).append((int(b), float(ms)))
    check(sorted(by_proc) == list(range(procs)) and all(len(t) == 3 for t in by_proc.values()),
          f"three all-reduces timed in every process: {by_proc}")
    for coll in ("AllReduce", "AllGather", "Broadcast", "ReduceScatter", "SendRecv"):
        good = re.findall(rf"^(?:proc \d+ )?ok   values after {coll}$", out, re.M)
        check(len(good) == procs, f"{coll} left the right values in {len(good)} of {procs} process(es)")
    for line in re.findall(r"^(?:proc \d+ )?FAIL values.*$", out, re.M):
        print("  " + line)
    group_us, communicator_us = default_host_costs_us("group", "communicator")
    nccl_s = {}
    try:
        with open(clock_report) as f:
            for line in f:
                t = json.loads(line)
                nccl_s[t["pid"]] = max(nccl_s.get(t["pid"], 0.0), t.get("nccl_s", 0.0))
    except (OSError, ValueError) as e:
        check(False, f"clock report written: {e}")
    least = 5 * (group_us + per_proc * communicator_us)
    check(len(nccl_s) == procs and all(v * 1e6 >= least - 1e-3 for v in nccl_s.values()),
          f"NCCL's groups charged their modeled host cost in every process: nccl_s "
          f"{sorted(round(v * 1e6, 3) for v in nccl_s.values())} us, at least {least:.1f} expected")
    if check.failures:
        print(out[-4000:])
        return 1
    times = by_proc[0]

    def second_of_two_off(kernels, want_us):
        """GPU -> (its kernels' durations, the model's) where a GPU has not exactly two such kernels
        or the second does not last want_us(GPU); {} when every GPU's does."""
        wrong = {}
        for g in range(ranks):
            runs = sorted(kernels.get(g, []))
            want = want_us(g)
            if len(runs) != 2 or abs(runs[-1][1] - want) >= 1e-3:
                wrong[g] = ([round(d, 3) for _, d in runs], round(want, 3))
        return wrong

    def expected_us(func, nbytes, gpus=None):
        gpus = range(ranks) if gpus is None else gpus
        out = subprocess.run([env["COLLECTIVE_ESTIMATE"], func, str(nbytes), *map(str, gpus)],
                             capture_output=True, text=True, check=True).stdout
        return float(out)

    for p, proc_times in sorted(by_proc.items()):
        for nbytes, ms in proc_times[1:]:  # the first includes NCCL's connection setup on the host
            want = expected_us("AllReduce", nbytes)
            check(ms * 1e3 >= want - 1e-3, f"process {p}: all-reduce of {nbytes} B: {ms * 1e3:.3f} us by CUDA "
                  f"events, the model says {want:.3f} us")
    events = []
    for path in timelines:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            check(False, f"timeline written: {e}")
            return 1
        events += data["traceEvents"] if isinstance(data, dict) else data
    per_gpu = {}
    p2p = {}  # GPU -> durations of its send/recv kernels
    replays = {}  # GPU -> durations of its graph's all-reduce kernels
    pairs = {}  # GPU -> (start, duration) of its pair exchanges' kernels
    world_ring = {}  # GPU -> (start, duration) of its world ring's kernels
    for e in events:
        name = e.get("name", "")
        if e.get("ph") == "X" and ("nccl" in name.lower()):
            per_gpu.setdefault(e["pid"], []).append(e)
        if e.get("ph") == "X" and f"[Send {RING_BYTES} B" in name:
            p2p.setdefault(e["pid"], []).append(e["dur"])
        if e.get("ph") == "X" and f"[Send {WORLD_RING_BYTES} B" in name:
            world_ring.setdefault(e["pid"], []).append((e["ts"], e["dur"]))
        if e.get("ph") == "X" and f"[Send {PAIR_BYTES} B" in name:
            pairs.setdefault(e["pid"], []).append((e["ts"], e["dur"]))
        if e.get("ph") == "X" and f"[AllReduce {GRAPH_BYTES} B]" in name:
            replays.setdefault(e["pid"], []).append(e["dur"])
    # The values' ring (check_values in nccl_program.cu): 1000 floats each way; the model's
    # send/recv to the rank's slower neighbour, which its tasks name (on a communicator of more
    # than two ranks the kernel is held until they come: vgpu/sim/exec/nccl_p2p.h).
    def ring_us(g):
        return max(expected_us("Send", RING_BYTES, sorted([g, (g + d) % ranks])) for d in (1, ranks - 1))
    want_p2p = {g: ring_us(g) for g in range(ranks)}
    check(sorted(p2p) == list(range(ranks)) and
          all(abs(d - want_p2p[g]) < 1e-3 for g, durs in p2p.items() for d in durs),
          f"the send/recv ring's kernels last the model's time to each GPU's slower neighbour "
          f"({sorted(set(round(t, 3) for t in want_p2p.values()))} us): "
          f"{ {g: sorted(set(round(d, 3) for d in durs)) for g, durs in sorted(p2p.items())} }")
    graphs = re.findall(rf"^(?:proc \d+ )?ok   a graph of AllReduce {GRAPH_BYTES} B replayed 3 times$", out, re.M)
    check(len(graphs) == procs, f"the CUDA graph of an all-reduce replayed in {len(graphs)} of {procs} process(es)")
    if ranks >= 4:
        said = re.findall(rf"^(?:proc \d+ )?ok   pairs exchanged {PAIR_BYTES} B twice$", out, re.M)
        check(len(said) == procs, f"the pairs exchanged in {len(said)} of {procs} process(es)")
        half = ranks // 2
        wrong = second_of_two_off(pairs, lambda g: expected_us("Send", PAIR_BYTES, sorted([g, (g + half) % ranks])))
        check(not wrong, f"every pair's second exchange lasts the model's send/recv between its GPUs: "
              f"{wrong or 'yes'} (GPU: kernels, model)")
    said = re.findall(rf"^(?:proc \d+ )?ok   a ring of {WORLD_RING_BYTES} B sent twice$", out, re.M)
    check(len(said) == procs, f"the world ring sent twice in {len(said)} of {procs} process(es)")
    wrong = second_of_two_off(world_ring, lambda g: max(
        expected_us("Send", WORLD_RING_BYTES, sorted([g, (g + d) % ranks])) for d in (1, ranks - 1)))
    check(not wrong, f"the world ring's second kernel on every GPU lasts the model's send/recv to its slower "
          f"neighbour: {wrong or 'yes'} (GPU: kernels, model)")
    want_graph = expected_us("AllReduce", GRAPH_BYTES)
    check(sorted(replays) == list(range(ranks)) and all(len(v) == 3 for v in replays.values()) and
          all(abs(d - want_graph) < 1e-3 for durs in replays.values() for d in durs),
          f"the graph's all-reduce kernels: three replays lasting the model's {want_graph:.3f} us on every GPU: "
          f"{ {g: [round(d, 3) for d in durs] for g, durs in sorted(replays.items())} }")
    check(sorted(per_gpu) == list(range(ranks)), f"NCCL work on GPUs {sorted(per_gpu)}")
    seqs = {}
    for gpu, evs in per_gpu.items():
        evs.sort(key=lambda e: e["ts"])
        seq = []  # (arrival, kernel, end) per collective, in order
        for e in evs:
            if e["name"] == "nccl arrival":
                seq.append({"arrival": e})
            elif e["name"] == "nccl collective end":
                if seq:
                    seq[-1]["end"] = e
            elif "[AllReduce " in e["name"] and seq:
                seq[-1]["kernel"] = e
        seqs[gpu] = seq[:3]  # the timed all-reduces; the values' collectives follow
    counts = {len(v) for v in seqs.values()}
    check(counts == {3}, f"three timed collectives on every GPU: {counts}")
    if counts != {3}:
        return 1
    eps = 1e-3  # us
    for k, (nbytes, _) in enumerate(times):
        parts = [seqs[g][k] for g in range(ranks)]
        # A process of one GPU (ranks as processes) starts its kernel at the job's last arrival
        # and needs no "collective end" op: every rank's kernel ends with the collective.
        one_gpu = per_proc == 1
        if not all("kernel" in p and ("end" in p or one_gpu) for p in parts):
            check(False, f"collective {k}: a kernel and an end on every GPU")
            continue
        want = expected_us("AllReduce", nbytes)
        durs = [p["kernel"]["dur"] for p in parts]
        check(all(abs(d - want) < eps for d in durs),
              f"collective {k} ({nbytes} B): kernels last {min(durs):.3f}-{max(durs):.3f} us, model {want:.3f} us")
        last_arrival = max(p["arrival"]["ts"] for p in parts)
        latest_start = max(p["kernel"]["ts"] for p in parts)
        check(abs(latest_start - last_arrival) < eps,
              f"collective {k}: the last rank's kernel starts when the last rank arrives ({last_arrival:.3f} us)")
        if k >= 1 or one_gpu:  # one thread launched every rank (or each waited): all start together
            starts = [p["kernel"]["ts"] for p in parts]
            check(all(abs(t - last_arrival) < eps for t in starts),
                  f"collective {k}: every rank's kernel starts then ({min(starts):.3f}-{max(starts):.3f} us)")
        end = max(p["kernel"]["ts"] + p["kernel"]["dur"] for p in parts)
        ends = [p["end"]["ts"] if "end" in p else p["kernel"]["ts"] + p["kernel"]["dur"] for p in parts]
        check(all(abs(t - end) < eps for t in ends) and abs(end - (last_arrival + want)) < eps,
              f"collective {k}: every rank goes on at the collective's end, {end:.3f} us")
    return check.verdict(out)


if __name__ == "__main__":
    sys.exit(main())
