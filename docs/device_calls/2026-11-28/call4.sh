#!/usr/bin/env bash
# Nineteenth session, call 4 (issue 23: the 2-rank sim replay's forward reads ~3.4 ms shorter on the GPU than the
# passthrough's recording, call 3): the same DDP step recorded on the passthrough (2 virtual GPUs on GPU 0) and
# replayed on the sim backend from that database, each with its virtual timeline, brought back to compare kernel
# by kernel.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; mkdir -p $OUT/t
nvidia-smi -L; uptime; pkill -f train_step.py; sleep 1
source tests/gpu/vgpu_env.sh
step=(tests/gpu/fidelity/train_step.py ddp --batch 8 --seq 1024 --steps 12 --warmup 4)
VGPU_PHYSICAL_DEVICES=0 timeout 200 "${vrun[@]}" --gpus 2 --record $OUT/t/kernels.db --timeline $OUT/t/rec.trace.json -- \
  torchrun --standalone --nproc_per_node 2 "${step[@]}" > $OUT/t/rec.log 2>&1
grep -m1 '^RESULT' $OUT/t/rec.log | cut -c1-200
echo "== t=$((SECONDS-T0))"
timeout 200 "${vrun[@]}" --backend sim --gpus 2 --kernel-db $OUT/t/kernels.db --timeline $OUT/t/sim.trace.json -- \
  torchrun --standalone --nproc_per_node 2 "${step[@]}" > $OUT/t/sim.log 2>&1
grep -m1 '^RESULT' $OUT/t/sim.log | cut -c1-200
echo "== t=$((SECONDS-T0))"
ls -la $OUT/t
cd $OUT && tar czf t.tgz t && rm -rf t
