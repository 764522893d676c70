#!/usr/bin/env bash
# Seventeenth session, call 5 (issue 18): the nccl-tests rows from 64 KiB to 4 MiB with the host cost
# model fitted to the median over three hosts (the embedded default since da90bb8), in three rounds
# (NCCL_RUNS=3: each collective real then vgpu, every round), compared by medians with the real
# rounds' range (tests/gpu/fidelity/table.py).
T0=$SECONDS; mkdir -p $OUT/r
python3 tests/gpu/fidelity/cpu_speed.py > $OUT/r/cpu_speed.txt 2>&1; head -2 $OUT/r/cpu_speed.txt; tail -1 $OUT/r/cpu_speed.txt
NCCL_RUNS=3 ONLY=nccl NCCL_MAX=4M NCCL_TESTS=$PWD/.gpu/nccl-tests OUT=$OUT/r timeout 480 tests/gpu/fidelity/run .device 2>&1 | tail -30
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
