#!/usr/bin/env bash
# Fourteenth session, call 7: FSDP2 under vgpu with VGPU_CLOCK_TRACE (every move of each thread's
# virtual clock: CPU charged per call, jumps; train_step.py's phase marks are the clock reads), to
# split each phase's virtual host time into charged CPU and jumps, beside the real run's phases.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
source tests/gpu/vgpu_env.sh
a=(tests/gpu/fidelity/train_step.py fsdp2 --steps 10 --warmup 3)
timeout 100 torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/real.log 2>&1
VGPU_CLOCK_TRACE=$O/trace_%p.jsonl VGPU_CLOCK_REPORT=$O/clock_%p.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/vgpu.log 2>&1
for f in $O/real.log $O/vgpu.log; do echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "host", r["ranks_host_ms"])' 2>&1 | cut -c1-300)"; done
ls -la $O; gzip $O/trace_*.jsonl
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
