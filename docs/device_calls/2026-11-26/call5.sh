#!/usr/bin/env bash
# Session 2026-11-26b, call 5 (budget's end): one GPU with and without the driver-time table, same call; record->replay 2 ranks as the recording's GPU model.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/rec
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model H200-141GB --no-summary)
( OUT=$O/rec VGPU_PHYSICAL_DEVICES=1 RECORD_GPUS=2 RECORD_ARGS="--steps 6 --warmup 4" taskset -c 8-15 timeout 90 tests/gpu/sim_torch record > $O/rec/r2.txt 2>&1 ) &
for side in real table none; do
  if [ $side = real ]; then CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 40 python3 tests/gpu/fidelity/train_step.py single --steps 8 --warmup 4 2>&1 | grep RESULT | cut -c1-200 | sed "s/^/$side: /"
  else VGPU_DRIVER_TIME=$side VGPU_PHYSICAL_DEVICES=0 taskset -c 0-7 timeout 45 "${vrun[@]}" --gpus 1 -- python3 tests/gpu/fidelity/train_step.py single --steps 8 --warmup 4 2>&1 | grep RESULT | cut -c1-200 | sed "s/^/$side: /"; fi
  echo "t=$((SECONDS-T0))"
done
wait; grep -E "==|DDP step|vgpu-run:" $O/rec/r2.txt | cut -c1-200 | head -8
echo "t=$((SECONDS-T0))"
