"""The sim backend follows the cluster-query rules cuda.h documents (query_trace_program's
"edge-..." answers, on a virtual H200):

- cuOccupancyMaxActiveClusters of a kernel with a required cluster (.reqnctapercluster 2,1,1)
  answers for that cluster when the config names none (66, as for an asked cluster of 2), and
  refuses a config whose cluster differs (CUDA_ERROR_INVALID_CLUSTER_SIZE, 912); a kernel without
  one must be given a cluster size ("else the function will return an error");
- cuOccupancyMaxPotentialClusterSize ignores the config's cluster, reflects a required cluster
  (2), and is the portable 8 unless the kernel allows non-portable sizes (then 16: clusters of 16
  fit on the measured H200, 7 of them at one block per SM);
- sizes past 16 fit nowhere (0), as cuBLAS's probes up to 32 expect.

    cluster_rules_check.py PROGRAM SIM_LIBDIR
"""
import os
import subprocess
import sys

program, libdir = sys.argv[1:3]
env = dict(os.environ, LD_LIBRARY_PATH=libdir, VGPU_GPU_MODEL="H200-141GB", VGPU_GPUS_PER_NODE="1", VGPU_NODES="1")
env.pop("VGPU_QUERY_TRACE", None)
out = subprocess.run([program], env=env, capture_output=True, text=True, timeout=60)
if out.returncode != 0:
    sys.exit(f"query_trace_program failed ({out.returncode}): {out.stderr[-2000:]}")
got = {}
for line in out.stdout.splitlines():
    _, question, answer = line.split(" ", 2)
    got[question] = answer
want = {
    "edge-clusters-no-cluster-attribute": "error 912",
    "edge-potential-size-portable": "8",
    "edge-potential-size-non-portable": "16",
    "edge-clusters-size-16": "7",
    "edge-clusters-size-17": "0",
    "edge-clusters-size-32": "0",
    "edge-required-width": "2",
    "edge-cluster-must-be-set": "1",
    "edge-required-clusters-no-attribute": "66",
    "edge-required-clusters-same-size": "66",
    "edge-required-clusters-other-size": "error 912",
    "edge-required-potential-size": "2",
}
bad = [(q, w, got.get(q)) for q, w in want.items() if got.get(q) != w]
for q, w, g in bad:
    print(f"FAIL {q}: want {w}, the sim answered {g}")
print(f"{len(want) - len(bad)} of {len(want)} cluster rules as documented")
sys.exit(1 if bad else 0)
