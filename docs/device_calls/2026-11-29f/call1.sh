#!/usr/bin/env bash
# Thirtieth session, call 1, 2 x H200 (issues 18, 23): is the 2-rank recording's doubled GEMM the
# ranks' time-slicing? The real DDP step on both GPUs, then three recordings of the same step on GPU 0
# (sim_scale: 2 ranks time-sliced as now, 2 ranks with --mps, 1 rank), each replayed at 2 ranks on the
# sim backend, and the three databases side by side (db_top.py).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
STEP="--batch 8 --seq 1024"
timeout 90 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp $STEP --steps 12 --warmup 4 > $O/real.txt 2>&1
grep -E "^RESULT" $O/real.txt | cut -c1-300; echo "== real t=$((SECONDS-T0))"
run() {  # name, sim_scale options
  local n=$1; shift
  timeout 170 python3 tests/gpu/sim_scale --ranks 2 --record-steps 8 4 --replay-steps 8 2 --timeout 150 --out $O/$n "$@" -- $STEP > $O/$n.txt 2>&1
  echo "-- $n"; grep -E "^record|^sim|^FAIL|^\| 2 |host state" $O/$n.txt | cut -c1-300; echo "== $n t=$((SECONDS-T0))"
}
run ts
run mps --record-mps
run one --record-gpus 1
python3 docs/device_calls/2026-11-29f/db_top.py ts=$O/ts/kernels.db mps=$O/mps/kernels.db one=$O/one/kernels.db --top=20 > $O/db_top.txt 2>&1
cat $O/db_top.txt | cut -c1-200
rm -f $O/*/kernels.db-*
cd $OUT && tar czf all.tgz r && rm -rf r
