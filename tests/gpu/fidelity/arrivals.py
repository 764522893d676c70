#!/usr/bin/env python3
"""Where two timelines of one data-parallel job part (issue 23: the sim's 8 ranks against the
passthrough's 8 processes): each all-reduce's arrivals (every rank's NCCL kernel start on the
passthrough, its "nccl arrival" op on the sim), its end after the last arrival, and each rank's
compute between two all-reduces, side by side.

usage: arrivals.py A.trace.json[.gz] B.trace.json[.gz] [--steps K]

The traces are vgpu's (VGPU_TIMELINE, one trace process per virtual GPU). A step is the stretch
from one optimizer phase to the next: every GPU runs the same NCCL kernels in the same order, so
the j-th NCCL kernel of each GPU is one collective. The last K steps are compared (default 1):
their collectives are the last K * (collectives per step) of each GPU's; per step the count is
found as the NCCL kernels over the steps (the caller says how many steps the trace holds:
--total-steps, default 6)."""
import argparse
import gzip
import json
import statistics


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat", "task") != "flow"]


def is_nccl(name):
    return "ncclDevKernel" in name


# Not kernels: the sim backend's own steps of a collective ("nccl arrival", "nccl collective end"),
# and both backends' copies and sets.
NOT_KERNELS = ("nccl ", "memcpy", "memset", "copy ")


# The sim backend's op where a rank reached a collective (its kernel starts at the last rank's):
# the rank's arrival. On the passthrough a rank's kernel starts at its own arrival.
ARRIVAL = "nccl arrival"


def collectives(events):
    """{gpu: [(arrival, end, compute_before_us)]}: each NCCL kernel of the GPU in order (arrival:
    its "nccl arrival" op's time where the GPU has one per kernel, else the kernel's start), with
    the GPU's other kernels' time (summed over its lanes) since its previous NCCL kernel."""
    by_gpu = {}
    for e in events:
        by_gpu.setdefault(e["pid"], []).append(e)
    out = {}
    for gpu, evs in by_gpu.items():
        evs.sort(key=lambda e: e["ts"])
        rows, busy = [], 0.0
        arrivals = [e["ts"] for e in evs if e["name"] == ARRIVAL]
        for e in evs:
            if is_nccl(e["name"]):
                rows.append((e["ts"], e["ts"] + e["dur"], busy))
                busy = 0.0
            elif not e["name"].startswith(NOT_KERNELS):
                busy += e["dur"]
        if len(arrivals) == len(rows):
            rows = [(min(a, start), end, before) for a, (start, end, before) in zip(arrivals, rows)]
        out[gpu] = rows
    return out


def summarize(path, steps, total_steps):
    per_gpu = collectives(load(path))
    counts = {g: len(r) for g, r in per_gpu.items()}
    n = min(counts.values())
    per_step = n // total_steps
    take = per_step * steps
    rows = []
    # Counted from each GPU's end (a setup collective more or less at the start moves nothing).
    for j in range(-take, 0):
        starts = [per_gpu[g][j][0] for g in per_gpu]
        ends = [per_gpu[g][j][1] for g in per_gpu]
        compute = [per_gpu[g][j][2] for g in per_gpu]
        rows.append({"first": min(starts), "last": max(starts), "end": max(ends),
                     "compute_mean": statistics.mean(compute), "compute_max": max(compute)})
    return {"gpus": len(per_gpu), "nccl_per_gpu": counts, "per_step": per_step, "rows": rows}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--total-steps", type=int, default=6)
    args = p.parse_args()
    sa, sb = (summarize(x, args.steps, args.total_steps) for x in (args.a, args.b))
    for name, s in (("A", sa), ("B", sb)):
        print(f"{name}: {s['gpus']} GPUs, NCCL kernels per GPU {sorted(set(s['nccl_per_gpu'].values()))}, "
              f"{s['per_step']} a step")
    print("j | A: spread us, after last us, compute mean/max us, gap from prev end | B: the same")
    sides = {"A": sa["rows"], "B": sb["rows"]}
    totals = {name: {"spread": 0.0, "after": 0.0, "compute": 0.0, "gaps": 0.0} for name in sides}
    for j in range(min(len(sa["rows"]), len(sb["rows"]))):
        line = [str(j)]
        for name, rows in sides.items():
            r = rows[j]
            prev_end = rows[j - 1]["end"] if j > 0 else r["first"]
            spread, after, gap = r["last"] - r["first"], r["end"] - r["last"], r["first"] - prev_end
            t = totals[name]
            t["spread"] += spread
            t["after"] += after
            t["compute"] += r["compute_mean"]
            t["gaps"] += gap
            line.append(f"{spread:8.1f} {after:8.1f} {r['compute_mean']:8.1f}/{r['compute_max']:8.1f} {gap:8.1f}")
        print(" | ".join(line))
    for name, rows in sides.items():
        t = totals[name]
        span = rows[-1]["end"] - rows[0]["first"] if rows else 0
        print(f"{name} totals: spread {t['spread']:.1f} us, after last arrival {t['after']:.1f} us, compute between "
              f"{t['compute']:.1f} us, gaps {t['gaps']:.1f} us, first arrival to last end {span:.1f} us")


if __name__ == "__main__":
    main()
