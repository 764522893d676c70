#!/usr/bin/env bash
# Sixteenth session, call 6 (issue 21): call 5 read the event record at 0.544x (own 74.0 ns) on its
# host, above the fifteenth session's 66.0 on another: callcost13 against its base (af61d65's
# passthrough library, .device/base) on one host, alternated, 3 rounds each, twice.
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
B=.device/bench/passthrough_call_overhead; R=/usr/local/nvidia/lib64/libcuda.so.1; F=.device/bench/empty_kernel.fatbin
for i in 1 2; do
  for side in base new; do
    lib=$PWD/.device/lib/passthrough/libcuda.so.1; [ $side = base ] && lib=$PWD/.device/base/libcuda.so.1
    CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 60 $B $R $lib $F 3 > $O/bench_${side}_$i.txt 2>&1
    echo "== $side $i t=$((SECONDS-T0))"; grep -E "^cu" $O/bench_${side}_$i.txt
  done
done
cd $OUT && tar czf all.tgz r
