#!/usr/bin/env bash
# Fourteenth session, call 3: issue 21's wall per step of 8 simulated ranks (target <= 2x the real
# 1-GPU step) and issue 23's sim-vs-real DDP, on one host: the real 1-GPU step and the real 2-GPU DDP
# step (batch 8 x 1024), then tests/gpu/sim_scale (record on the passthrough, 2 virtual GPUs on GPU 0;
# replay on the sim backend at 2 and 8 ranks) with each rank's process CPU per step (train_step.py's
# ranks_process_cpu_ms: CPU-bound or waiting?), then one more 8-rank replay with VGPU_HOST_SAMPLES
# (whose code burns each thread's CPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/s $O/samples
nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; nproc
CUDA_VISIBLE_DEVICES=0 timeout 60 python3 tests/gpu/fidelity/train_step.py single > $O/single_real.log 2>&1
grep RESULT $O/single_real.log | cut -c1-400
timeout 90 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp > $O/ddp_real.log 2>&1
grep RESULT $O/ddp_real.log | cut -c1-400
echo "== real t=$((SECONDS-T0))"
timeout 330 tests/gpu/sim_scale --ranks 2 8 --out $O/s --timeout 150 -- --batch 8 --seq 1024 > $O/sim_scale.txt 2>&1
cat $O/sim_scale.txt | cut -c1-600
echo "== sim_scale t=$((SECONDS-T0))"
VGPU_HOST_SAMPLES=$O/samples/%p.jsonl timeout 120 tests/gpu/sim_scale --no-record --db $O/s/kernels.db --ranks 8 --out $O/s2 --timeout 100 -- --batch 8 --seq 1024 > $O/sim_samples.txt 2>&1
grep -E "sim 8|FAIL" $O/sim_samples.txt | cut -c1-400
echo "== samples t=$((SECONDS-T0))"
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
