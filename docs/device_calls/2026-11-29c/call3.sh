#!/usr/bin/env bash
# Twenty-seventh session, call 3, one H200. (1) Call 2 showed that the launch path gives the first
# ForeachBinaryOpScalar of an optimizer step ~8.7 us on every rank after step 1: what stretches it
# in the timeline is the collective-overlap rule's debt (timing/collective_overlap.h: kernels that
# ran inside an all-reduce window placed after them leave their lost work to the device's next
# kernel). The 8-process passthrough with the rule off (both rates 1) beside call 1's two runs with
# it. (2) Call 1's one-GPU step read 40.04 ms under vgpu against 44.37 real: real and vgpu
# alternated twice.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
show() { grep -m1 '^RESULT' "$1" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()[7:]); print(d["step_ms"], d["forward_ms"], d["backward_ms"], d["optimizer_ms"], d.get("steps_ms"), d.get("ranks_measured_per_step", [[]])[0], d.get("ranks_probe_ms", [[]])[0])' 2>&1 | cut -c1-500; }
for k in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout 90 python3 $S single --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/real$k.log 2>&1
  show $O/real$k.log; echo "== real$k t=$((SECONDS-T0))"
  VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 1 -- python3 $S single --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/one$k.log 2>&1
  show $O/one$k.log; echo "== one$k t=$((SECONDS-T0))"
done
VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1 VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/pt8_off.log 2>&1
show $O/pt8_off.log; echo "== pt8_off t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r && rm -rf r
