"""Fits the collective model's parameters (simcore/collective_model.h) to measured nccl-tests
curves (tests/data/nccl_tests_*.txt), and prints them as the [collectives] TOML of the cluster
configuration, with each curve's error.

    python3 tests/gpu/fidelity/fit_collectives.py tests/data/nccl_tests_h100x2_nvlink.txt
    python3 tests/gpu/fidelity/fit_collectives.py tests/data/nccl_tests_h200x2_nvlink.txt H200-141GB
    python3 tests/gpu/fidelity/fit_collectives.py tests/data/nccl_tests_h200x2_nvlink_2026-11-27.txt H200-141GB \
        --pooled tests/data/nccl_tests_h200x2_pooled_2026-11-27.txt

With a GPU model's id as second argument the tables are printed as that model's own fit
([collectives.<model>.nvlink.*], laid over the general figures for a cluster of that model).
With --pooled, a Simple-protocol size that has runs from at least three loops there (real runs of
several device calls, pool_nccl_runs.py) is fitted to their median instead of the curve file's
faster run: the machines a kind lends differ by a few percent (reduce-scatter at 16 MiB read
50.1-53.1 us over one session's calls), and one machine's curve put the model at the slow end.

The model of one collective on one link class and protocol, for W bytes that each rank puts on
its busiest link (ring schedule: all-reduce 2(n-1)/n of the buffer, all-gather and
reduce-scatter (n-1) shares, broadcast and send/recv the buffer):

    T = latency + (W + 2 * sqrt(W * fill)) / bandwidth

NCCL took LL for every size up to 2 MiB and Simple from 4 MiB (the nccl-tests size: the whole
buffer, as NCCL's own choice counts it), so the model switches at `ll_max` (3 MiB).
`latency` is the kernel's fixed cost; `bandwidth` the bus bandwidth the operation's kernel
reaches on the link; `fill` the pipeline fill in bytes: NCCL cuts each channel's share into
chunks and shrinks them for smaller messages to keep the pipeline busy, and the cost of that
(per-chunk overhead times pipeline depth, at the best chunk size) grows as the square root of the
message. Simple protocol parameters are fitted on the default-mode times from 4 MiB up (what
nccl-tests reports), LL on the GPU-only times (-G: graph mode, no host) below 4 MiB, since with
small messages the default mode is bound by the host, which vgpu times separately.
Pure Python (no numpy): a Nelder-Mead search over the relative error.
"""
import math
import sys

WIRE = {"all_reduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5, "broadcast": 1.0, "sendrecv": 1.0,
        "alltoall": 0.5}  # bytes on the wire per rank over the nccl-tests size, 2 ranks
CONFIG_NAME = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
               "broadcast": "broadcast", "sendrecv": "send_recv", "alltoall": "all_to_all"}
SIMPLE_FROM = 4 << 20
LL_FROM = 64 << 10


def load(path):
    rows = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        rows.append((f[0], int(f[1]), float(f[2]), float(f[3]), float(f[4])))
    return rows


def model(p, w):
    lat, bw, fill = p
    return lat + (w + 2.0 * math.sqrt(w * max(fill, 0.0))) / bw


