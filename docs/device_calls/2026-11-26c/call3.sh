#!/usr/bin/env bash
# Session 2026-11-26c, call 3 (main 98e3d80: the H200's own collective fit): record -> replay of
# DDP at 2 and 8 ranks on GPU 1 (the replay as the recording's GPU model); on GPU 0 the one-GPU
# step with and without the driver-time table beside the real one, torch.compile, and DDP on 8
# virtual GPUs with its timeline.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/rec $O/one $O/eight
( OUT=$O/rec VGPU_PHYSICAL_DEVICES=1 RECORD_GPUS=2 RECORD_ARGS="--steps 6 --warmup 4" taskset -c 8-15 timeout 150 tests/gpu/sim_torch record > $O/rec/r2.txt 2>&1
  OUT=$O/rec VGPU_PHYSICAL_DEVICES=1 RECORD_GPUS=8 RECORD_ARGS="--batch 4 --seq 512 --steps 4 --warmup 4" taskset -c 8-15 timeout $((400-(SECONDS-T0))) tests/gpu/sim_torch record > $O/rec/r8.txt 2>&1 ) &
RP=$!
ONLY=driver_time RUNS_SINGLE=2 OUT=$O/one taskset -c 0-7 timeout 200 tests/gpu/fidelity/run .device > $O/one_out.txt 2>&1
grep -E "^(real|vgpu|FAIL)" $O/one_out.txt | cut -c1-330
echo "t=$((SECONDS-T0))"
ONLY=eight TIMELINE=1 OUT=$O/eight taskset -c 0-7 timeout $((400-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/eight_out.txt 2>&1
grep -E "^(real|vgpu|FAIL)|8 virtual" $O/eight_out.txt | cut -c1-330
echo "t=$((SECONDS-T0))"
wait $RP; echo "== record"; grep -E "==|DDP step|vgpu-run:|within|missing|new-kernel" $O/rec/r2.txt $O/rec/r8.txt | cut -c1-250 | head -30
echo "t=$((SECONDS-T0))"
cd $O && tar czf all.tgz rec one eight *.txt && rm -rf rec one eight
