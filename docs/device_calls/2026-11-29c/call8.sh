#!/usr/bin/env bash
# Twenty-seventh session, call 8, one H200 (issue 21): passthrough_call_overhead, 5 rounds pinned to
# cores 0-7, the passthrough as committed (its hot paths unchanged since the twenty-fifth session):
# another host's spread.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 120 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
grep -E "^cu|ratio|median|round" $O/bench.txt | cut -c1-220 | tail -40; echo "== t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r && rm -rf r
