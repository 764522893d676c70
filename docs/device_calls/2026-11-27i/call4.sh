#!/usr/bin/env bash
# Eighteenth session, call 4 (main after the merges of sim28: vgpud bounded, one round trip to read a collective; sim29;
# simcore23): issue 23's chain at the full batch: record the DDP step on the passthrough (2 virtual
# GPUs of GPU 0) and replay it on the sim backend at 2, 8 and 64 ranks (ranks as processes under vgpu-run,
# so their collectives' flows now go to the job's vgpud as well), then the real 2-GPU DDP step at the same
# shape (both GPUs), and the real 1-GPU step.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/s
nvidia-smi -L; nproc; uptime
timeout 470 tests/gpu/sim_scale --ranks 2 8 64 --out $O/s --timeout 150 -- --batch 8 --seq 1024 > $O/sim_scale.txt 2>&1
cut -c1-700 $O/sim_scale.txt
echo "== sim_scale t=$((SECONDS-T0))"
# The real 1-GPU step (the wall-time ratio's base, issue 21) and the real 2-GPU DDP step once each.
CUDA_VISIBLE_DEVICES=0 timeout 60 python3 tests/gpu/fidelity/train_step.py single --steps 20 > $O/real_single.log 2>&1
grep RESULT $O/real_single.log | cut -c1-300 || tail -5 $O/real_single.log
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 20 > $O/real_ddp.log 2>&1
grep RESULT $O/real_ddp.log | cut -c1-300 || tail -5 $O/real_ddp.log
echo "== real t=$((SECONDS-T0))"
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
