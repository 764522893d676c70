#!/usr/bin/env bash
# Session 2026-11-27, call 3 (tree 496b35e): where call 2's small nccl-tests sizes lose 5-16 us an
# iteration under vgpu (all_reduce and broadcast 64 KiB to 1 MiB under vgpu with the timeline and
# the clock report); record once and simulate at 2, 8 and 64 ranks (full batch); the same 8-rank
# full-batch DDP step on the passthrough with --mps, which 8 ranks fit now (the sim's 8 against it).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt $O/e8
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
for op in all_reduce broadcast; do
  LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 60 .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n 20 -w 5 > $O/nt/${op}_real.log 2>&1
  VGPU_CLOCK_REPORT=$O/nt/${op}_clock_%p.jsonl VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 90 "${vrun[@]}" --gpus 2 --timeline $O/nt/${op}.trace.json -- .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n 20 -w 5 > $O/nt/${op}_vgpu.log 2>&1
  echo "== $op t=$((SECONDS-T0))"; grep -E "^ +[0-9]+ " $O/nt/${op}_real.log $O/nt/${op}_vgpu.log | cut -c1-140
done
timeout 330 tests/gpu/sim_scale --out $O/full --ranks 2 8 64 --timeout 100 -- --batch 8 --seq 1024 > $O/full.txt 2>&1
echo "full t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| [0-9]|ranks:" $O/full.txt | head -14
left=$((570-SECONDS+T0)); echo "left $left"
[ $left -gt 60 ] && VGPU_PHYSICAL_DEVICES=0 timeout $left "${vrun[@]}" --mps --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 8 --seq 1024 --steps 6 --warmup 3 > $O/e8/vgpu8.log 2>&1
echo "== e8 rc=$? t=$((SECONDS-T0))"; grep RESULT $O/e8/vgpu8.log | cut -c1-300; tail -3 $O/e8/vgpu8.log | cut -c1-300
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
