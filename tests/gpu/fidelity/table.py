"""The fidelity table of tests/gpu/fidelity/run: real against vgpu, one row per figure.

    python3 table.py RESULTS.jsonl MODEL [VGPU_COLLECTIVE]

nccl-tests rows: the busbw each side printed and vgpu's error, against the targets (within 5%
from 16 MiB, within 15% from 64 KiB to 8 MiB); with several rounds (NCCL_RUNS), each side's median
over its rounds, the real rounds' range, and whether vgpu's median lies inside that range (a small
size's real figure moves by up to 1.6x between rounds on one host). Step rows: the job's own step time (the median
over its steps, per run), each side's runs and the error of their means, then the host probe of
each run and vgpu over real step by step at the same host state (host_states.py: the hosts run
Python at two speeds, and one pair of runs moves with the states each met). The 8-GPU row: the
step of 8 virtual GPUs against the 1-GPU step plus the all-reduce of the gradients that the
backward pass cannot hide, as the collective model gives it (vgpu-collective); then from the
real 2-GPU DDP step at the same per-rank shape (which carries DDP's own host work); then that
with the slowest of 8 ranks' hosts instead of 2 (each real rank's per-step host time until
backward() returned, `ranks_steps_fb_ms`, as an empirical distribution: expected_max).
"""
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import host_states  # noqa: E402


def pct(a, b):
    return (a / b - 1) * 100 if b else float("nan")


def size_name(n):
    for unit, s in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << s:
            return f"{n >> s}{unit}"
    return str(n)


def expected_max(values, k):
    """E[max of k independent draws] from the empirical distribution of `values`: the i-th
    smallest of n is the maximum with probability (i/n)^k - ((i-1)/n)^k."""
    xs, n = sorted(values), len(values)
    return sum(x * (((i + 1) / n) ** k - (i / n) ** k) for i, x in enumerate(xs))


