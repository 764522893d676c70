#!/usr/bin/env bash
# Session 2026-11-26e, call 5: why the 1-GPU twin of the 8-GPU row reads 24 ms in one run and 30 ms in
# another (its host forward phase doubles): three runs with the launch counts (VGPU_LAUNCH_STATS) and
# the clock report of every thread, then the 8-GPU row once with both.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model H200-141GB --no-summary)
args=(--batch 4 --seq 1024 --steps 6 --warmup 3)
for i in 1 2 3; do
  mkdir -p $O/s$i
  VGPU_LAUNCH_STATS=$O/s$i/stats.%p VGPU_CLOCK_REPORT=$O/s$i/clock.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 120 \
    "${vrun[@]}" --gpus 1 -- python3 tests/gpu/fidelity/train_step.py single "${args[@]}" > $O/s$i/out.txt 2>&1
  echo "single$i t=$((SECONDS-T0)) $(grep -o '"step_ms": [0-9.]*, "steps_ms": \[[^]]*\], "wall_ms": [0-9.]*, "forward_ms": [0-9.]*' $O/s$i/out.txt)"
  cat $O/s$i/stats.* ; echo
done
mkdir -p $O/e
VGPU_LAUNCH_STATS=$O/e/stats.%p VGPU_CLOCK_REPORT=$O/e/clock.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 200 \
  "${vrun[@]}" --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp "${args[@]}" > $O/e/out.txt 2>&1
echo "eight t=$((SECONDS-T0)) $(grep -o '"step_ms": [0-9.]*, "steps_ms": \[[^]]*\]' $O/e/out.txt)"
for f in $O/e/stats.*; do cat $f; echo; done
cd $OUT && tar czf all.tgz r && rm -rf r
