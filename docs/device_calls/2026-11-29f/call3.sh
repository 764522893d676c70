#!/usr/bin/env bash
# Thirtieth session, call 3, 2 x H200 (issue 18): the fidelity table's nccl-tests rows in full with
# the current tree: six collectives, 64 KiB to 1 GiB, real on both GPUs and under vgpu-run (2 virtual
# H200 on GPU 0), out of the box (tests/gpu/fidelity/run, ONLY=nccl).
T0=$SECONDS
mkdir -p $OUT/r
nvidia-smi -L; uptime
ONLY=nccl NCCL_TESTS=$PWD/.gpu/nccl-tests OUT=$OUT/r timeout 570 tests/gpu/fidelity/run .device 2>&1 | tail -60
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
