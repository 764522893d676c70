#!/usr/bin/env bash
# Session 2026-11-27 (eleventh), call 3 (tree: launch stats count work-key launches as taken from
# the job; clock trace with clock reads): (a) nccl-tests reduce_scatter 4-16 MiB -n 5 under vgpu with
# VGPU_CLOCK_TRACE (where the first timed iteration's host time goes, now with the program's clock
# reads); (b) FSDP2 and DDP on 2 ranks, two runs of each side, FSDP2's vgpu runs with the timeline
# (its backward read 45 against 26 ms in call 1); (c) 8-rank DDP --mps, measured per step.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d $O/nt $O/f
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
a=(.gpu/nccl-tests/reduce_scatter_perf -g 2 -b 4M -e 16M -f 4 -n 5 -w 5 -c 0)
VGPU_CLOCK_TRACE=$O/nt/trace_%p.jsonl VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 40 "${vrun[@]}" --gpus 2 --timeline $O/nt/rs.trace.json -- "${a[@]}" > $O/nt/rs_vgpu.log 2>&1
echo "nt t=$((SECONDS-T0))"; grep -E '^ +[0-9]+ ' $O/nt/rs_vgpu.log | cut -c1-120
ONLY=fsdp2 RUNS=2 TIMELINE=1 OUT=$O/f timeout 330 tests/gpu/fidelity/run .device > $O/f/out.txt 2>&1
echo "== f t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/f/out.txt | cut -c1-300
for f in $O/f/fsdp2_vgpu_*.log; do grep '^RESULT' $f | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print('vgpu step', d['step_ms'], 'fwd/bwd/opt', d['forward_ms'], d['backward_ms'], d['optimizer_ms'])
for r in d.get('ranks_measured_per_step', []): print('  measured per step', r)"; done
for f in $O/f/fsdp2_real_*.log; do grep '^RESULT' $f | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print('real step', d['step_ms'], 'fwd/bwd/opt', d['forward_ms'], d['backward_ms'], d['optimizer_ms'])"; done
left=$((560-SECONDS+T0)); echo "left $left"
[ $left -gt 80 ] && VGPU_PHYSICAL_DEVICES=0 timeout 75 python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --mps --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 4 --seq 1024 --steps 12 --warmup 3 > $O/e8.log 2>&1
echo "== e8 rc=$? t=$((SECONDS-T0))"; grep -E "kernel launches with a signature" $O/e8.log | cut -c1-200
grep '^RESULT' $O/e8.log | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print('step', d['step_ms'], 'wall', d['wall_ms'])
for r in d.get('ranks_measured_per_step', []): print('  measured per step', r)" || tail -3 $O/e8.log
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
