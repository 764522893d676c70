#!/usr/bin/env bash
# Session 2026-11-26e, call 6: the 8-GPU row with every rank's host phases (ranks_host_ms), unpinned
# and with one core a rank (PIN_CORES_PER_RANK=1).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/u $O/p
ONLY=eight OUT=$O/u timeout 170 tests/gpu/fidelity/run .device > $O/u/out.txt 2>&1
echo "unpinned t=$((SECONDS-T0))"
PIN_CORES_PER_RANK=1 ONLY=eight OUT=$O/p timeout 170 tests/gpu/fidelity/run .device > $O/p/out.txt 2>&1
echo "pinned t=$((SECONDS-T0))"
for d in u p; do echo "== $d"; grep -E "predicted|FAIL" $O/$d/out.txt | cut -c1-300; grep -o '"steps_ms": \[[^]]*\]' $O/$d/out.txt; grep -ho '"ranks_host_ms": .*\]\]' $O/$d/*.log; done
cd $OUT && tar czf all.tgz r && rm -rf r
