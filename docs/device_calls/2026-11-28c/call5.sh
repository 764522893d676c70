#!/usr/bin/env bash
# Twenty-fourth session, call 5 (issue 23), one H200 host: 16 cores, 128 GB, the host for 64
# ranks; tree b0e438e:
# 1. sim_scale at 2 and 64 ranks: the recording on the passthrough (2 virtual GPUs of GPU 0) and the
#    replays on the sim backend, peak host memory per rank and wall time per step, on this host;
# 2. the same step on 8 virtual GPUs of the passthrough (8 processes on GPU 0, --mps), against which
#    the issue reads the sim's 8 ranks, then the sim's 8 ranks from the same database.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc; free -g | head -2
timeout 300 python3 tests/gpu/sim_scale --ranks 2 64 --out $O/s --timeout 200 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
tail -9 $O/s.txt | cut -c1-400; echo "== t=$((SECONDS-T0))"
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 10 --warmup 4 > $O/pt8.log 2>&1
grep -m1 '^RESULT' $O/pt8.log | cut -c1-300; tail -3 $O/pt8.log | cut -c1-200; echo "== t=$((SECONDS-T0))"
timeout $((570-(SECONDS-T0))) python3 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/s8 --timeout 100 -- --batch 8 --seq 1024 > $O/s8.txt 2>&1
grep -E "^sim|^\| 8" $O/s8.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
