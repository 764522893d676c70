#!/usr/bin/env bash
# Session 2026-11-27, call 7 (train_step.py now reads VGPU_LAUNCH_STATS after every step): launches
# measured on the GPU per step and rank, 8-rank DDP (batch 4 x 1024, --mps) and 2-rank DDP (batch 8),
# 12 steps after 3 of warm-up: does measuring stop once the shapes repeat?
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model)
VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --mps --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 4 --seq 1024 --steps 12 --warmup 3 > $O/e8.log 2>&1
echo "== e8 rc=$? t=$((SECONDS-T0))"
VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 12 --warmup 3 > $O/d2.log 2>&1
echo "== d2 rc=$? t=$((SECONDS-T0))"
for f in $O/e8.log $O/d2.log; do
  grep -E "kernel launches with a signature" $f | cut -c1-200
  grep '^RESULT' $f | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print('step', d['step_ms'], 'wall', d['wall_ms'], 'launches/step', d.get('launches_per_step'))
for r in d.get('ranks_measured_per_step', []): print('  measured per step', r)" || tail -5 $f
done
cd $OUT && tar czf all.tgz r
