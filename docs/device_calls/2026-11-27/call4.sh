#!/usr/bin/env bash
# Session 2026-11-27, call 4 (tree 496b35e): call 2's nccl-tests runs to 16 MiB read 64-256 KiB
# 35-40 us an iteration under vgpu, call 3's runs to 1 MiB 21 us (as real): all_reduce and
# reduce_scatter to 16 MiB under vgpu with the timeline and the clock report, real beside; the
# call-rate bench again (today's second sample); the 8-rank row without --mps (lazy contexts now
# the default) against call 1's with it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt $O/eight
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
for op in all_reduce reduce_scatter; do
  LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 60 .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 16M -f 4 -n 20 -w 5 > $O/nt/${op}_real.log 2>&1
  VGPU_CLOCK_REPORT=$O/nt/${op}_clock_%p.jsonl VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 90 "${vrun[@]}" --gpus 2 --timeline $O/nt/${op}.trace.json -- .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 16M -f 4 -n 20 -w 5 > $O/nt/${op}_vgpu.log 2>&1
  echo "== $op t=$((SECONDS-T0))"; grep -E "^ +[0-9]+ " $O/nt/${op}_real.log $O/nt/${op}_vgpu.log | cut -c1-140
done
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 60 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
ONLY=eight EIGHT_VGPU2=0 RUNS_EIGHT_REAL=1 OUT=$O/eight timeout 250 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "== eight t=$((SECONDS-T0))"; grep -E "predicted|FAIL|ddp x|slowest|%" $O/eight/out.txt | cut -c1-400
for f in $O/eight/ddp_vgpu_*.log; do grep -o '"wall_ms": [0-9.]*' $f | head -1; done
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
