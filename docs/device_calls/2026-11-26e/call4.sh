#!/usr/bin/env bash
# Session 2026-11-26e, call 4 (merged simquery): what cuBLASLt asks on the GPU and on the sim
# (tests/gpu/probe/cublaslt_queries), then the 8-GPU row twice (its 1-GPU twin each time) for the
# spread after calls 2-3's changes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/e1 $O/e2
OUT=$O/cq timeout 240 tests/gpu/probe/cublaslt_queries > $O/cq.txt 2>&1
echo "cq rc=$? t=$((SECONDS-T0))"
for i in 1 2; do
  ONLY=eight OUT=$O/e$i timeout 170 tests/gpu/fidelity/run .device > $O/e$i/out.txt 2>&1
  echo "eight$i t=$((SECONDS-T0))"
done
for d in e1 e2; do echo "== $d"; grep -E "predicted|FAIL" $O/$d/out.txt | cut -c1-300; grep -o '"steps_ms": \[[^]]*\]' $O/$d/out.txt; done
tail -c 5000 $O/cq.txt
cd $OUT && tar czf all.tgz r && rm -rf r
