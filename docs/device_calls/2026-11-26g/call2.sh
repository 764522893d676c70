#!/usr/bin/env bash
# Session 2026-11-26g, call 2: 8 ranks as clients of the job's MPS daemon (fixed: the daemon on the
# caller's environment), and DDP on 2 ranks at the 8-rank row's per-rank batch (4 x 1024), real on
# both GPUs beside vgpu on GPU 0: is the 8-rank row's backward host time DDP's own (real too)?
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/mps $O/d4
summ() {
  grep -E "predicted|FAIL|%|rror" $1/out.txt | cut -c1-300 | head -20
  grep -o '"steps_ms": \[[^]]*\]' $1/out.txt; grep -ho '"wall_ms": [0-9.]*' $1/out.txt
  grep -ho '"ranks_host_ms": .*\]\]' $1/*.log | cut -c1-600
  cat $1/clock_*.jsonl 2>/dev/null | python3 -c '
import json,sys
rows=[json.loads(l) for l in sys.stdin if l.strip()]
for r in rows:
    if r.get("cpu_s",0)+r.get("handoff_s",0)+r.get("horizon_s",0)+r.get("sync_s",0) > 0.005:
        print(r["pid"], r["name"][:16].ljust(16), " ".join(f"{k}={r[k]:.4f}" if isinstance(r[k],float) else f"{k}={r[k]}" for k in ("calls","cpu_s","sync_s","horizon_s","handoff_s","raised_s") if k in r))'
}
VRUN_ARGS=--mps VGPU_CLOCK_REPORT=$O/mps/clock_%p.jsonl ONLY=eight OUT=$O/mps timeout 200 tests/gpu/fidelity/run .device > $O/mps/out.txt 2>&1
echo "== mps t=$((SECONDS-T0))"; summ $O/mps
ls /tmp/vgpu* 2>/dev/null | head; grep -rh "" $(find / -path /proc -prune -o -name "control.log" -path "*mps*" -print 2>/dev/null | head -2) 2>/dev/null | tail -5
STEP_ARGS="--batch 4" VGPU_CLOCK_REPORT=$O/d4/clock_%p.jsonl ONLY=ddp RUNS=2 OUT=$O/d4 timeout 330 tests/gpu/fidelity/run .device > $O/d4/out.txt 2>&1
echo "== d4 t=$((SECONDS-T0))"; summ $O/d4
cd $OUT && tar czf all.tgz r
