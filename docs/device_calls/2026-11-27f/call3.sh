#!/usr/bin/env bash
# Fifteenth session, call 3 (tree 8633a08 + train_step.py's cpu probe): is a slow real step a slow
# host? The 2-rank DDP and FSDP2 steps, real and under vgpu, each rank on 8 cores of its own, three
# alternating rounds, with the thread CPU of a fixed Python loop before every timed step
# (ranks_probe_ms).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
source tests/gpu/vgpu_env.sh
export PIN_CORES_PER_RANK=8
for i in 1 2 3; do
  for mode in fsdp2 ddp; do
    timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py $mode --steps 12 --warmup 3 > $O/${mode}_real_$i.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py $mode --steps 12 --warmup 3 > $O/${mode}_vgpu_$i.log 2>&1
  done
  echo "== round $i t=$((SECONDS-T0))"
done
for f in $O/*_real_*.log $O/*_vgpu_*.log; do
  echo "$(basename $f): $(grep RESULT $f | python3 -c '
import json,sys; r=json.loads(sys.stdin.read()[7:]); med=lambda v: sorted(v)[len(v)//2]
print(r["step_ms"], "phases", r["forward_ms"], r["backward_ms"], r["optimizer_ms"], "probe", [round(med(p),3) for p in r["ranks_probe_ms"]], "host", [[round(x,1) for x in h] for h in r["ranks_host_ms"]])' 2>&1 | cut -c1-400)"
done
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
