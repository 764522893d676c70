#!/usr/bin/env bash
# Sixteenth session, call 5 (the merged tree: callcost13, sim25, simcore21): the call-rate bench
# (5 rounds, GPU 0; issue 21's event record), then issue 23's chain at the full batch: record the DDP
# step on the passthrough (2 virtual GPUs of GPU 0) and replay it on the sim backend at 2, 8 and 64
# ranks (64 = 8 nodes x 8, collectives now sharing the NICs as simcore flows: sim25).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/s
nvidia-smi -L
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 110 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
tail -9 $O/bench.txt; echo "== bench t=$((SECONDS-T0))"
# train_step.py's phases were rewritten after call 3 (one phase_end): the pipeline mode once more, small.
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py pp --layers 4 --seq 256 --steps 4 --warmup 2 > $O/pp_smoke.log 2>&1
grep RESULT $O/pp_smoke.log | cut -c1-300 || tail -5 $O/pp_smoke.log; echo "== pp t=$((SECONDS-T0))"
timeout $((560-SECONDS+T0)) tests/gpu/sim_scale --ranks 2 8 64 --out $O/s --timeout 150 -- --batch 8 --seq 1024 > $O/sim_scale.txt 2>&1
cut -c1-700 $O/sim_scale.txt
echo "== sim_scale t=$((SECONDS-T0))"
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