def nelder_mead(f, x0, steps, iters=3000):
    pts = [list(x0)] + [[x + (s if i == j else 0) for j, x in enumerate(x0)] for i, s in enumerate(steps)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        c = [sum(p[j] for p in pts[:-1]) / (len(pts) - 1) for j in range(len(x0))]
        r = [c[j] + (c[j] - pts[-1][j]) for j in range(len(x0))]
        fr = f(r)
        if fr < vals[0]:
            e = [c[j] + 2 * (c[j] - pts[-1][j]) for j in range(len(x0))]
            fe = f(e)
            pts[-1], vals[-1] = (e, fe) if fe < fr else (r, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = r, fr
        else:
            k = [c[j] + 0.5 * (pts[-1][j] - c[j]) for j in range(len(x0))]
            fk = f(k)
            if fk < vals[-1]:
                pts[-1], vals[-1] = k, fk
            else:
                pts = [pts[0]] + [[pts[0][j] + 0.5 * (p[j] - pts[0][j]) for j in range(len(x0))] for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    return pts[0]


LINE_RATE = 450e9  # NVLink per GPU per direction, bytes/s (H100 SXM: 18 links)


def fit(points):
    # points: (wire bytes, seconds). Parameters in (s, B/s, bytes); search in scaled units. The
    # bandwidth stays within the link's line rate (a physical bound; a free fit of a flat curve
    # trades it against the fill).
    def err(q):
        p = (q[0] * 1e-6, min(q[1], LINE_RATE / 1e9) * 1e9, max(q[2], 0.0) * 1024.0)
        return sum((model(p, w) / t - 1.0) ** 2 for w, t in points)
    q = nelder_mead(err, [10.0, 300.0, 256.0], [5.0, 50.0, 200.0])
    return q[0] * 1e-6, min(q[1], LINE_RATE / 1e9) * 1e9, max(q[2], 0.0) * 1024.0


def load_pooled(path):
    """(op, size) -> the real runs' times in us (pool_nccl_runs.py's rows)."""
    pooled = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        op, size, t = line.split()[:3]
        pooled.setdefault((op, int(size)), []).append(float(t))
    return pooled


def simple_reference(op, size, d1, d2, pooled):
    """The time a Simple-protocol size is fitted to, us: the pooled runs' median where there are
    at least three, else the faster of the curve's two runs (noise on a shared machine only ever
    adds time)."""
    runs = sorted(pooled.get((op, size), []))
    if len(runs) >= 3:
        mid = len(runs) // 2
        return runs[mid] if len(runs) % 2 else (runs[mid - 1] + runs[mid]) / 2
    return min(d1, d2)


def main():
    args = sys.argv[1:]
    pooled = {}
    if "--pooled" in args:
        i = args.index("--pooled")
        pooled = load_pooled(args[i + 1])
        del args[i:i + 2]
    rows = load(args[0])
    params = {}
    for op in WIRE:
        simple = [(s * WIRE[op], simple_reference(op, s, d1, d2, pooled) * 1e-6)
                  for o, s, d1, d2, g in rows if o == op and s >= SIMPLE_FROM]
        ll = [(s * WIRE[op], g * 1e-6) for o, s, d1, d2, g in rows if o == op and LL_FROM <= s < SIMPLE_FROM]
        params[op] = {"Simple": fit(simple), "LL": fit(ll)}
    print("# fitted by tests/gpu/fidelity/fit_collectives.py on " + " ".join(sys.argv[1:]))
    prefix = f"collectives.{args[1]}" if len(args) > 1 else "collectives"
    for proto in ("LL", "Simple"):
        print(f"[{prefix}.nvlink.{proto.lower()}]")
        for op in WIRE:
            lat, bw, fill = params[op][proto]
            print(f'{CONFIG_NAME[op]} = {{ latency = "{lat * 1e6:.2f}us", link_share = {bw / LINE_RATE:.4f}, '
                  f'fill = "{fill / 1024:.0f}KiB" }}  # {bw / 1e9:.1f} GB/s')
    print(f'[collectives.nvlink]\nll_max = "{(SIMPLE_FROM * 3 // 4) >> 10}KiB"')
    print("# error against the pooled runs' median or the faster default-mode run (>= 4 MiB) / the graph-mode "
          "time (< 4 MiB):")
    for op in WIRE:
        errs = []
        for o, s, d1, d2, g in rows:
            if o != op or s < LL_FROM:
                continue
            w = s * WIRE[op]
            t = model(params[op]["LL" if s < SIMPLE_FROM * 3 // 4 else "Simple"], w)
            ref = simple_reference(op, s, d1, d2, pooled) * 1e-6 if s >= SIMPLE_FROM else g * 1e-6
            errs.append(f"{s >> 20 if s >= 1 << 20 else str(s >> 10) + 'K'}:{(t / ref - 1) * 100:+.1f}")
        print("#", op, " ".join(errs))


if __name__ == "__main__":
    main()
