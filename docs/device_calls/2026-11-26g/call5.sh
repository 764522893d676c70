#!/usr/bin/env bash
# Session 2026-11-26g, call 5: the 8-rank row with the CPU clock read exactly on every call
# (VGPU_CPU_CLOCK=exact) against the estimate, each beside its 1-GPU twin, with the clock report;
# then 2 ranks at batch 4 with it (real beside).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/est $O/exact $O/d4
cr() { cat $1/clock_*.jsonl 2>/dev/null | python3 -c '
import json,sys
rows=[json.loads(l) for l in sys.stdin if l.strip()]
for r in rows:
    if r["name"].startswith("pt_autograd"): print(r["pid"], r["name"], "calls", r["calls"], "cpu_s %.4f handoff_s %.4f" % (r["cpu_s"], r["handoff_s"]))'; }
for m in exact est; do
  [ $m = exact ] && export VGPU_CPU_CLOCK=exact || unset VGPU_CPU_CLOCK
  VGPU_CLOCK_REPORT=$O/$m/clock_%p.jsonl ONLY=eight OUT=$O/$m timeout 150 tests/gpu/fidelity/run .device > $O/$m/out.txt 2>&1
  echo "== $m t=$((SECONDS-T0))"; grep -E "predicted|FAIL" $O/$m/out.txt | cut -c1-300; grep -ho '"ranks_host_ms": .*\]\]' $O/$m/*.log | cut -c1-400; cr $O/$m
done
VGPU_CPU_CLOCK=exact VGPU_CLOCK_REPORT=$O/d4/clock_%p.jsonl STEP_ARGS="--batch 4" ONLY=ddp RUNS=1 OUT=$O/d4 timeout 120 tests/gpu/fidelity/run .device > $O/d4/out.txt 2>&1
echo "== d4 exact t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d4/out.txt | cut -c1-300; cr $O/d4
