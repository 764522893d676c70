#!/usr/bin/env bash
# Session 2026-11-26g, call 1: the call-rate bench on a9dc99e (callcost4/5 complete); 8 ranks on one
# GPU time-sliced (default) and as clients of a private MPS daemon (vgpu-run --mps), each with the
# ranged clock report (train_step.py marks its timed steps) beside its 1-GPU twin.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/ts $O/mps
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 40 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt
for m in ts mps; do
  args=""; [ $m = mps ] && args=--mps
  VRUN_ARGS=$args VGPU_CLOCK_REPORT=$O/$m/clock_%p.jsonl ONLY=eight OUT=$O/$m timeout 200 tests/gpu/fidelity/run .device > $O/$m/out.txt 2>&1
  echo "== $m t=$((SECONDS-T0))"
  grep -E "predicted|FAIL|%|rror" $O/$m/out.txt | cut -c1-300 | head -20
  grep -o '"steps_ms": \[[^]]*\]' $O/$m/out.txt; grep -ho '"wall_ms": [0-9.]*' $O/$m/out.txt
  grep -ho '"ranks_host_ms": .*\]\]' $O/$m/*.log | cut -c1-600
  grep -ho '"host_ms": {[^}]*}' $O/$m/*.log | cut -c1-400
  cat $O/$m/clock_*.jsonl 2>/dev/null | python3 -c '
import json,sys
rows=[json.loads(l) for l in sys.stdin if l.strip()]
for r in rows:
    if r.get("cpu_s",0)+r.get("handoff_s",0)+r.get("horizon_s",0)+r.get("sync_s",0) > 0.005:
        print(r["pid"], r["name"][:16].ljust(16), " ".join(f"{k}={r[k]:.4f}" if isinstance(r[k],float) else f"{k}={r[k]}" for k in ("calls","cpu_s","driver_s","sync_s","poll_s","horizon_s","handoff_s","raised_s","dropped_s") if k in r))'
done
ls $O/ts $O/mps | head -40; du -sh $O
