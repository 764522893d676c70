#!/usr/bin/env bash
# Session 2026-11-27 (eleventh), call 1, tree d55d632 (callcost10, simcore14/15, settled durations
# shared by work key; none measured on a GPU yet): (a) the call-rate bench; (b) nccl-tests at 4, 16
# and 64 MiB with -n 5 and -n 100 on both sides, to split each timed run's time into the kernels'
# (the slope) and the first iteration's host offset (the intercept); (c) 8-rank DDP --mps, launches
# measured per step and rank; (d) DDP and FSDP2 on 2 ranks, one run of each side.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d $O/nt
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 50 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
for op in reduce_scatter all_gather all_reduce sendrecv alltoall broadcast; do
  for n in 5 100; do
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 64M -f 4 -n $n -w 5 -c 0)
    LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 30 "${a[@]}" > $O/nt/${op}_n${n}_real.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_vgpu.log 2>&1
  done
  echo "$op t=$((SECONDS-T0))"
done
for f in $O/nt/*.log; do echo "$(basename $f .log) $(grep -E '^ +[0-9]+ ' $f | awk '{printf "%s:%s ", $1, $6}')"; done
VGPU_PHYSICAL_DEVICES=0 timeout 70 python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --mps --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 4 --seq 1024 --steps 12 --warmup 3 > $O/e8.log 2>&1
echo "== e8 rc=$? t=$((SECONDS-T0))"; grep -E "kernel launches with a signature" $O/e8.log | cut -c1-200
grep '^RESULT' $O/e8.log | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print('step', d['step_ms'], 'wall', d['wall_ms'])
for r in d.get('ranks_measured_per_step', []): print('  measured per step', r)" || tail -5 $O/e8.log
left=$((580-SECONDS+T0)); echo "left $left"
[ $left -gt 60 ] && ONLY="ddp fsdp2" RUNS=1 OUT=$O/d timeout $left tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== d t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-300
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
