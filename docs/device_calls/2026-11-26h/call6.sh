#!/usr/bin/env bash
# Session 2026-11-26h, call 6 (b43fa3a: callcost8 merged at 675c843, the fidelity changes): the
# call-rate bench; whether the host gives perf's task clock a user-space time (cap_user_time: a
# thread CPU clock without a system call); the 8-rank row with its third prediction (the slowest
# of 8 hosts); the full-batch replay at 2, 8 and 64 ranks (10 replayed steps); with what time is
# left, FSDP2 on 2 ranks with --mps (2 ranks' contexts fit an MPS server) beside a real run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/eight
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 60 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
g++ -O2 -o $O/perf_task_clock tests/gpu/probe/perf_task_clock.cpp && timeout 10 $O/perf_task_clock; rm -f $O/perf_task_clock
ONLY=eight OUT=$O/eight timeout 160 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "== eight t=$((SECONDS-T0))"; grep -E "predicted|FAIL|ddp x|slowest" $O/eight/out.txt | cut -c1-400
timeout 40 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp > $O/real_full.log 2>&1
grep -o '"step_ms": [0-9.]*' $O/real_full.log; echo "real full t=$((SECONDS-T0))"
left=$((300-SECONDS+T0)); echo "left $left"
timeout $left tests/gpu/sim_scale --out $O/full --ranks 2 8 64 --timeout 70 -- --batch 8 --seq 1024 > $O/full.txt 2>&1
echo "full t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| [0-9]|ranks:" $O/full.txt | head -14
left=$((375-SECONDS+T0)); echo "left $left"
if [ $left -gt 75 ]; then
  mkdir -p $O/mps; VRUN_ARGS=--mps ONLY=fsdp2 RUNS=1 OUT=$O/mps timeout $left tests/gpu/fidelity/run .device > $O/mps/out.txt 2>&1
  echo "== fsdp2 --mps t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/mps/out.txt | cut -c1-300
fi
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
