#!/usr/bin/env bash
# Session 2026-11-26f, call 2: which launches keep being measured (VGPU_LOG_LEVEL=debug prints each
# measured sample with its signature) on 1 GPU and on 8 ranks; what cuBLASLt asks (sim vs GPU);
# record -> replay at 2 ranks.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/one $O/eight $O/q $O/rec
VGPU_LOG_LEVEL=debug ONLY=single RUNS=1 OUT=$O/one timeout 100 tests/gpu/fidelity/run .device > $O/one/out.txt 2>&1
echo "single t=$((SECONDS-T0))"
VGPU_SHARED_GPU_BLOCKING=1 VGPU_LOG_LEVEL=debug ONLY=eight OUT=$O/eight timeout 120 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
OUT=$O/q timeout 150 tests/gpu/probe/cublaslt_queries > $O/q/out.txt 2>&1
echo "queries t=$((SECONDS-T0))"
OUT=$O/rec timeout 200 tests/gpu/sim_torch record > $O/rec/out.txt 2>&1
echo "record t=$((SECONDS-T0))"
for d in one eight; do echo "== $d"; grep -E "predicted|FAIL|%" $O/$d/out.txt | cut -c1-300; grep -o '"steps_ms": \[[^]]*\]' $O/$d/out.txt; grep -ho '"wall_ms": [0-9.]*' $O/$d/out.txt
  for f in $O/$d/*.log; do grep -h "measured .* us (first" $f | gzip > $f.measured.gz; grep -v "measured .* us (first" $f > $f.rest; rm $f; done; ls -la $O/$d; done
echo "== queries"; tail -40 $O/q/out.txt | cut -c1-250
echo "== record"; tail -30 $O/rec/out.txt | cut -c1-250
rm -rf $O/q/*.jsonl 2>/dev/null; du -sh $O/*
cd $OUT && tar czf all.tgz r && rm -rf r
