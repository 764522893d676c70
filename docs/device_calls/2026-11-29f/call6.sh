#!/usr/bin/env bash
# Thirtieth session, call 6, 2 x H200 (issue 18): where FSDP2's +11.5% goes (call 4: vgpu's forward
# 62.9 ms against 43.4 real, host time alike): one pair with vgpu's virtual timeline (TIMELINE=1), then
# the real step's kernels in time (train_step.py --kernels: one profiled step after the timed ones).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; mkdir -p $OUT/r
nvidia-smi -L; uptime
PIN_CORES_PER_RANK=8 TIMELINE=1 STEP_ARGS="--steps 12 --warmup 4" ONLY=fsdp2 RUNS=1 OUT=$OUT/r timeout 300 tests/gpu/fidelity/run .device 2>&1 | tail -6 | cut -c1-300
echo "== t=$((SECONDS-T0))"
timeout 120 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 6 --warmup 4 --kernels $OUT/r/real%r.json 2>&1 | grep -E "^RESULT" | cut -c1-200
echo "== t=$((SECONDS-T0))"
cd $OUT && for f in r/*.json; do gzip -9 "$f"; done; ls -la r | head -20; tar czf all.tgz r && rm -rf r
