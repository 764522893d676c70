#!/usr/bin/env bash
# Session 2026-11-26d, call 2 (fff106d: hand-overs through condition variables): FSDP2 and DDP on
# 2 ranks (real on both GPUs, vgpu 2 virtual H200s on GPU 0), one GPU eager, 8 virtual GPUs
# unpinned and pinned to one core per rank, each vgpu run with the clock report; then nccl-tests
# all_gather and all_reduce.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/f $O/e0 $O/e1 $O/n
VGPU_CLOCK_REPORT=$O/f/clk.jsonl ONLY="fsdp2 ddp" RUNS=2 OUT=$O/f taskset -c 0-15 timeout 260 tests/gpu/fidelity/run .device > $O/f/out.txt 2>&1
echo "fsdp2+ddp t=$((SECONDS-T0))"
VGPU_CLOCK_REPORT=$O/e0/clk.jsonl ONLY="eight single" RUNS_SINGLE=1 OUT=$O/e0 taskset -c 0-15 timeout 200 tests/gpu/fidelity/run .device > $O/e0/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
[ $((SECONDS-T0)) -lt 420 ] && PIN_CORES_PER_RANK=1 VGPU_CLOCK_REPORT=$O/e1/clk.jsonl ONLY=eight OUT=$O/e1 taskset -c 0-15 timeout 110 tests/gpu/fidelity/run .device > $O/e1/out.txt 2>&1
echo "pin1 t=$((SECONDS-T0))"
[ $((SECONDS-T0)) -lt 500 ] && ONLY=nccl NCCL_OPS="all_gather all_reduce" NCCL_TESTS=.gpu/nccl-tests OUT=$O/n taskset -c 0-15 timeout $((580-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/n/out.txt 2>&1
echo "nccl t=$((SECONDS-T0))"
for d in f e0 e1 n; do echo "== $d"; grep -E "^vgpu|^real|predicted|FAIL|%" $O/$d/out.txt | cut -c1-420; done
cd $O && tar czf all.tgz f e0 e1 n && rm -rf f e0 e1 n
