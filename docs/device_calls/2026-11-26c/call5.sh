#!/usr/bin/env bash
# Session 2026-11-26c, call 5 (final tree): the whole fidelity table in one run (nccl-tests, DDP,
# FSDP2, one GPU eager and compiled, 8 virtual GPUs); beside it PyTorch DDP on 64 virtual GPUs of
# the sim backend (cores 16-31, no GPU) and, once the table's one-GPU part starts (GPU 1 free),
# record -> replay at 2 ranks and the call-overhead bench on GPU 1.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/fid $O/scale $O/rec $O/g1
real=/usr/local/nvidia/lib64/libcuda.so.1
( SCALE_LOG=$O/scale/s64.log VGPU_SIM_MEMORY_REPORT=$O/scale/mem.jsonl taskset -c 16-31 timeout 300 python3 tests/gpu/sim_torch_scale.py 64 > $O/scale/summary.txt 2>&1 ) &
SC=$!
( while ! grep -q '^real single\|^vgpu single' $O/fid/out.txt 2>/dev/null; do sleep 2; [ $((SECONDS-T0)) -gt 520 ] && exit 0; done
  while kill -0 $SC 2>/dev/null; do sleep 2; done
  CUDA_VISIBLE_DEVICES=1 taskset -c 16-23 timeout 60 .device/bench/passthrough_call_overhead $real $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin > $O/g1/overhead.txt 2>&1
  OUT=$O/rec VGPU_PHYSICAL_DEVICES=1 RECORD_GPUS=2 RECORD_ARGS="--steps 6 --warmup 4" taskset -c 16-31 timeout $((540-(SECONDS-T0))) tests/gpu/sim_torch record > $O/rec/r2.txt 2>&1 ) &
BG=$!
ONLY="nccl ddp fsdp2 single eight" RUNS=1 NCCL_TESTS=.gpu/nccl-tests OUT=$O/fid taskset -c 0-15 timeout $((560-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/fid/out.txt 2>&1
echo "fidelity t=$((SECONDS-T0))"
tail -62 $O/fid/out.txt
wait $BG; tail -6 $O/g1/overhead.txt; grep -E "DDP step|by cause" $O/rec/r2.txt | cut -c1-250
wait $SC; cut -c1-400 $O/scale/summary.txt | tail -3
echo "t=$((SECONDS-T0))"
cd $O && tar czf all.tgz fid scale rec g1 && rm -rf fid scale rec g1
