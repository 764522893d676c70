#!/usr/bin/env bash
# Twenty-seventh session, call 7, one H200 (issues 18, 23): call 6's backends parted at 8 ranks in
# the backward's exposed all-reduces (sim 28.36 ms, passthrough 31.24, the overlap rule off). One
# all-reduce at a time through torch.distributed (tests/gpu/nccl_sweep.py, 1-64 MiB) on the
# passthrough's 8 processes (--mps) and on the sim's 8 ranks, beside the collective model's figure
# (vgpu-collective) for the same sizes.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
for b in 1048576 4194304 16777216 67108864; do .device/bin/vgpu-collective all_reduce $b 8 2>&1 | tail -1; done
VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 tests/gpu/nccl_sweep.py all_reduce 1 64 > $O/pt8.log 2>&1
grep -v "^W1\|^\*\*\*\|OMP" $O/pt8.log | tail -8; echo "== pt8 t=$((SECONDS-T0))"
timeout 150 "${vrun[@]}" --backend sim --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/nccl_sweep.py all_reduce 1 64 > $O/sim8.log 2>&1
grep -v "^W1\|^\*\*\*\|OMP" $O/sim8.log | tail -8; echo "== sim8 t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r && rm -rf r
