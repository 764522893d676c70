#!/usr/bin/env bash
# Twenty-eighth session, call 2, one H200 (issue 23 at 8 ranks): call 1's timelines showed the two
# backends' all-reduces alike (25 MiB: 201.3 us after the last arrival on both; a bucket every
# ~0.96-0.98 ms) and their 3-step figures 51-57 ms apart by host state. So: 3 runs a side of 16
# steps (4 warm-up), alternated, default rules, and the comparison at matched host states
# (tests/gpu/fidelity/host_states.py).
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
show() { grep -m1 '^RESULT' "$1" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()[7:]); print(d["step_ms"], d["forward_ms"], d["backward_ms"], d["optimizer_ms"])' 2>&1 | cut -c1-300; }
pt() { VGPU_PHYSICAL_DEVICES=0 timeout 100 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/pt8_$1.log 2>&1; echo "pt8 $1: $(show $O/pt8_$1.log) t=$((SECONDS-T0))"; }
sim() { timeout 90 python3 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/sim$1 --timeout 80 --replay-steps 16 4 -- --batch 8 --seq 1024 > $O/sim$1.txt 2>&1; cp $O/sim$1/sim_8.log $O/sim8_$1.log; echo "sim8 $1: $(show $O/sim8_$1.log) t=$((SECONDS-T0))"; }
timeout 150 python3 tests/gpu/sim_scale --ranks 8 --out $O/s --timeout 90 --replay-steps 16 4 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
cp $O/s/sim_8.log $O/sim8_0.log; echo "sim8 0: $(show $O/sim8_0.log) t=$((SECONDS-T0))"
pt 1; sim 1; pt 2
[ $((SECONDS-T0)) -lt 330 ] && sim 2
[ $((SECONDS-T0)) -lt 380 ] && pt 3
cat $O/pt8_*.log | grep '^RESULT' > $O/pt.results; cat $O/sim8_*.log | grep '^RESULT' > $O/sim.results
python3 tests/gpu/fidelity/host_states.py $O/pt.results $O/sim.results
rm -rf $O/s/kernels.db* $O/sim[0-9]
cd $OUT && tar czf all.tgz r && rm -rf r
