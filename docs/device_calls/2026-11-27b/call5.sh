#!/usr/bin/env bash
# Session 2026-11-27 (eleventh), call 5: does copying NCCL's payloads with non-temporal stores and
# prefetches (VGPU_NCCL_POLITE_COPY=1, the new default) shrink each timed run's slow first iteration
# (call 1: 35-130 us of host time under vgpu against 10-30 us real)? nccl-tests all_gather,
# reduce_scatter, all_reduce, 4-64 MiB, -n 5 and -n 100, real and vgpu with the copy off and on.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
for op in all_gather reduce_scatter all_reduce; do
  for n in 5 100; do
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 64M -f 4 -n $n -w 5 -c 0)
    LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 30 "${a[@]}" > $O/nt/${op}_n${n}_real.log 2>&1
    for p in 0 1; do
      VGPU_NCCL_POLITE_COPY=$p VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_vgpu$p.log 2>&1
    done
  done
  echo "$op t=$((SECONDS-T0))"
done
for f in $O/nt/*.log; do echo "$(basename $f .log) $(grep -E '^ +[0-9]+ ' $f | awk '{printf "%s:%s ", $1, $6}')"; done
cd $OUT && tar czf all.tgz r
