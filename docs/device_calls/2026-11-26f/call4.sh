#!/usr/bin/env bash
# Session 2026-11-26f, call 4: only threads that issued work raise a device's horizon
# (VGPU_HORIZON=submitters) against the rule before (all), on 8 ranks with each thread's clock
# report (raised_s: who pushed the horizon); then DDP on 2 ranks with it (real beside).
# Blocking waits on shared GPUs are the default from this build.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/sub $O/all $O/d
VGPU_HORIZON=submitters VGPU_CLOCK_REPORT=$O/sub/clock_%p.jsonl ONLY=eight OUT=$O/sub timeout 130 tests/gpu/fidelity/run .device > $O/sub/out.txt 2>&1
echo "eight submitters t=$((SECONDS-T0))"
VGPU_CLOCK_REPORT=$O/all/clock_%p.jsonl ONLY=eight OUT=$O/all timeout 130 tests/gpu/fidelity/run .device > $O/all/out.txt 2>&1
echo "eight all t=$((SECONDS-T0))"
VGPU_HORIZON=submitters ONLY="ddp fsdp2" RUNS=1 OUT=$O/d timeout 200 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "ddp fsdp2 submitters t=$((SECONDS-T0))"
for d in sub all d; do echo "== $d"; grep -E "predicted|FAIL|%" $O/$d/out.txt | cut -c1-300; grep -o '"steps_ms": \[[^]]*\]' $O/$d/out.txt; grep -ho '"wall_ms": [0-9.]*' $O/$d/out.txt; grep -ho '"ranks_host_ms": .*\]\]' $O/$d/*.log | cut -c1-700
  cat $O/$d/clock_*.jsonl 2>/dev/null | python3 -c '
import json,sys
rows=[json.loads(l) for l in sys.stdin if l.strip()]
for r in rows:
    if r["cpu_s"]+r["handoff_s"]+r["horizon_s"]+r["sync_s"]+r["raised_s"] > 0.05:
        print(r["pid"], r["name"][:16].ljust(16), " ".join(f"{k}={r[k]:.3f}" for k in ("calls","cpu_s","sync_s","poll_s","horizon_s","handoff_s","dropped_s","raised_s")))'; done
cd $OUT && tar czf all.tgz r && rm -rf r
