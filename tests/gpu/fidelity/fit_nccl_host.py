"""Fits NCCL's host cost model ([collectives.host] of the cluster configuration,
simcore/cluster_spec.h NcclHostCosts) to nccl-tests' host-bound loops measured on a host, and
prints the TOML with each loop's error.

    python3 tests/gpu/fidelity/fit_nccl_host.py DIR        # nccl-tests logs, as call5.sh writes them
    python3 tests/gpu/fidelity/fit_nccl_host.py FILE.txt   # a table of loops (tests/data/nccl_host_*.txt)
    python3 tests/gpu/fidelity/fit_nccl_host.py A.txt B.txt C.txt   # one source a host: the median over hosts
    python3 tests/gpu/fidelity/fit_nccl_host.py --raw DIR [DIR ...] > FILE.txt   # the logs' times as a table

The loops (docs/device_calls/2026-11-27c/call5.sh): every collective at 1-64 KiB, `-n 200 -w 20
-m 1 -c 0`, one thread driving both GPUs (`-g 2`: two rank communicators a group) and two threads
with one GPU each (`-t 2 -g 1`: one), each twice. In DIR: <op>_g2_m1_<run>.log and <op>_t2_m1_<run>.log
(runs 1 and 2). Several sources are several hosts: each loop's time is its median on each host,
then the median over the hosts (the hosts lent differ by up to 1.7x in these loops, and no probe of
the CPU's speed tells which: docs/results.md, seventeenth session).
An iteration is one group on the thread, so its time is the model's

    T = group + communicator x C (all_reduce_communicator for an all-reduce) + operation x (N - C)

for C rank communicators and N calls (send/recv: a send and a receive per communicator; alltoall:
one of each per peer, 2 ranks), plus what the thread spends outside NCCL's groups (nccl-tests' loop,
NCCL's work after its last launch), which vgpu charges as measured: `--outside` (default 2.5 us,
what vgpu's sim backend measured) is taken off `group`. Grid search over the relative error.
"""
import argparse
import os
import statistics
import sys

import nccl_tests_table

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv", "alltoall")
CALLS_PER_COMMUNICATOR = {"all_reduce": 1, "all_gather": 1, "reduce_scatter": 1, "broadcast": 1, "sendrecv": 2,
                          "alltoall": 4}
COMMUNICATORS = {"g2": 2, "t2": 1}


def log_times(path):
    """Every size's out-of-place and in-place time (us) of an nccl-tests log."""
    return [t for pair in nccl_tests_table.times(path).values() for t in pair if t is not None]


def raw_from_dir(d):
    """(op, layout) -> every time of the loop's logs in DIR."""
    raw = {}
    for op in OPS:
        for layout in COMMUNICATORS:
            for run in (1, 2):
                path = os.path.join(d, f"{op}_{layout}_m1_{run}.log")
                if os.path.exists(path):
                    raw.setdefault((op, layout), []).extend(log_times(path))
    return raw


def loops_from_dir(d):
    """(op, layout) -> the median of the loop's times in DIR."""
    return {k: statistics.median(v) for k, v in raw_from_dir(d).items() if v}


def loops_from_table(path):
    """Lines `op layout us [us ...]` (the loop's times), '#' comments."""
    loops = {}
    with open(path) as f:
        for line in f:
            fields = line.split("#")[0].split()
            if len(fields) >= 3:
                loops[(fields[0], fields[1])] = statistics.median(float(x) for x in fields[2:])
    return loops


def loops_of(source):
    return loops_from_dir(source) if os.path.isdir(source) else loops_from_table(source)


def median_over_hosts(hosts):
    """Each loop's median over the hosts that measured it."""
    keys = sorted({k for h in hosts for k in h})
    return {k: statistics.median(h[k] for h in hosts if k in h) for k in keys}


def model(p, op, layout):
    group, communicator, all_reduce_communicator, operation = p
    c = COMMUNICATORS[layout]
    n = CALLS_PER_COMMUNICATOR[op] * c
    per = all_reduce_communicator if op == "all_reduce" else communicator
    return group + per * c + operation * (n - c)


def fit(loops):
    best = None
    steps = [x * 0.25 for x in range(0, 41)]
    for group in steps[:25]:
        for communicator in steps[8:]:
            for all_reduce_communicator in steps[12:]:
                for operation in (x * 0.1 for x in range(0, 16)):
                    p = (group, communicator, all_reduce_communicator, operation)
                    err = sum((model(p, op, lay) / t - 1) ** 2 for (op, lay), t in loops.items())
                    if best is None or err < best[0]:
                        best = (err, p)
    return best[1]


def main(argv=None):
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("sources", nargs="+", help="folders of nccl-tests logs or tables of loops, one a host")
    a.add_argument("--outside", type=float, default=2.5, help="us of an iteration outside NCCL's groups")
    a.add_argument("--raw", action="store_true", help="print the folders' times as one table (one host)")
    args = a.parse_args(argv)
    if args.raw:
        raw = {}
        for d in args.sources:
            for k, v in raw_from_dir(d).items():
                raw.setdefault(k, []).extend(v)
        print("# op layout us ...  (fit_nccl_host.py --raw " + " ".join(args.sources) + ")")
        for (op, layout), v in sorted(raw.items()):
            print(op, layout, " ".join(f"{t:g}" for t in v))
        return 0
    hosts = [loops_of(s) for s in args.sources]
    loops = median_over_hosts(hosts)
    missing = [(op, lay) for op in OPS for lay in COMMUNICATORS if (op, lay) not in loops]
    if missing:
        print(f"fit_nccl_host: no loop for {', '.join(f'{o} {l}' for o, l in missing)}", file=sys.stderr)
        return 1
    p = fit(loops)
    group = max(0.0, p[0] - args.outside)
    print(f"# fitted by tests/gpu/fidelity/fit_nccl_host.py on {' '.join(args.sources)} (--outside {args.outside} us)")
    print("[collectives.host]")
    print(f'group = "{group:g}us"\ncommunicator = "{p[1]:g}us"\nall_reduce_communicator = "{p[2]:g}us"\n'
          f'operation = "{p[3]:g}us"')
    within = 0
    for (op, lay), t in sorted(loops.items()):
        err = model(p, op, lay) / t - 1
        within += abs(err) <= 0.10
        each = " / ".join(f"{h[(op, lay)]:.2f}" for h in hosts if (op, lay) in h)
        print(f"# {op:15s} {lay}: measured {t:6.2f} us, model {model(p, op, lay):6.2f} us ({err * 100:+.1f}%)"
              + (f"; hosts {each}" if len(hosts) > 1 else ""))
    print(f"# {within} of {len(loops)} loops within 10%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
