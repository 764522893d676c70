#!/usr/bin/env bash
# Twenty-seventh session, call 1, one H200 (issue 18 at 8 ranks): a function's first launch in its
# context now caps the job's launches of the same work (launch_api.cpp). Does the 8-process
# passthrough's optimizer phase (2.65-3.98 ms last session, against 1.02 real alone: the first
# ForeachBinaryOpScalar after the last bucket's all-reduce measured behind the other ranks' work in
# every step) come down to the one-GPU figure? The 8-process passthrough twice (16 timed steps), the
# one-GPU step under vgpu and real, then 3+3 steps of the 8 processes with their virtual timeline.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
show() { grep -m1 '^RESULT' "$1" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()[7:]); print(d["step_ms"], d["forward_ms"], d["backward_ms"], d["optimizer_ms"], d.get("steps_ms"), d.get("ranks_measured_per_step", [[]])[0])' 2>&1 | cut -c1-400; }
for k in 1 2; do
  VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/pt8_$k.log 2>&1
  show $O/pt8_$k.log; echo "== pt8_$k t=$((SECONDS-T0))"
done
VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 1 -- python3 $S single --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/one.log 2>&1
show $O/one.log; echo "== one t=$((SECONDS-T0))"
CUDA_VISIBLE_DEVICES=0 timeout 90 python3 $S single --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/real.log 2>&1
show $O/real.log; echo "== real t=$((SECONDS-T0))"
if [ $((SECONDS-T0)) -lt 420 ]; then
  VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 8 --mps --timeline $O/eight.trace.json -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 3 --warmup 3 > $O/eight.log 2>&1
  show $O/eight.log; echo "== eight t=$((SECONDS-T0))"
  gzip -6 $O/*.json
fi
cd $OUT && tar czf all.tgz r && rm -rf r
