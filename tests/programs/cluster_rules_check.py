"""The sim backend answers query_trace_program's questions as a real H200 did: every "answer ..."
line of the program on a virtual H200-141GB equals the line the real driver gave (an H200,
driver 580.159.04, measured 2026-11-26 under the passthrough by tests/gpu/probe/cublaslt_queries;
recorded in data/query_trace_program_h200_580.txt). Among them the cluster rules, where the
real driver departs from cuda.h:

- cuOccupancyMaxActiveClusters of a kernel with no required cluster and a config with no cluster
  size is 0, not an error; a kernel with a required cluster (.reqnctapercluster 2,1,1) is answered
  for that cluster (66) and a config whose cluster differs is refused (912);
- cuOccupancyMaxPotentialClusterSize refuses such a config too (912), though cuda.h says it
  ignores the config's cluster; it is 8, or 16 with NON_PORTABLE_CLUSTER_SIZE_ALLOWED;
- clusters of 17 fit (2 at one block per SM), of 32 none;
- CLUSTER_SIZE_MUST_BE_SET of a kernel compiled with a cluster is 0;
- cuOccupancyAvailableDynamicSMemPerBlock does not take the reserved shared memory off (116736
  for 2 blocks), and an empty PTX kernel has 4 registers.

    cluster_rules_check.py PROGRAM SIM_LIBDIR RECORDED_ANSWERS
"""
import os
import subprocess
import sys

program, libdir, recorded = sys.argv[1:4]
env = dict(os.environ, LD_LIBRARY_PATH=libdir, VGPU_GPU_MODEL="H200-141GB", VGPU_GPUS_PER_NODE="1", VGPU_NODES="1")
env.pop("VGPU_QUERY_TRACE", None)
out = subprocess.run([program], env=env, capture_output=True, text=True, timeout=60)
if out.returncode != 0:
    sys.exit(f"query_trace_program failed ({out.returncode}): {out.stderr[-2000:]}")
got = [l for l in out.stdout.splitlines() if l.startswith("answer ")]
want = [l for l in open(recorded).read().splitlines() if l.startswith("answer ")]
bad = 0
for i, w in enumerate(want):
    g = got[i] if i < len(got) else "(none)"
    if g != w:
        bad += 1
        print(f"FAIL line {i + 1}: the H200 said '{w}', the sim '{g}'")
print(f"{len(want) - bad} of {len(want)} answers as the H200 gave them")
# Questions added to the program after the recording: the sim's answer, to compare by hand with
# the next GPU run's.
for line in got[len(want):]:
    print(f"not measured yet, the sim: {line}")
sys.exit(1 if bad else 0)
