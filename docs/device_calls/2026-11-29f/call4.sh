#!/usr/bin/env bash
# Thirtieth session, call 4, 2 x H200 (issue 18): the fidelity table's step rows with the current
# tree on one host: DDP and FSDP2 (one pair each, each rank on 8 cores of its own, 30 steps), then the
# one-GPU step eager and compiled (one pair).
T0=$SECONDS
mkdir -p $OUT/r
nvidia-smi -L; uptime
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp fsdp2 single" RUNS=1 RUNS_SINGLE=1 OUT=$OUT/r timeout 570 tests/gpu/fidelity/run .device 2>&1 | tail -40
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
