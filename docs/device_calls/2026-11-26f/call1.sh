#!/usr/bin/env bash
# Session 2026-11-26f, call 1: contexts sharing the GPU wait blocking (VGPU_SHARED_GPU_BLOCKING=1)
# against spinning, on the 8-GPU row (with every rank's host phases), then DDP and FSDP2 on 2 ranks
# with it (real beside), then the call-rate bench.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/b $O/s $O/d
VGPU_SHARED_GPU_BLOCKING=1 ONLY=eight OUT=$O/b timeout 150 tests/gpu/fidelity/run .device > $O/b/out.txt 2>&1
echo "eight blocking t=$((SECONDS-T0))"
ONLY=eight OUT=$O/s timeout 150 tests/gpu/fidelity/run .device > $O/s/out.txt 2>&1
echo "eight spinning t=$((SECONDS-T0))"
VGPU_SHARED_GPU_BLOCKING=1 ONLY="ddp fsdp2" RUNS=1 OUT=$O/d timeout 200 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "ddp fsdp2 blocking t=$((SECONDS-T0))"
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -15 $O/bench.txt
for d in b s d; do echo "== $d"; grep -E "predicted|FAIL|%" $O/$d/out.txt | cut -c1-300; grep -o '"steps_ms": \[[^]]*\]' $O/$d/out.txt; grep -ho '"wall_ms": [0-9.]*' $O/$d/out.txt; grep -ho '"ranks_host_ms": .*\]\]' $O/$d/*.log | cut -c1-600; done
cd $OUT && tar czf all.tgz r && rm -rf r
