#!/usr/bin/env bash
# Nineteenth session, call 3 (issue 23: why the 2-rank sim replay reads 7% under the passthrough):
# sim_scale at 2 and 8 ranks (record on the passthrough at 2 virtual GPUs of GPU 0, replay on the sim
# backend), the database, its misses and every log brought back for a look on the build machine.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; mkdir -p $OUT/s
nvidia-smi -L; uptime; pkill -f train_step.py; sleep 1
timeout 480 python3 tests/gpu/sim_scale --ranks 2 8 --out $OUT/s -- --batch 8 --seq 1024 > $OUT/s/sim_scale.txt 2>&1
tail -25 $OUT/s/sim_scale.txt | cut -c1-400
echo "== t=$((SECONDS-T0))"
ls -la $OUT/s
cd $OUT && tar czf s.tgz s && rm -rf s
