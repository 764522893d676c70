#!/usr/bin/env bash
# Eighteenth session, call 6 (issue 21): the 8-rank sim-backend replay's wall per step against the real 1-GPU
# step in the same call (merged tree with sim30): record the DDP step (2 virtual GPUs of GPU 0), replay at 8
# ranks, the real 1-GPU step, the 8-rank replay again from the same database, the real 1-GPU step again.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/s
nvidia-smi -L; nproc; uptime
single() { CUDA_VISIBLE_DEVICES=0 timeout 60 python3 tests/gpu/fidelity/train_step.py single --steps 20 > $O/real_single_$1.log 2>&1
  echo "real single $1: $(grep RESULT $O/real_single_$1.log | cut -c1-120)"; }
timeout 200 tests/gpu/sim_scale --ranks 8 --out $O/s --timeout 150 -- --batch 8 --seq 1024 > $O/sim_scale.txt 2>&1
grep -E "^record|^sim 8" $O/sim_scale.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
single 1
timeout 100 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/again --timeout 90 -- --batch 8 --seq 1024 > $O/again.txt 2>&1
grep -E "^sim 8" $O/again.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
single 2
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
