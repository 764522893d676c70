#!/usr/bin/env bash
# Session 2026-11-27 (eleventh), call 6: does a polling loop that takes no lock of vgpu's for its
# "not ready" answers (B: the query's op is looked up only once it hears "ready") shrink each timed
# run's slow first iteration? nccl-tests all_gather, reduce_scatter, all_reduce, 4-64 MiB, -n 5 and
# -n 100: real, vgpu A (before), vgpu B, vgpu B with VGPU_CPU_CLOCK=exact. (Call 5's
# VGPU_NCCL_POLITE_COPY was reverted: no gain.)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt
rm -rf .device/libA; cp -r .device/lib .device/libA; cp .device/lib_a/libcuda.so.1 .device/libA/passthrough/
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
for op in all_gather reduce_scatter all_reduce; do
  for n in 5 100; do
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 64M -f 4 -n $n -w 5 -c 0)
    LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 30 "${a[@]}" > $O/nt/${op}_n${n}_real.log 2>&1
    for v in A B Bexact; do
      lib=.device/lib; [ $v = A ] && lib=.device/libA
      clk=estimated; [ $v = Bexact ] && clk=exact
      VGPU_CPU_CLOCK=$clk VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 40 python3 vgpu/tools/vgpu-run --lib-dir $lib --bin-dir .device/bin --model $model --no-summary --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_$v.log 2>&1
    done
  done
  echo "$op t=$((SECONDS-T0))"
done
for f in $O/nt/*.log; do echo "$(basename $f .log) $(grep -E '^ +[0-9]+ ' $f | awk '{printf "%s:%s/%s ", $1, $6, $10}')"; done
cd $OUT && tar czf all.tgz r
