"""The sim backend's cuOccupancyMaxActiveClusters against the real H200's answers
(tests/cluster/data/h200_real_clusters.txt): runs tests/cluster/probe_clusters.cpp over the sim's
libcuda.so.1 as a virtual H200 and compares every line.

    clusters_match_real.py PROBE SIM_LIBDIR REAL_ANSWERS
"""
import os
import subprocess
import sys

probe, libdir, real = sys.argv[1:4]
env = dict(os.environ, LD_LIBRARY_PATH=libdir, VGPU_GPU_MODEL="H200-141GB", VGPU_GPUS_PER_NODE="1")
out = subprocess.run([probe], env=env, capture_output=True, text=True, timeout=60)
if out.returncode != 0:
    sys.exit(f"probe failed ({out.returncode}): {out.stderr}")
sim = [l for l in out.stdout.splitlines() if l.startswith("clusters ")]
want = [l for l in open(real).read().splitlines() if l.startswith("clusters ")]
bad = [(w, s) for w, s in zip(want, sim) if w != s]
if len(sim) != len(want) or bad:
    for w, s in bad:
        print(f"real: {w}\n sim: {s}")
    sys.exit(f"{len(bad)} of {len(want)} answers differ ({len(sim)} lines from the sim)")
print(f"{len(want)} answers as the real H200's")
