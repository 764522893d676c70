#!/usr/bin/env bash
# Fifteenth session, call 1 (tree 8633a08, the fourteenth session's last; run after 2026-11-27e/call9.sh): the call-overhead bench
# (7 rounds, GPU 0; call9's 70 s limit cut it before it printed), then the 2-rank DDP and FSDP2 steps
# real (both GPUs) and under vgpu (GPU 0), alternated three times each, for the spread over runs.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; nproc
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 160 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 7 > $O/bench.txt 2>&1
tail -9 $O/bench.txt; echo "== bench t=$((SECONDS-T0))"
source tests/gpu/vgpu_env.sh
for i in 1 2 3; do
  for mode in ddp fsdp2; do
    timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py $mode --steps 12 --warmup 3 > $O/${mode}_real_$i.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py $mode --steps 12 --warmup 3 > $O/${mode}_vgpu_$i.log 2>&1
  done
  echo "== round $i t=$((SECONDS-T0))"
done
for f in $O/*_real_*.log $O/*_vgpu_*.log; do
  echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "phases", r["forward_ms"], r["backward_ms"], r["optimizer_ms"], "measured", [m[-3:] for m in r.get("ranks_measured_per_step", [])])' 2>&1 | cut -c1-400)"
done
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
