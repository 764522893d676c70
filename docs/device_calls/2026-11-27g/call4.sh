#!/usr/bin/env bash
# Sixteenth session, call 4 (issue 18): the fidelity table's nccl-tests rows in full, on one host:
# six collectives, 64 KiB to 1 GiB, real on both GPUs and under vgpu-run (2 virtual H200 on GPU 0),
# out of the box (tests/gpu/fidelity/run, ONLY=nccl).
T0=$SECONDS
mkdir -p $OUT/r
ONLY=nccl NCCL_TESTS=$PWD/.gpu/nccl-tests OUT=$OUT/r timeout 570 tests/gpu/fidelity/run .device 2>&1 | tail -80
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
