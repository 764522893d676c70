#!/usr/bin/env bash
# Thirtieth session, call 5, 2 x H200 (issue 18): call 4 read the compiled one-GPU step -10.3% (one
# pair): two more pairs of the one-GPU step, eager and compiled, alternated.
T0=$SECONDS
mkdir -p $OUT/r
nvidia-smi -L; uptime
ONLY="single" RUNS_SINGLE=2 OUT=$OUT/r timeout 570 tests/gpu/fidelity/run .device 2>&1 | tail -12
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
