#!/usr/bin/env bash
# Seventeenth session, call 7 (issue 21): the passthrough's settled cuEventRecord on the GPU host,
# priced: callcost15's bench (now with a 'hw host:' line: the host's TSC read, locked pair, cycle)
# over four passthrough libraries built from one tree: base (main at 71c0cf0), new (callcost15),
# and two pricing builds not for merging: nolock (the settled record's stores without the
# timeline's lock; safe only in this single-threaded bench) and nolock_noexit (also no leaving TSC
# read). Alternated, twice, 3 rounds each, on 8 CPUs of one GPU's host.
O=$OUT; D=.device/cc15; R=/usr/local/nvidia/lib64/libcuda.so.1
grep -m1 "model name" /proc/cpuinfo
for i in 1 2; do for v in base new nolock nolock_noexit; do
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 60 $D/passthrough_call_overhead $R $PWD/$D/$v/libcuda.so.1 $D/empty_kernel.fatbin 3 > $O/${v}_$i.txt 2>&1
  echo "== $v $i"; grep -E "^cu|^hw host" $O/${v}_$i.txt
done; done