def mean_step_max(ranks_steps):
    """The mean over steps of the slowest rank's value (per rank lists of per-step values)."""
    per_step = list(zip(*ranks_steps))
    return sum(max(s) for s in per_step) / len(per_step)


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    collective = sys.argv[3] if len(sys.argv) > 3 else None
    nccl = defaultdict(lambda: defaultdict(list))  # (op, size) -> side -> busbw of each round
    for r in rows:
        if r.get("kind") == "nccl" and int(r["size"]) > 0:
            nccl[(r["op"], int(r["size"]))][r["side"]].append(float(r["busbw"]))
    if nccl:
        rounds = max(len(x) for v in nccl.values() for x in v.values())
        spread = rounds > 1
        print(f"{'nccl-tests (-g 2)':16s} {'size':>6s} {'real busbw':>11s} {'vgpu busbw':>11s} {'error':>8s}  target"
              + (f"  (medians of {rounds} rounds; real range, vgpu inside it)" if spread else ""))
        met = total = inside = 0
        for (op, size), v in sorted(nccl.items()):
            if "real" not in v or "vgpu" not in v:
                print(f"{op:16s} {size_name(size):>6s} {'-' if 'real' not in v else statistics.median(v['real']):>11} "
                      f"{'-' if 'vgpu' not in v else statistics.median(v['vgpu']):>11}   missing")
                continue
            real, vgpu = statistics.median(v["real"]), statistics.median(v["vgpu"])
            e = pct(vgpu, real)
            limit = 5 if size >= 16 << 20 else 15
            ok = abs(e) <= limit
            met += ok
            total += 1
            line = (f"{op:16s} {size_name(size):>6s} {real:11.2f} {vgpu:11.2f} {e:+7.1f}%  "
                    f"{'ok' if ok else 'MISSED'} (±{limit}%)")
            if spread:
                lo, hi = min(v["real"]), max(v["real"])
                within = lo <= vgpu <= hi
                inside += within
                line += f"  {lo:.2f}-{hi:.2f} ({pct(hi, lo):.0f}%) {'inside' if within else 'outside'}"
            print(line)
        print(f"nccl-tests: {met} of {total} sizes within target"
              + (f"; vgpu inside the real rounds' range in {inside}" if spread else ""))
    steps = defaultdict(lambda: defaultdict(list))
    backward = {}
    fb = defaultdict(lambda: defaultdict(list))  # per run: per rank, per step host ms until backward returned
    probe = defaultdict(lambda: defaultdict(list))  # per run: the ranks' median cpu probe (ms)
    runs = defaultdict(lambda: defaultdict(list))  # per run: the whole result (host_states.py)
    for r in rows:
        if r.get("kind") == "step":
            key = (r["mode"], r.get("world", 1), r.get("args", ""))
            steps[key][r["side"]].append(float(r["step_ms"]))
            runs[key][r["side"]].append(r)
            if r.get("ranks_steps_fb_ms"):
                fb[key][r["side"]].append(r["ranks_steps_fb_ms"])
            if r.get("ranks_probe_ms"):
                probe[key][r["side"]].append(max(sorted(p)[len(p) // 2] for p in r["ranks_probe_ms"]))
            if r["side"] == "vgpu":
                backward[key] = float(r["backward_ms"])
    if steps:
        print(f"\n{'step (perf_counter)':32s} {'real ms (runs)':>24s} {'vgpu ms (runs)':>24s} {'error':>8s}")
        for key, v in sorted(steps.items()):
            mode, world, args = key
            name = f"{mode} x{world} {args}".strip()
            real, virt = v.get("real", []), v.get("vgpu", [])
            if not real:  # a vgpu setting's row (VGPU_...=x in its args) beside the plain real one
                plain = " ".join(a for a in args.split() if not a.startswith("VGPU_"))
                real = steps.get((mode, world, plain), {}).get("real", []) if plain != args else []
            fmt = lambda xs: " / ".join(f"{x:.2f}" for x in xs) or "-"
            err = pct(sum(virt) / len(virt), sum(real) / len(real)) if real and virt else float("nan")
            print(f"{name:32s} {fmt(real):>24s} {fmt(virt):>24s} {err:+7.1f}%")
            # How fast each run's host ran plain Python (train_step.py's cpu probe, the slowest
            # rank's median): the GPU hosts switch between two speeds ~1.7x apart, and a host-bound
            # step follows them.
            pr = probe.get(key, {})
            if pr:
                print(f"{'  host probe ms (per run)':32s} {fmt(pr.get('real', [])):>24s} {fmt(pr.get('vgpu', [])):>24s}")
            if pr.get("real") and pr.get("vgpu"):
                cmp = host_states.compare(runs[key]["real"], runs[key]["vgpu"])
                print("  " + host_states.describe(cmp, "vgpu / real"))
                bins = host_states.compare_bins(runs[key]["real"], runs[key]["vgpu"])
                print("  " + host_states.describe_bins(bins, "vgpu / real"))
    eight = [k for k in steps if k[0] == "ddp" and k[1] == 8]
    single = [k for k in steps if k[0] == "single" and eight and k[2] == eight[0][2]]
    if eight and single and collective and os.path.exists(collective):
        k8, k1 = eight[0], single[0]
        shape = " ".join(k8[2].split()[:4])  # --batch B --seq S
        s8 = steps[k8]["vgpu"][0]
        s1 = steps[k1]["vgpu"][0]
        grads = 124_439_808 * 4  # GPT-2 small's parameters (tied embedding), fp32 gradients
        def model_us(nbytes, ranks=8):
            out = subprocess.run([collective, "all_reduce", str(nbytes), str(ranks)], capture_output=True, text=True).stdout
            return float(out.split(": ")[1].split(" us")[0])
        hidden = backward[k1]
        def not_hidden(ranks):  # ms of the gradient all-reduce the backward pass cannot hide
            total = model_us(grads, ranks) / 1e3
            last = model_us(25 << 20, ranks) / 1e3  # DDP's last bucket (25 MiB) cannot overlap anything
            return max(last, total - hidden), last, total
        extra8, last, total = not_hidden(8)
        predicted = s1 + extra8
        print(f"\n8 virtual GPUs, DDP ({shape} per rank): step {s8:.2f} ms; 1 GPU {s1:.2f} ms + all-reduce "
              f"not hidden by the backward pass max({last:.2f}, {total:.2f} - {hidden:.2f}) ms = predicted "
              f"{predicted:.2f} ms ({pct(s8, predicted):+.1f}%)")
        # The 1-GPU step leaves out DDP's own host work in the backward pass (its hooks, bucket
        # copies and NCCL calls on the autograd thread), which sets the step where the backward
        # pass is host-bound: the real 2-GPU DDP step at the same per-rank shape carries it, and
        # 8 GPUs add only the model's difference in the all-reduce not hidden.
        real2 = steps.get(("ddp", 2, k8[2]), {}).get("real", [])
        if real2:
            base = sum(real2) / len(real2)
            extra2 = not_hidden(2)[0]
            p2 = base + extra8 - extra2
            print(f"  from the real 2-GPU DDP step at the same shape ({' / '.join(f'{x:.2f}' for x in real2)} ms): "
                  f"{base:.2f} + ({extra8:.2f} - {extra2:.2f}) = predicted {p2:.2f} ms ({pct(s8, p2):+.1f}%)")
            # Where the backward pass is host-bound, the last bucket's all-reduce starts when the
            # slowest rank's backward() returns: a step waits for the slowest of 8 hosts, not of 2.
            # Each real rank's per-step host time until backward() returned, pooled over ranks and
            # runs, gives the expected slowest of k ranks (order statistics of the measured spread).
            pool = [x for run in fb.get(("ddp", 2, k8[2]), {}).get("real", []) for rank in run for x in rank]
            if len(pool) >= 4:
                e8, e2 = expected_max(pool, 8), expected_max(pool, 2)
                p3 = p2 + e8 - e2
                print(f"  with the slowest of 8 hosts instead of 2 (each real rank's host time until backward() "
                      f"returned, {len(pool)} rank-steps: expected slowest of 8 {e8:.2f} ms, of 2 {e2:.2f}): "
                      f"{p2:.2f} + {e8 - e2:.2f} = predicted {p3:.2f} ms ({pct(s8, p3):+.1f}%)")
                vgpu2 = fb.get(("ddp", 2, k8[2]), {}).get("vgpu", [])
                for side, runs in (("real 2-GPU", fb.get(("ddp", 2, k8[2]), {}).get("real", [])),
                                   ("vgpu 2-GPU", vgpu2), ("vgpu 8-GPU", fb.get(k8, {}).get("vgpu", []))):
                    if runs:
                        seen = " / ".join(f"{mean_step_max(run):.2f}" for run in runs)
                        print(f"    {side}: the slowest rank's host time until backward() returned, mean over steps: {seen} ms")
                # vgpu's own 2-rank hosts, ordered as 8: what vgpu's 8 ranks would show if their hosts
                # ran as its 2 ranks' do; the rest of vgpu's 8-rank figure is hosts running slower.
                own = [x for run in vgpu2 for rank in run for x in rank]
                if len(own) >= 4:
                    print(f"    vgpu's 2-rank hosts ({len(own)} rank-steps): expected slowest of 8 "
                          f"{expected_max(own, 8):.2f} ms, of 2 {expected_max(own, 2):.2f}")


if __name__ == "__main__":
    main()
