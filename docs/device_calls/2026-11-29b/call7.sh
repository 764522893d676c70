#!/usr/bin/env bash
# Twenty-sixth session, call 7, one H200: the virtual timelines (VGPU_TIMELINE) of the DDP step on 8
# processes of the passthrough and of the one-GPU step, a few steps each, to see what makes the
# 8-process optimizer phase ~3x the one-GPU one (calls 4-6: 2.65-3.98 ms against 1.02-1.05).
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 1 --timeline $O/one.trace.json -- python3 $S single --batch 8 --seq 1024 --steps 3 --warmup 3 > $O/one.log 2>&1
grep -m1 '^RESULT' $O/one.log | cut -c1-160; echo "== one t=$((SECONDS-T0))"
VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 8 --mps --timeline $O/eight.trace.json -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 3 --warmup 3 > $O/eight.log 2>&1
grep -m1 '^RESULT' $O/eight.log | cut -c1-160; echo "== eight t=$((SECONDS-T0))"
ls -la $O; gzip -6 $O/*.json
cd $OUT && tar czf all.tgz r && rm -rf r
