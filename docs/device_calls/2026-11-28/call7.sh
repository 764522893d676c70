#!/usr/bin/env bash
# Nineteenth session, call 7 (issue 18): two more FSDP2 pairs with the merged tree (callcost16's lock-free
# event record among its changes), each rank on 8 cores of its own, 30 timed steps, real and vgpu alternating.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; mkdir -p $OUT/f
nvidia-smi -L; uptime
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="fsdp2" RUNS=2 OUT=$OUT/f timeout 200 tests/gpu/fidelity/run > $OUT/fidelity.txt 2>&1
tail -4 $OUT/fidelity.txt | cut -c1-300
pkill -f train_step.py; echo "== t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz f fidelity.txt && rm -rf f
