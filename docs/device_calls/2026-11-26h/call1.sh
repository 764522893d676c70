#!/usr/bin/env bash
# Session 2026-11-26h, call 1 (tree fe203bd): the call-rate bench with callcost7; the 8-rank row
# after the CPU clock's own reading stopped being charged; the full-batch replay at 2, 8 and 64
# ranks with the family level; DDP and FSDP2 on 2 ranks with what time is left.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/eight $O/d
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 40 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
ONLY=eight OUT=$O/eight timeout 170 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "== eight t=$((SECONDS-T0))"; grep -E "predicted|FAIL|ddp x" $O/eight/out.txt | cut -c1-300
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 6 --warmup 4 > $O/real_full.log 2>&1
grep -o '"step_ms": [0-9.]*' $O/real_full.log; echo "real full t=$((SECONDS-T0))"
timeout 200 tests/gpu/sim_scale --out $O/full --ranks 2 8 64 --timeout 80 -- --batch 8 --seq 1024 > $O/full.txt 2>&1
echo "full t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| [0-9]|ranks:" $O/full.txt | head -14
left=$((560-SECONDS+T0)); echo "left $left"
[ $left -gt 100 ] && ONLY="ddp fsdp2" RUNS=1 OUT=$O/d timeout $left tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== ddp fsdp2 t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-300
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
