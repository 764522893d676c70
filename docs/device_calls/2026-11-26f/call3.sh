#!/usr/bin/env bash
# Session 2026-11-26f, call 3: where each thread's virtual time comes from on 8 ranks against the
# 1-GPU twin (VGPU_CLOCK_REPORT), blocking waits on; DDP and FSDP2 on 2 ranks twice with blocking
# waits (real beside) for the spread; is MPS there, what time slice the GPU uses (read only).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/eight $O/d
which nvidia-cuda-mps-control nvidia-smi; nvidia-smi -q 2>/dev/null | grep -i -A2 "slice\|compute mode" | head
VGPU_SHARED_GPU_BLOCKING=1 VGPU_CLOCK_REPORT=$O/eight/clock_%p.jsonl ONLY=eight OUT=$O/eight timeout 130 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
VGPU_SHARED_GPU_BLOCKING=1 ONLY="ddp fsdp2" RUNS=2 OUT=$O/d timeout 260 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "ddp fsdp2 t=$((SECONDS-T0))"
for d in eight d; do echo "== $d"; grep -E "predicted|FAIL|%" $O/$d/out.txt | cut -c1-300; grep -o '"steps_ms": \[[^]]*\]' $O/$d/out.txt; grep -ho '"wall_ms": [0-9.]*' $O/$d/out.txt; grep -ho '"ranks_host_ms": .*\]\]' $O/$d/*.log | cut -c1-700; done
cat $O/eight/clock_*.jsonl | python3 -c '
import json,sys
rows=[json.loads(l) for l in sys.stdin if l.strip()]
for r in rows:
    if r["cpu_s"]+r["handoff_s"]+r["horizon_s"]+r["sync_s"] > 0.05:
        print(r["pid"], r["name"][:16].ljust(16), " ".join(f"{k}={r[k]:.3f}" for k in ("calls","cpu_s","driver_s","sync_s","poll_s","horizon_s","handoff_s","dropped_s")))'
cd $OUT && tar czf all.tgz r && rm -rf r
