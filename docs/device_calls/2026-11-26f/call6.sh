#!/usr/bin/env bash
# Session 2026-11-26f, call 6: record -> replay against the real 2-GPU step at two batch sizes
# (GPT-2 DDP, batch 1 x 512 and 8 x 1024), the sim replaying with its driver-time table (default)
# and without (VGPU_DRIVER_TIME=none); then the call-rate bench of the merged tree.
# (Tree: main with callcost4 merged at a76a749.)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
res() { grep -h "^RESULT" "$1" | head -1 | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print("step", r["step_ms"], "steps", r["steps_ms"], "host", r.get("host_ms"))'; }
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 40 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -8 $O/bench.txt
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --batch 1 --seq 512 --steps 6 --warmup 4 > $O/real_small.log 2>&1
echo "real small: $(res $O/real_small.log) t=$((SECONDS-T0))"
timeout 90 tests/gpu/sim_scale --out $O/small --ranks 2 --timeout 80 > $O/small.txt 2>&1
echo "small t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| 2" $O/small.txt
VGPU_DRIVER_TIME=none timeout 40 tests/gpu/sim_scale --out $O/small_none --no-record --db $O/small/kernels.db --ranks 2 --timeout 35 > $O/small_none.txt 2>&1
echo "small none t=$((SECONDS-T0))"; grep -E "^sim|^\| 2" $O/small_none.txt
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 6 --warmup 4 > $O/real_full.log 2>&1
echo "real full: $(res $O/real_full.log) t=$((SECONDS-T0))"
timeout 110 tests/gpu/sim_scale --out $O/full --ranks 2 8 --timeout 60 -- --batch 8 --seq 1024 > $O/full.txt 2>&1
echo "full t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| [0-9]" $O/full.txt
VGPU_DRIVER_TIME=none timeout 40 tests/gpu/sim_scale --out $O/full_none --no-record --db $O/full/kernels.db --ranks 2 --timeout 35 -- --batch 8 --seq 1024 > $O/full_none.txt 2>&1
echo "full none t=$((SECONDS-T0))"; grep -E "^sim|^\| 2" $O/full_none.txt
rm -f $O/*/*.db-wal $O/*/*.db-shm
find $O -name "*.db" -delete; du -sh $O
