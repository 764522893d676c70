"""Where a simulated step's GPU time differs from the real one, kernel by kernel:

    kernel_compare.py REAL.json VGPU.trace.json [PID [ROWS]]

REAL.json: train_step.py --kernels (one real step under torch.profiler: count and total us per
kernel name), or another vgpu-run --timeline (its virtual GPU 0: e.g. the one-GPU step against
8 processes of the passthrough, to find the kernel one of them reads long: 2026-11-29b, call 7).
VGPU.trace.json: vgpu-run --timeline of the same job (PID: the virtual GPU, 0).
The vgpu step is the one before the last between two launches of the step's first kernel (the
token sampler, DistributionRandom), so the counts should agree; kernels are matched by name.
Prints the totals, then the names with the largest differences."""
import json
import shutil
import subprocess
import sys


def demangled(names):
    """The names as torch.profiler prints them (c++filt's; unchanged without binutils)."""
    names = list(names)
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.split("\n")))


def vgpu_step(trace, pid):
    ev = [e for e in json.load(open(trace))["traceEvents"]
          if e.get("ph") == "X" and e.get("pid") == pid and e.get("cat") != "copy"]
    ev.sort(key=lambda e: e["ts"])
    starts = [i for i, e in enumerate(ev) if "DistributionRandom" in e["name"]]
    if len(starts) < 3:
        sys.exit("no step found in the timeline")
    a, b = ev[starts[-3]]["ts"], ev[starts[-2]]["ts"]
    out = {}
    names = demangled({e["name"] for e in ev})
    for e in ev:
        if a <= e["ts"] < b:
            k = out.setdefault(names[e["name"]], {"count": 0, "us": 0.0})
            k["count"] += 1
            k["us"] += e["dur"]
    return out, b - a


def main():
    real = json.load(open(sys.argv[1]))
    if isinstance(real, dict) and "traceEvents" in real:  # another timeline: its step before the last
        real = vgpu_step(sys.argv[1], 0)[0]
        real = {n: k for n, k in real.items() if not n.startswith(("memset", "copy"))}
    sim, span = vgpu_step(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    rt = sum(k["us"] for k in real.values())
    st = sum(k["us"] for n, k in sim.items() if not n.startswith(("memset", "copy")))
    print(f"kernels: real {rt / 1e3:.2f} ms in {sum(k['count'] for k in real.values())} launches, "
          f"vgpu {st / 1e3:.2f} ms in {sum(k['count'] for n, k in sim.items() if not n.startswith(('memset', 'copy')))} "
          f"({(st / rt - 1) * 100:+.1f}%); vgpu step span {span / 1e3:.2f} ms")
    rows = []
    for n in set(real) | set(sim):
        r, s = real.get(n, {"count": 0, "us": 0}), sim.get(n, {"count": 0, "us": 0})
        rows.append((s["us"] - r["us"], n, r, s))
    rows.sort(key=lambda x: -abs(x[0]))
    print(f"{'diff us':>9} {'real us':>9} {'n':>4} {'vgpu us':>9} {'n':>4}  kernel")
    for d, n, r, s in rows[:int(sys.argv[4]) if len(sys.argv) > 4 else 25]:
        print(f"{d:9.1f} {r['us']:9.1f} {r['count']:4d} {s['us']:9.1f} {s['count']:4d}  {n[:90]}")
    small = [x for x in rows if x[2]["count"] and x[3]["count"]]
    per = sum((x[3]["us"] / x[3]["count"] - x[2]["us"] / x[2]["count"]) * x[3]["count"] for x in small)
    print(f"matched kernels: {len(small)}; vgpu - real over them {per / 1e3:+.2f} ms")


if __name__ == "__main__":
    main()
