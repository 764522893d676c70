#!/usr/bin/env bash
# Session 2026-11-27 (eleventh), call 4 (tree of call 3): the call-rate bench twice (call 1 read launch
# 0.83-0.85x, alloc 0.83x, against 0.89-0.99x in the tenth session: noise or a regression?); the
# fidelity table: nccl-tests 64 KiB-16 MiB, DDP and FSDP2 two runs each; the 1-GPU rows if time is left.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d
for i in 1 2; do
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 50 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench$i.txt 2>&1
echo "bench $i t=$((SECONDS-T0))"; tail -9 $O/bench$i.txt | head -7
done
ONLY="nccl ddp fsdp2" NCCL_MAX=16M RUNS=2 NCCL_TESTS=.gpu/nccl-tests OUT=$O/d timeout $((570-SECONDS+T0)) tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== d t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-200
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
