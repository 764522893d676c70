#!/usr/bin/env python3
"""How much kernels slow down beside a collective's kernel on the same GPU, from real traces
(the rates of vgpu/timing/collective_overlap.h):

    collective_overlap_fit.py SINGLE.trace.json DDP_RANK0.trace.json DDP_RANK1.trace.json [RANK0 RANK1 ...]

The traces are train_step.py --kernels FILE's (FILE.trace.json: one profiled step): SINGLE the one-GPU
step (train_step.py single), then the two ranks' traces of each DDP run (train_step.py ddp), in pairs.
Each DDP launch that is not NCCL's is matched to the same launch (same name, same occurrence) of the
one-GPU step; its extra time is its duration minus that one's. A rank's NCCL kernel windows are split
into the part where it waited for its peer (its start until the end minus the shorter of the two
ranks' windows) and the part where it moved data (the rest). Prints, per rank, the overlap of the
matched kernels with each part and their extra time, then the least-squares fit
extra = a x overlap_moving + b x overlap_waiting over every overlapping launch: the kernels' rates
beside a collective are 1 - a (moving) and 1 - b (waiting)."""
import collections
import json
import sys


def kernels(path):
    ev = json.load(open(path))["traceEvents"]
    ks = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    ks.sort(key=lambda e: e["ts"])
    return ks


def overlap(a, b, spans):
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans)


def main(argv):
    if len(argv) < 4 or len(argv) % 2 != 0:
        print(__doc__)
        return 2
    alone = collections.defaultdict(list)
    for e in kernels(argv[1]):
        alone[e["name"]].append(e["dur"])
    rows = []  # (overlap moving, overlap waiting, extra) per overlapping launch
    for pair in range(2, len(argv), 2):
        ranks = [kernels(p) for p in argv[pair:pair + 2]]
        windows = [[(e["ts"], e["ts"] + e["dur"]) for e in ks if "nccl" in e["name"]] for ks in ranks]
        for r, ks in enumerate(ranks):
            moving, waiting = [], []
            for (a, b), (c, d) in zip(windows[r], windows[1 - r]):
                m = min(b - a, d - c)
                moving.append((b - m, b))
                waiting.append((a, b - m))
            seen = collections.Counter()
            om = ow = extra_ov = extra_not = 0.0
            for e in ks:
                name = e["name"]
                if "nccl" in name:
                    continue
                i = seen[name]
                seen[name] += 1
                if i >= len(alone[name]):
                    continue
                a, b = e["ts"], e["ts"] + e["dur"]
                x, y, extra = overlap(a, b, moving), overlap(a, b, waiting), e["dur"] - alone[name][i]
                if x + y > 0:
                    rows.append((x, y, extra))
                    om, ow, extra_ov = om + x, ow + y, extra_ov + extra
                else:
                    extra_not += extra
            total = sum(b - a for a, b in windows[r])
            print(f"{argv[pair + r]}: NCCL windows {total:.0f} us ({sum(b - a for a, b in waiting):.0f} waiting); "
                  f"kernels beside them: {om:.0f} us moving + {ow:.0f} us waiting of overlap, {extra_ov:.0f} us "
                  f"more than alone; the others {extra_not:+.0f} us")
    sxx = sum(x * x for x, _, _ in rows)
    syy = sum(y * y for _, y, _ in rows)
    sxy = sum(x * y for x, y, _ in rows)
    sxe = sum(x * e for x, _, e in rows)
    sye = sum(y * e for _, y, e in rows)
    det = sxx * syy - sxy * sxy
    if det <= 0:
        a = sxe / sxx if sxx else 0.0
        print(f"fit (moving only): rate beside a moving collective {1 - a:.3f}")
        return 0
    a = (sxe * syy - sye * sxy) / det
    b = (sxx * sye - sxy * sxe) / det
    print(f"fit over {len(rows)} launches: extra = {a:.3f} x moving + {b:.3f} x waiting overlap; "
          f"rates beside a collective: {1 - a:.3f} moving, {1 - b:.3f} waiting")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
