#!/usr/bin/env bash
# Twenty-second session, call 6 (issue 18): call 5's FSDP2 pairs read +20.6% (real 128.1 / 126.7 ms, a fast host):
# is it the slowdown beside collectives? FSDP2 pairs with the rule (default), without it (both rates 1), with it,
# each a real run then vgpu, each rank on 8 cores of its own.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
for i in 1 2 3; do
  if [ $i = 2 ]; then export VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1; else unset VGPU_COMPUTE_BESIDE_COLLECTIVE VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE; fi
  PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="fsdp2" RUNS=1 OUT=$O/f$i timeout 170 tests/gpu/fidelity/run > $O/fidelity$i.txt 2>&1
  echo "-- run $i (rule $([ $i = 2 ] && echo off || echo on))"; grep -E "^fsdp2 |host probe|FAIL" $O/fidelity$i.txt | cut -c1-150; pkill -f train_step.py; echo "== t=$((SECONDS-T0))"
  [ $((SECONDS-T0)) -gt 400 ] && break
done
cd $OUT && tar czf all.tgz r && rm -rf r
