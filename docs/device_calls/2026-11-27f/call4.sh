#!/usr/bin/env bash
# Fifteenth session, call 4 (tree 8633a08 + train_step.py's --gc-off): FSDP2's steps moved 103-187 ms
# within one real run (call 3). With Python's cyclic collector frozen after warm-up, real and under
# vgpu, 30 steps, each rank on 8 cores of its own, two alternating rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
source tests/gpu/vgpu_env.sh
export PIN_CORES_PER_RANK=8
for i in 1 2; do
  timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --gc-off --steps 30 --warmup 3 > $O/fsdp2_real_$i.log 2>&1
  VGPU_PHYSICAL_DEVICES=0 timeout 100 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --gc-off --steps 30 --warmup 3 > $O/fsdp2_vgpu_$i.log 2>&1
  echo "== round $i t=$((SECONDS-T0))"
done
for f in $O/*_real_*.log $O/*_vgpu_*.log; do
  echo "$(basename $f): $(grep RESULT $f | python3 -c '
import json,sys; r=json.loads(sys.stdin.read()[7:]); s=sorted(r["steps_ms"]); n=len(s)
print(r["step_ms"], "q1-q3", round(s[n//4],1), round(s[3*n//4],1), "min-max", round(s[0],1), round(s[-1],1), "phases", r["forward_ms"], r["backward_ms"], r["optimizer_ms"])' 2>&1 | cut -c1-400)"
done
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
