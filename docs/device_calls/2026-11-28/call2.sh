#!/usr/bin/env bash
# Nineteenth session, call 2 (issue 18: does the NCCL plugin's host copying slow vgpu's FSDP2 ranks?):
# FSDP2 of GPT-2 small, real on both GPUs against vgpu with 2 virtual GPUs on GPU 0, each rank on 8
# cores of its own, 30 timed steps; two rounds, each: real, vgpu (main's tree), real, vgpu with an
# experimental plugin that moves no payload bytes through its shared-memory ring (.device-np, env
# VGPU_EXPERIMENT_NO_PAYLOAD=1: the job's numbers are wrong, its work the same). top -H samples every 5 s
# (the busiest threads), and every run's log kept (each rank's host clock, thread CPU and process CPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; mkdir -p $OUT/r
nvidia-smi -L; uptime
(top -H -b -d 5 -n 70 -o %CPU -w 200 | awk '/^top -/{n=0} {n++; if (n<=22) print}' > $OUT/r/top.txt) &
for i in 1 2; do
  echo "== round $i t=$((SECONDS-T0))"
  PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="fsdp2" RUNS=1 OUT=$OUT/r/a$i timeout 150 tests/gpu/fidelity/run .device 2>&1 | grep -v '^ ' | cut -c1-200
  echo "-- np t=$((SECONDS-T0))"
  VGPU_EXPERIMENT_NO_PAYLOAD=1 PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="fsdp2" RUNS=1 OUT=$OUT/r/b$i timeout 150 tests/gpu/fidelity/run .device-np 2>&1 | grep -v '^ ' | cut -c1-200
done
kill %1 2>/dev/null
echo "== t=$((SECONDS-T0))"
python3 - "$OUT/r" <<'PY'
import json, glob, sys, os
for f in sorted(glob.glob(sys.argv[1] + "/*/results.jsonl")):
    for l in open(f):
        d = json.loads(l)
        if d.get("kind") != "step": continue
        print(os.path.basename(os.path.dirname(f)), d["side"], "step", d["step_ms"], "proc_cpu", d.get("ranks_process_cpu_ms"),
              "host", d.get("ranks_host_ms"), "probe", [round(sorted(p)[len(p)//2], 2) for p in d.get("ranks_probe_ms", [])])
PY
cd $OUT && tar czf all.tgz r && rm -rf r
