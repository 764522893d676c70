#!/usr/bin/env bash
# Session 2026-11-27, call 6 (tree 6737028): (a) whether each timed run's slow first iteration
# (nccl-tests 4-16 MiB read 5-13% slow) is the cheap CPU-time estimate: reduce_scatter 4-16 MiB
# under vgpu with the estimate and with VGPU_CPU_CLOCK=exact, timelines and clock reports, real
# beside; (b) where an 8-rank --mps step's 1.1 s of wall goes: the same 8-rank DDP run with vgpu-run's
# summary (launches measured on the GPU against those timed from what was measured).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt $O/e8
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
nt=(.gpu/nccl-tests/reduce_scatter_perf -g 2 -b 4M -e 16M -f 4 -n 20 -w 5)
LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 60 "${nt[@]}" > $O/nt/real.log 2>&1
for c in estimated exact; do
  VGPU_CPU_CLOCK=$c VGPU_CLOCK_REPORT=$O/nt/${c}_clock_%p.jsonl VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 90 "${vrun[@]}" --gpus 2 --timeline $O/nt/$c.trace.json -- "${nt[@]}" > $O/nt/$c.log 2>&1
done
echo "== nt t=$((SECONDS-T0))"; grep -E "^ +[0-9]+ " $O/nt/real.log $O/nt/estimated.log $O/nt/exact.log | cut -c1-150
VGPU_PHYSICAL_DEVICES=0 timeout 200 python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --mps --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 4 --seq 1024 --steps 6 --warmup 3 > $O/e8/vgpu8.log 2>&1
echo "== e8 rc=$? t=$((SECONDS-T0))"; grep -o '"step_ms": [0-9.]*\|"wall_ms": [0-9.]*' $O/e8/vgpu8.log | head -2; grep -v "^RESULT\|^W1127\|^\*\*\*" $O/e8/vgpu8.log | grep -i -E "launch|measured|signature|vgpu" | tail -25 | cut -c1-250
cd $OUT && tar czf all.tgz r
