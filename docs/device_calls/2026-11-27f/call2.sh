#!/usr/bin/env bash
# Fifteenth session, call 2 (tree 8633a08): the real 2-rank steps moved 45.8-55.6 ms (DDP) and
# 143.8-188.9 (FSDP2) between runs in call 1, one host, their host phases' thread CPU 6.7-20.4 ms for
# the same forward. Each rank on 8 distinct cores of its own (PIN_CORES_PER_RANK=8, real and vgpu
# alike), three alternating rounds; the host's NUMA layout, GPU affinity and KVM steal time printed;
# then the 1-GPU torch.compile step, real and under vgpu (not measured since the sixth session).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; lscpu | grep -iE "numa|model name|mhz|socket|thread"; nvidia-smi topo -m
steal() { awk '/^cpu /{print "steal_ticks", $9, "total", $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
steal
source tests/gpu/vgpu_env.sh
export PIN_CORES_PER_RANK=8
for i in 1 2 3; do
  for mode in ddp fsdp2; do
    timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py $mode --steps 12 --warmup 3 > $O/${mode}_real_$i.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py $mode --steps 12 --warmup 3 > $O/${mode}_vgpu_$i.log 2>&1
  done
  echo "== round $i t=$((SECONDS-T0))"; steal
done
unset PIN_CORES_PER_RANK
CUDA_VISIBLE_DEVICES=0 timeout 120 python3 tests/gpu/fidelity/train_step.py single --compile --steps 20 --warmup 5 > $O/compile_real.log 2>&1
echo "== compile real t=$((SECONDS-T0))"
VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 1 -- python3 tests/gpu/fidelity/train_step.py single --compile --steps 20 --warmup 5 > $O/compile_vgpu.log 2>&1
echo "== compile vgpu t=$((SECONDS-T0))"
for f in $O/*_real*.log $O/*_vgpu*.log; do
  echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "phases", r["forward_ms"], r["backward_ms"], r["optimizer_ms"], "host", [[round(x,1) for x in h] for h in r.get("ranks_host_ms", [])])' 2>&1 | cut -c1-400)"
done
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
