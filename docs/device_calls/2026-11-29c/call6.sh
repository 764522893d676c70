#!/usr/bin/env bash
# Twenty-seventh session, call 6, one H200 (issue 23 at 8 ranks): calls 1-3 showed the 8-process
# passthrough's extra optimizer time is the collective-overlap rule's debt (49.55 ms with the rule
# off, 51.13-51.65 with it). The sim's 8 ranks read 48.41 ms against the passthrough's 52.54 last
# session: do the backends agree with the rule off? One recording at 2 virtual GPUs (sim_scale
# --ranks 8 replays it), then the passthrough's 8 and the sim's 8 from that database with the rule
# off (VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1), 16 steps each.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
show() { grep -m1 '^RESULT' "$1" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()[7:]); print(d["step_ms"], d["forward_ms"], d["backward_ms"], d["optimizer_ms"])' 2>&1 | cut -c1-300; }
timeout 230 python3 tests/gpu/sim_scale --ranks 8 --out $O/s --timeout 110 --replay-steps 16 4 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
tail -8 $O/s.txt | cut -c1-300; echo "== sim_scale (rule on) t=$((SECONDS-T0))"
export VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1
timeout 110 python3 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/simoff --timeout 100 --replay-steps 16 4 -- --batch 8 --seq 1024 > $O/simoff.txt 2>&1
tail -6 $O/simoff.txt | cut -c1-300; echo "== sim off t=$((SECONDS-T0))"
if [ $((SECONDS-T0)) -lt 470 ]; then
  VGPU_PHYSICAL_DEVICES=0 timeout 110 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/pt8_off.log 2>&1
  show $O/pt8_off.log; echo "== pt8 off t=$((SECONDS-T0))"
fi
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
