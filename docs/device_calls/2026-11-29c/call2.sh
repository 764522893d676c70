#!/usr/bin/env bash
# Twenty-seventh session, call 2, one H200: call 1's timeline showed the first
# ForeachBinaryOpScalar of each optimizer step still at 0.7-3.3 ms on the 8 processes (19.8 us in
# the first step on every rank). A diagnostic build of the passthrough (launch_api.cpp printing,
# for that kernel only, which path gave each launch its duration, its keys and samples; not
# committed: call2_diagnostic.patch beside this script, built and stripped into .device/diag) over
# 3+3 steps of the 8-process DDP job.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
source tests/gpu/vgpu_env.sh
rm -rf /tmp/dlib && cp -r .device/lib /tmp/dlib && cp .device/diag/libcuda.so.1 /tmp/dlib/passthrough/libcuda.so.1
S=tests/gpu/fidelity/train_step.py
VGPU_PHYSICAL_DEVICES=0 timeout 120 python3 vgpu/tools/vgpu-run --lib-dir /tmp/dlib --bin-dir .device/bin --model "$model" --no-summary --gpus 8 --mps -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 3 --warmup 3 > $O/eight.log 2>$O/eight.err
grep -a DIAG $O/eight.log $O/eight.err | cut -c1-200 | sort | uniq -c | sort -rn | head -5
grep -ah DIAG $O/eight.log $O/eight.err > $O/diag.txt; wc -l $O/diag.txt
grep -a "path\|measured" $O/diag.txt | grep -v " sig " | head -40; grep -a " path " $O/diag.txt | awk '{print $3, $5}' | sort | uniq -c | head -40
grep -m1 '^RESULT' $O/eight.log | cut -c1-200; echo "== t=$((SECONDS-T0))"
gzip $O/diag.txt; cd $OUT && tar czf all.tgz r && rm -rf r
