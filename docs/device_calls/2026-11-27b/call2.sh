#!/usr/bin/env bash
# Session 2026-11-27 (eleventh), call 2. (a) Which change made the passthrough measure ~90 launches a
# step per rank again in 2-rank DDP (call 1; call 7 of the tenth session, tree 206a17c: 2-3): the
# same 2-rank DDP under three builds of the passthrough (206a17c, 1a090e7 = + work-key sharing,
# main = + callcost10), launches measured per step and rank, VGPU_LOG_LEVEL=debug's "measured" lines
# on main. (b) Where nccl-tests' first timed iteration's host time goes: reduce_scatter and
# all_gather 4-16 MiB, -n 5, under vgpu with VGPU_CLOCK_TRACE and the timeline.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/b $O/nt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
for v in 206a17c 1a090e7 main; do
  lib=.device/lib; [ $v != main ] && { rm -rf .device/lib_$v; cp -r .device/lib .device/lib_$v; cp .device/bisect/$v/libcuda.so.1 .device/lib_$v/passthrough/; lib=.device/lib_$v; }
  lvl=warn; [ $v = main ] && lvl=debug
  VGPU_LOG_LEVEL=$lvl VGPU_PHYSICAL_DEVICES=0 timeout 100 python3 vgpu/tools/vgpu-run --lib-dir $lib --bin-dir .device/bin --model $model --no-summary --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 12 --warmup 3 > $O/b/$v.log 2>&1
  echo "== $v rc=$? t=$((SECONDS-T0))"
  grep '^RESULT' $O/b/$v.log | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print('step', d['step_ms'], 'wall', d['wall_ms'])
for r in d.get('ranks_measured_per_step', []): print('  measured per step', r)" || tail -5 $O/b/$v.log
done
grep -c "vgpu: measured" $O/b/main.log
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
ls -la $nv
for op in reduce_scatter all_gather; do
  a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 16M -f 4 -n 5 -w 5 -c 0)
  LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 30 "${a[@]}" > $O/nt/${op}_real.log 2>&1
  VGPU_CLOCK_TRACE=$O/nt/${op}_trace_%p.jsonl VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 40 "${vrun[@]}" --gpus 2 --timeline $O/nt/${op}.trace.json -- "${a[@]}" > $O/nt/${op}_vgpu.log 2>&1
  echo "$op t=$((SECONDS-T0))"; grep -E '^ +[0-9]+ ' $O/nt/${op}_real.log $O/nt/${op}_vgpu.log | cut -c1-120
done
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
