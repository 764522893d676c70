#!/usr/bin/env bash
# Session 2026-11-26d, call 3 (fff106d + the GPU-bound 8-GPU shape): 8 virtual GPUs at batch
# 4 x 1024 a rank with its 1-GPU twin (timeline kept), then the other four nccl-tests collectives.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/e $O/n
VGPU_CLOCK_REPORT=$O/e/clk.jsonl TIMELINE=1 ONLY=eight OUT=$O/e taskset -c 0-15 timeout 240 tests/gpu/fidelity/run .device > $O/e/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
ONLY=nccl NCCL_OPS="reduce_scatter broadcast sendrecv alltoall" NCCL_TESTS=.gpu/nccl-tests OUT=$O/n taskset -c 0-15 timeout $((570-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/n/out.txt 2>&1
echo "nccl t=$((SECONDS-T0))"
for d in e n; do echo "== $d"; grep -E "^vgpu|^real|predicted|FAIL|%" $O/$d/out.txt | cut -c1-420; done
cd $O && tar czf all.tgz e n && rm -rf e n
