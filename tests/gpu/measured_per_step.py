"""How many kernel launches the passthrough measures in each training step (issue 21).

A launch is measured until its launch signature has settled (VGPU_MEASURE_SAMPLES samples);
afterwards it takes the settled duration. Launches whose signature never repeats (stack garbage
in by-value structs, seeds) were measured on every launch, the passthrough's main cost; the
passthrough now learns which by-value words vary without changing the duration and stops keying
on them (vgpu/front/launch/signature_settling.h). This runs STEPS (20) steps of the 4-layer
GPT-2 of gpt2_tiny.py on one virtual GPU and prints, per step, the launches that had a
signature, how many of them were measured, their fraction, and the new distinct durations
("new sigs": settling groups). Target: 0 measured after step 2 (the shapes of every step repeat).

On the GPU machine, with the libraries staged by tests/gpu/stage:
  LD_LIBRARY_PATH=.device/lib/passthrough:.device/lib python3 tests/gpu/measured_per_step.py
The counts come from VGPU_LAUNCH_STATS (set here to a temporary file unless already set).
Which kernels keep being measured (each new duration group is one line at debug level):
  VGPU_LOG_LEVEL=debug LD_LIBRARY_PATH=.device/lib/passthrough:.device/lib \
    python3 tests/gpu/measured_per_step.py 2>&1 | grep -o 'launch signatures of [^:]*: a new' \
    | sort | uniq -c | sort -rn | head -20
"""
import os
import sys
import tempfile

if not os.environ.get("VGPU_LAUNCH_STATS"):
    os.environ["VGPU_LAUNCH_STATS"] = os.path.join(tempfile.mkdtemp(prefix="vgpu-stats-"), "launch_stats")
STATS = os.environ["VGPU_LAUNCH_STATS"]

import torch  # noqa: E402  (after the environment: the driver reads it when it loads)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_tiny  # noqa: E402

KEYS = ("signatures", "launches", "settled", "from_database", "measured")


def read_counts():
    try:
        with open(STATS) as f:
            fields = dict(kv.split("=") for kv in f.readline().split())
        return {k: int(fields[k]) for k in KEYS}
    except (OSError, ValueError, KeyError):
        return dict.fromkeys(KEYS, 0)


def main():
    steps = int(os.environ.get("STEPS", "20"))
    model, opt = gpt2_tiny.make("cuda:0", layers=4)
    torch.cuda.synchronize()
    prev = read_counts()
    late_measured = 0
    print(f"{'step':>4} {'launches':>9} {'measured':>9} {'fraction':>9} {'new sigs':>9}")
    for s in range(1, steps + 1):
        gpt2_tiny.step(model, opt, batch=8, seq=512)
        torch.cuda.synchronize()
        cur = read_counts()
        d = {k: cur[k] - prev[k] for k in KEYS}
        frac = d["measured"] / d["launches"] if d["launches"] else 0.0
        print(f"{s:>4} {d['launches']:>9} {d['measured']:>9} {frac:>9.3f} {d['signatures']:>9}", flush=True)
        if s > 2:
            late_measured += d["measured"]
        prev = cur
    if prev["launches"] == 0:
        print(f"FAIL no launch counted: is the passthrough libcuda.so.1 loaded? ({STATS} empty)")
        return 1
    verdict = "PASS" if late_measured == 0 else "MISS"
    print(f"{verdict} launches measured after step 2: {late_measured} "
          f"(total {prev['launches']} launches, {prev['signatures']} signatures, "
          f"{prev['from_database']} from the database)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
