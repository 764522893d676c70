#!/usr/bin/env bash
# Fourteenth session, call 5: is FSDP2's excess under vgpu (+16% in call 1) the cost of measuring
# kernels alone? Call 4 found FSDP2's copy-in (`_foreach_copy_`, TensorListMetadata<2> by value,
# its unused entries stack garbage) measured every step at 10-75 us for one work, never settling.
# Two rounds of: real, vgpu (default VGPU_MEASURE=alone), vgpu with VGPU_MEASURE=concurrent;
# 2-rank FSDP2, 20 steps, 3 warm-up; process CPU per step in each RESULT.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
source tests/gpu/vgpu_env.sh
a=(tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3)
for i in 1 2; do
  timeout 100 torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/real_$i.log 2>&1
  VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/alone_$i.log 2>&1
  VGPU_MEASURE=concurrent VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/concurrent_$i.log 2>&1
  echo "round $i t=$((SECONDS-T0))"
done
for f in $O/*.log; do echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "wall", r["wall_ms"], "cpu", r.get("ranks_process_cpu_ms"), "host", r["ranks_host_ms"], "measured", [x[-3:] for x in r.get("ranks_measured_per_step", [])])' 2>&1 | cut -c1-400)"; done
cd $OUT && tar czf all.tgz r
