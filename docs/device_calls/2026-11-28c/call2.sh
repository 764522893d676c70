#!/usr/bin/env bash
# Twenty-fourth session, call 2 (issue 23; issue 21's figures beside it), one H200 (the only kind lent
# then): the tree with PyTorch's elementwise structs cleaned in signatures (a cast kernel's
# loader/storer padding, a legacy elementwise closure's offset calculator past its dimensions) and
# the structs cleaned before the search for addresses (torch.cat's output strides):
# 1. sim_scale at 2 ranks: recording on the passthrough by this build and the 2-rank replay, misses kept;
# 2. the 2-rank replay again from that database (its spread), then 8 ranks;
# 3. the real 1-GPU step (train_step.py single), against which issue 21 reads the 8-rank wall per step;
# 4. passthrough_call_overhead (the real driver against vgpu's passthrough), 5 rounds.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/misses
nvidia-smi -L; uptime; nproc
rm -f /tmp/vgpu-*/kernel-db-misses-* 2>/dev/null
timeout 160 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 110 -- --batch 8 --seq 1024 > $O/s0.txt 2>&1
grep -E "^record|^sim|fallback|miss" $O/s0.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
mkdir -p $O/misses/a2; cp /tmp/vgpu-*/kernel-db-misses-* $O/misses/a2/ 2>/dev/null; rm -f /tmp/vgpu-*/kernel-db-misses-*
timeout 120 python3 tests/gpu/sim_scale --ranks 2 8 --no-record --db $O/s/kernels.db --out $O/b --timeout 80 -- --batch 8 --seq 1024 > $O/b.txt 2>&1
grep -E "^sim|fallback" $O/b.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
mkdir -p $O/misses/b; cp /tmp/vgpu-*/kernel-db-misses-* $O/misses/b/ 2>/dev/null
timeout 100 python3 tests/gpu/fidelity/train_step.py single --batch 8 --seq 1024 --steps 20 > $O/single.log 2>&1
grep -o '"step_ms": [0-9.]*' $O/single.log; echo "== t=$((SECONDS-T0))"
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
grep -E "^cu|ratio|median" $O/bench.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
