#!/usr/bin/env bash
# Session 2026-11-26h, call 5 (the merged tree: callcost8, simcore10, the fidelity changes): the
# call-rate bench; whether the host gives perf's task clock a user-space time (cap_user_time: a
# thread CPU clock without a system call); the 8-rank row with its third prediction; the
# full-batch replay at 2, 8 and 64 ranks (10 replayed steps); FSDP2 with what time is left.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/eight $O/d
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 60 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
g++ -O2 -o $O/perf_task_clock tests/gpu/probe/perf_task_clock.cpp && timeout 10 $O/perf_task_clock; rm -f $O/perf_task_clock
ONLY=eight OUT=$O/eight timeout 170 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "== eight t=$((SECONDS-T0))"; grep -E "predicted|FAIL|ddp x|slowest" $O/eight/out.txt | cut -c1-400
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp > $O/real_full.log 2>&1
grep -o '"step_ms": [0-9.]*' $O/real_full.log; echo "real full t=$((SECONDS-T0))"
timeout 170 tests/gpu/sim_scale --out $O/full --ranks 2 8 64 --timeout 80 -- --batch 8 --seq 1024 > $O/full.txt 2>&1
echo "full t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| [0-9]|ranks:" $O/full.txt | head -14
left=$((440-SECONDS+T0)); echo "left $left"
[ $left -gt 80 ] && ONLY=fsdp2 RUNS=1 OUT=$O/d timeout $left tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== fsdp2 t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-300
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
