#!/usr/bin/env bash
# Session 2026-11-26h, call 3 (fe203bd + 30 timed steps a run): DDP and FSDP2 on 2 ranks, two runs
# of each side alternating, 30 steps each (the median of 10 moved by 10-30% within a call); the
# 8-rank row, and the 2-rank vgpu DDP at its shape beside it (each rank's host phases, 2 against 8).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d $O/eight $O/b4
ONLY="ddp fsdp2" RUNS=2 OUT=$O/d timeout 330 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== ddp fsdp2 t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-300
ONLY=eight OUT=$O/eight timeout 150 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "== eight t=$((SECONDS-T0))"; grep -E "predicted|FAIL|ddp x" $O/eight/out.txt | cut -c1-300
left=$((570-SECONDS+T0)); echo "left $left"
[ $left -gt 60 ] && STEP_ARGS="--batch 4 --steps 6 --warmup 3" ONLY=ddp RUNS=1 OUT=$O/b4 timeout $left tests/gpu/fidelity/run .device > $O/b4/out.txt 2>&1
echo "== b4 t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/b4/out.txt | cut -c1-300
for f in $O/eight/ddp_vgpu_*.log $O/b4/ddp_vgpu_*.log; do echo $f; grep RESULT $f | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print(d['world'], d['step_ms'], d['forward_ms'], d['backward_ms'])
for r in d['ranks_host_ms']: print('  ', r)"; done
cd $OUT && tar czf all.tgz r
