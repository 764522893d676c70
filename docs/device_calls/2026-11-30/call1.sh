#!/usr/bin/env bash
# Thirty-first session, call 1, one H200 (issue 21, "0 measured after step 2"): which launches the
# passthrough still measures after a GPT-2 job's second step, and why (debug log: every measured
# sample with its signature, every new duration group with its kernel's name).
export PYTHONUNBUFFERED=1
T0=$SECONDS
nvidia-smi -L; uptime
STEPS=12 VGPU_LOG_LEVEL=debug LD_LIBRARY_PATH=.device/lib/passthrough:.device/lib \
  timeout 200 python3 tests/gpu/measured_per_step.py > $OUT/steps.txt 2> $OUT/debug.log
echo "rc $? t=$((SECONDS-T0))"
cat $OUT/steps.txt
grep -c "" $OUT/debug.log
gzip -9 $OUT/debug.log
