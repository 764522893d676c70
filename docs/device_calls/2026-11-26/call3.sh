#!/usr/bin/env bash
# Session 2026-11-26b, call 3: smallest-sample settling + real driver time charged: DDP, FSDP2, single, nccl-tests subset; call overhead; step_time_runs on GPU 1.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/gpu1 $O/g0 $O/fid $O/single
real=/usr/local/nvidia/lib64/libcuda.so.1
( GPU=1 OUT=$O/gpu1 ONLY="step_time_runs" taskset -c 8-15 timeout 230 tests/gpu/run-gpu-tests .device/lib > $O/gpu1/summary.txt 2>&1 ) &
G1PID=$!
echo "== call overhead (real vs passthrough)"
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead $real $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin > $O/g0/overhead.txt 2>&1
tail -15 $O/g0/overhead.txt
echo "t=$((SECONDS-T0))"
CUDA_VISIBLE_DEVICES=0 ONLY="single" RUNS=2 OUT=$O/single taskset -c 0-7 timeout $((230-(SECONDS-T0))) tests/gpu/fidelity/run .device 2>&1 | grep -v "^real \|^vgpu " | tail -6
echo "t=$((SECONDS-T0))"
wait $G1PID; echo "== step_time_runs (GPU 1)"; grep -E "PASS|FAIL|passed" $O/gpu1/summary.txt | head -4; cat $O/gpu1/step_time.txt 2>/dev/null
echo "t=$((SECONDS-T0))"
NCCL_OPS="all_reduce all_gather sendrecv" ONLY="nccl ddp fsdp2" RUNS=2 NCCL_TESTS=.gpu/nccl-tests OUT=$O/fid timeout $((580-(SECONDS-T0))) tests/gpu/fidelity/run .device 2>&1 | grep -v "^real \|^vgpu " | tail -40
echo "t=$((SECONDS-T0))"
cd $O && tar czf all.tgz gpu1 g0 fid single && rm -rf gpu1 g0 fid single
