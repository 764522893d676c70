#!/usr/bin/env bash
# Fourteenth session, call 8: does FSDP2's main thread run slower under vgpu because a spinning
# thread (NCCL's proxy, copying every collective through host memory) shares its physical core
# (SMT)? The host's CPU map, then 2-rank FSDP2 (15 steps, 3 warm-up): real; vgpu; vgpu on one
# logical CPU per physical core (taskset).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; lscpu | grep -E "Thread|Core|Socket|NUMA"; lscpu -e > $O/lscpu_e.txt
one=$(lscpu -p=CPU,CORE | grep -v '^#' | sort -t, -k2,2n -u | cut -d, -f1 | paste -sd,)
echo "one CPU per core: $one"
source tests/gpu/vgpu_env.sh
a=(tests/gpu/fidelity/train_step.py fsdp2 --steps 15 --warmup 3)
timeout 100 torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/real.log 2>&1
VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/vgpu.log 2>&1
VGPU_PHYSICAL_DEVICES=0 timeout 150 taskset -c "$one" "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/vgpu_onepercore.log 2>&1
timeout 100 taskset -c "$one" torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/real_onepercore.log 2>&1
for f in $O/*.log; do echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "cpu", r.get("ranks_process_cpu_ms"), "host", r["ranks_host_ms"])' 2>&1 | cut -c1-300)"; done
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
