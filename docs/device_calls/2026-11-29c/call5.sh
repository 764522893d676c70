#!/usr/bin/env bash
# Twenty-seventh session, call 5, one H200 (issue 18, one GPU): at matched host probes (0.25 ms
# bins) calls 1 and 3 read vgpu/real 0.95-0.97; the forward's host side is where they part (vgpu
# charges no driver call by default, VGPU_DRIVER_TIME=none). Real, vgpu with none, vgpu with the
# table of real call costs (VGPU_DRIVER_TIME=table), alternated three times, 16 timed steps each (call 4 again: its slow-state bins held few real steps).
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
A="single --batch 8 --seq 1024 --steps 16 --warmup 4"
show() { grep -m1 '^RESULT' "$1" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()[7:]); print(d["step_ms"], d["forward_ms"], d["backward_ms"], d["optimizer_ms"], d["host_ms"], d["ranks_probe_ms"][0])' 2>&1 | cut -c1-400; }
for k in 1 2 3; do
  CUDA_VISIBLE_DEVICES=0 timeout 90 python3 $S $A > $O/real$k.log 2>&1; show $O/real$k.log; echo "== real$k t=$((SECONDS-T0))"
  VGPU_DRIVER_TIME=none VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 1 -- python3 $S $A > $O/none$k.log 2>&1; show $O/none$k.log; echo "== none$k t=$((SECONDS-T0))"
  VGPU_DRIVER_TIME=table VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 1 -- python3 $S $A > $O/table$k.log 2>&1; show $O/table$k.log; echo "== table$k t=$((SECONDS-T0))"
done
cd $OUT && tar czf all.tgz r && rm -rf r
