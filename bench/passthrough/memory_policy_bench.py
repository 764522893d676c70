#!/usr/bin/env python3
"""Physical GPU memory of an 8-virtual-device GPT-2 job under each memory policy.

  memory_policy_bench.py LIBDIR

One process trains a GPT-2 (12 layers, batch 8, seq 1024, bf16) on each of 8 virtual devices,
keeping every model alive, while nvidia-smi samples the physical GPU's used memory. Baseline in
the same run: the same job on one device of the real GPU without vgpu (x 8 for the whole job
is what 8 real GPUs would hold).
"""
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOB = r"""
import os, sys, torch
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "gpu"))
import gpt2_tiny
n = int(sys.argv[2])
keep = []
for d in range(n):
    m, o = gpt2_tiny.make(f"cuda:{d}", layers=12)
    gpt2_tiny.step(m, o, batch=8, seq=1024)
    torch.cuda.synchronize(d)
    keep.append((m, o))
virtual = sum(torch.cuda.memory_reserved(d) for d in range(n))
print("VIRTUAL_RESERVED", virtual, flush=True)
"""


def used_mib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return int(out.split()[0])


def run(devices, env_extra, libdir):
    env = dict(os.environ, **env_extra)
    if libdir:
        env["LD_LIBRARY_PATH"] = f"{libdir}/passthrough:{libdir}:" + env.get("LD_LIBRARY_PATH", "")
    base = used_mib()
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], used_mib())
            time.sleep(0.05)

    t = threading.Thread(target=sample)
    t.start()
    p = subprocess.run([sys.executable, "-c", JOB, ROOT, str(devices)], env=env, capture_output=True, text=True)
    done.set()
    t.join()
    if p.returncode != 0:
        print(p.stdout[-2000:], p.stderr[-2000:])
        raise SystemExit("job failed")
    virtual = int([l for l in p.stdout.splitlines() if l.startswith("VIRTUAL_RESERVED")][0].split()[1])
    return peak[0] - base, virtual >> 20


def main():
    libdir = os.path.abspath(sys.argv[1])
    real, real_virtual = run(1, {}, None)
    private, private_virtual = run(8, {}, libdir)
    shared, shared_virtual = run(8, {"VGPU_MEMORY_POLICY": "shared"}, libdir)
    print("Physical GPU memory of GPT-2 (12 layers, batch 8, seq 1024) trained on 8 devices:")
    print(f"{'run':46s} {'PyTorch reserved MiB':>21s} {'physical MiB':>13s} {'x real 1-GPU':>13s}")
    print(f"{'real GPU, 1 device, no vgpu (baseline)':46s} {real_virtual:21d} {real:13d} {1:13.2f}")
    print(f"{'vgpu, 8 virtual devices, private memory':46s} {private_virtual:21d} {private:13d} {private / real:13.2f}")
    print(f"{'vgpu, 8 virtual devices, shared pages':46s} {shared_virtual:21d} {shared:13d} {shared / real:13.2f}")


if __name__ == "__main__":
    main()
