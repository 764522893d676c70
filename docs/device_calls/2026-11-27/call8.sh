#!/usr/bin/env bash
# Session 2026-11-27, call 8 (the merged tree: callcost10, simcore14, settled durations shared by
# work key): the call-rate bench; 8-rank DDP (--mps, batch 4 x 1024, 12 steps) with launches
# measured per step and rank (call 7 before the change: 5-22 a rank at steps 10-15); DDP on 2 ranks,
# one run of each side.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 50 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
VGPU_PHYSICAL_DEVICES=0 timeout 70 python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --mps --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 4 --seq 1024 --steps 12 --warmup 3 > $O/e8.log 2>&1
echo "== e8 rc=$? t=$((SECONDS-T0))"; grep -E "kernel launches with a signature" $O/e8.log | cut -c1-200
grep '^RESULT' $O/e8.log | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print('step', d['step_ms'], 'wall', d['wall_ms'])
for r in d.get('ranks_measured_per_step', []): print('  measured per step', r)" || tail -5 $O/e8.log
left=$((185-SECONDS+T0)); echo "left $left"
[ $left -gt 45 ] && ONLY=ddp RUNS=1 OUT=$O/d timeout $left tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== ddp t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-300
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
