#!/usr/bin/env bash
# Session 2026-11-26e, call 7: contexts sharing the GPU wait blocking (no spinning synchronize):
# the 8-GPU row with every rank's host phases, then DDP on 2 ranks (real beside it).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/u $O/d
ONLY=eight OUT=$O/u timeout 120 tests/gpu/fidelity/run .device > $O/u/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
ONLY=ddp RUNS=1 OUT=$O/d timeout 80 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "ddp t=$((SECONDS-T0))"
for d in u d; do echo "== $d"; grep -E "predicted|FAIL|%" $O/$d/out.txt | cut -c1-300; grep -o '"steps_ms": \[[^]]*\]' $O/$d/out.txt; grep -ho '"wall_ms": [0-9.]*' $O/$d/out.txt; grep -ho '"ranks_host_ms": .*\]\]' $O/$d/*.log; done
cd $OUT && tar czf all.tgz r && rm -rf r
