#!/usr/bin/env bash
# Session 2026-11-26h, call 5: which virtual devices each rank of an 8-rank DDP job makes real
# contexts for (the info log's "a real context for virtual device"), without and with --mps
# (the seventh session: 5 of 8 ranks refused with CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, 808).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
for m in plain mps; do
  extra=(); [ $m = mps ] && extra=(--mps)
  VGPU_LOG_LEVEL=info VGPU_PHYSICAL_DEVICES=0 timeout 100 "${vrun[@]}" "${extra[@]}" --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 1 --seq 256 --steps 2 --warmup 1 > $O/$m.log 2>&1
  echo "== $m rc=$? t=$((SECONDS-T0))"; grep -E "RESULT" $O/$m.log | cut -c1-200
  grep -o "\[vgpu [0-9]*:[0-9]* info\] passthrough: a real context for virtual device [0-9]* on GPU [0-9] ([a-z' ]*)" $O/$m.log | sed 's/:[0-9]* info\]/]/' | sort | uniq -c | head -40
  grep -E "error 8|808|MPS|Traceback" $O/$m.log | sort | uniq -c | head -8 | cut -c1-250
done
cd $OUT && tar czf all.tgz r
