#!/usr/bin/env bash
# Twenty-sixth session, call 6, one H200 (issue 18's first cause, its size): the 8-process passthrough
# with kernel durations recorded alone (one virtual GPU, train_step.py single, --record), so that
# no signature the single step shares is measured beside other processes. What is left of call
# 4/5's gap (passthrough 8: 50.5-54.5 ms, optimizer 2.65-3.98 ms; sim 8: 48.05-49.81, optimizer 1.00)
# is then what measuring as if alone would give. Two runs, each from a copy of the alone database.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 1 --record $O/alone.db -- python3 $S single --batch 8 --seq 1024 --steps 8 --warmup 4 > $O/alone.log 2>&1
grep -m1 '^RESULT' $O/alone.log | cut -c1-200; echo "== alone t=$((SECONDS-T0))"
for k in 1 2; do
  [ $((SECONDS-T0)) -gt 400 ] && break
  cp -r $O/alone.db $O/pt8_$k.db
  VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 8 --mps --record $O/pt8_$k.db -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/pt8_$k.log 2>&1
  grep -m1 '^RESULT' $O/pt8_$k.log | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()[7:]); print(d["step_ms"], d["forward_ms"], d["backward_ms"], d["optimizer_ms"], d.get("ranks_measured_per_step", [[]])[0])' 2>&1 | cut -c1-300
  echo "== pt8_$k t=$((SECONDS-T0))"
done
rm -rf $O/*.db
cd $OUT && tar czf all.tgz r && rm -rf r
