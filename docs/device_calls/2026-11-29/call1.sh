#!/usr/bin/env bash
# Twenty-fifth session, call 1, one H200 (the only kind lent), tree of this session (simcore's
# memory in huge-page blocks, -O3):
# 1. passthrough_call_overhead (the real driver against vgpu's passthrough), 5 rounds (issue 21);
# 2. sim_scale at 2 and 8 ranks: the recording on the passthrough (2 virtual GPUs of GPU 0), the
#    replays on the sim backend (issue 23);
# 3. the same step on 8 virtual GPUs of the passthrough (8 processes on GPU 0, --mps), against
#    which the issue reads the sim's 8 ranks.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc; free -g | head -2
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
grep -E "^cu|ratio|median" $O/bench.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
timeout 240 python3 tests/gpu/sim_scale --ranks 2 8 --out $O/s --timeout 120 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
tail -9 $O/s.txt | cut -c1-400; echo "== t=$((SECONDS-T0))"
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 10 --warmup 4 > $O/pt8.log 2>&1
grep -m1 '^RESULT' $O/pt8.log | cut -c1-300; tail -3 $O/pt8.log | cut -c1-200; echo "== t=$((SECONDS-T0))"
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
