#!/usr/bin/env bash
# Nineteenth session, call 1 (issue 18: why vgpu's FSDP2 step reads high; issue 23: the 2-rank sim replay
# against the passthrough): FSDP2 of GPT-2 small, real on both GPUs against vgpu with 2 virtual GPUs on
# GPU 0, each rank on 8 cores of its own, 30 timed steps, three runs of each side alternating, every
# vgpu run with VGPU_CLOCK_REPORT (where each thread's virtual time came from) and every run's RESULT
# line kept (each rank's host clock and thread CPU per phase); then sim_scale at 2 ranks (record on the
# passthrough, replay on the sim backend) with the database and the logs kept.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; mkdir -p $OUT/f $OUT/s
nvidia-smi -L; uptime
export VGPU_CLOCK_REPORT=$OUT/f/clock_%p.jsonl
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="fsdp2" RUNS=3 OUT=$OUT/f timeout 330 tests/gpu/fidelity/run > $OUT/fidelity.txt 2>&1
unset VGPU_CLOCK_REPORT
tail -30 $OUT/fidelity.txt | cut -c1-300
echo "== t=$((SECONDS-T0))"
timeout $((560-(SECONDS-T0))) python3 tests/gpu/sim_scale --ranks 2 --out $OUT/s -- --batch 8 --seq 1024 > $OUT/sim_scale.txt 2>&1
tail -25 $OUT/sim_scale.txt | cut -c1-300
echo "== t=$((SECONDS-T0))"
ls -la $OUT/s | head -30
