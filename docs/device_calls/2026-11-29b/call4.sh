#!/usr/bin/env bash
# Twenty-sixth session, call 4, one H200:
# 1. passthrough_call_overhead, 5 rounds pinned to cores 0-7 (issue 21; the passthrough unchanged
#    since the twenty-fifth session: its spread between hosts);
# 2. issue 23 at 8 ranks: one recording at 2 virtual GPUs (sim_scale --ranks 8 replays it once),
#    then the 8-virtual-GPU passthrough (8 processes on GPU 0, --mps) and the sim's 8 ranks from the
#    same database, alternated twice, 16 timed steps each, every step's host probes kept.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
grep -E "^cu|ratio|median" $O/bench.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
timeout 200 python3 tests/gpu/sim_scale --ranks 8 --out $O/s --timeout 120 --replay-steps 16 4 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
tail -6 $O/s.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
for k in 1 2; do
  [ $((SECONDS-T0)) -gt 400 ] && break
  VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 16 --warmup 4 > $O/pt8_$k.log 2>&1
  echo "== pt8_$k t=$((SECONDS-T0))"
  [ $((SECONDS-T0)) -gt 470 ] && break
  timeout 100 python3 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/sim$k --timeout 90 --replay-steps 16 4 -- --batch 8 --seq 1024 > $O/sim$k.txt 2>&1
  echo "== sim$k t=$((SECONDS-T0))"
done
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
