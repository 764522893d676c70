#!/usr/bin/env bash
# Session 2026-11-26d, call 4 (3a905b1): VGPU_NCCL_GATE=1 on the 8-GPU row (batch 4 x 1024, its
# 1-GPU twin; timeline kept), then DDP and FSDP2 on 2 ranks and nccl-tests all-reduce/all-gather
# with the gate, real beside each.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/e $O/f $O/n
export VGPU_NCCL_GATE=1
TIMELINE=1 ONLY=eight OUT=$O/e taskset -c 0-15 timeout 200 tests/gpu/fidelity/run .device > $O/e/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
ONLY="ddp fsdp2" RUNS=1 OUT=$O/f taskset -c 0-15 timeout 150 tests/gpu/fidelity/run .device > $O/f/out.txt 2>&1
echo "ddp+fsdp2 t=$((SECONDS-T0))"
[ $((SECONDS-T0)) -lt 330 ] && ONLY=nccl NCCL_OPS="all_reduce all_gather" NCCL_TESTS=.gpu/nccl-tests OUT=$O/n taskset -c 0-15 timeout $((400-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/n/out.txt 2>&1
echo "nccl t=$((SECONDS-T0))"
for d in e f n; do echo "== $d"; grep -E "^vgpu|^real|predicted|FAIL|%" $O/$d/out.txt | cut -c1-330; done
grep -h "GATE\|gate" $O/e/*.log | sort | uniq -c | head -5
cd $O && tar czf all.tgz e f n && rm -rf e f n
