#!/usr/bin/env bash
# Twenty-second session, call 7 (issue 18): DDP with the final tree, and the rule's own effect: twice, a real run,
# vgpu with the slowdown beside collectives (default), vgpu without it (both rates 1), each 30 timed steps, each
# rank on 8 cores of its own (PIN_CORES_PER_RANK, read by train_step.py).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
for i in 1 2; do
  PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp" RUNS=1 OUT=$O/f$i timeout 120 tests/gpu/fidelity/run > $O/fidelity$i.txt 2>&1
  echo "-- pair $i"; grep -E "^ddp |host probe|FAIL" $O/fidelity$i.txt | cut -c1-150; pkill -f train_step.py
  PIN_CORES_PER_RANK=8 VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1 VGPU_PHYSICAL_DEVICES=0 timeout 80 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 $S ddp --steps 30 > $O/ddp_vgpu_off$i.log 2>&1
  echo "vgpu, rule off: $(grep -o '"step_ms": [0-9.]*' $O/ddp_vgpu_off$i.log)"; pkill -f train_step.py; echo "== t=$((SECONDS-T0))"
  [ $((SECONDS-T0)) -gt 200 ] && break
done
cd $OUT && tar czf all.tgz r && rm -rf r
