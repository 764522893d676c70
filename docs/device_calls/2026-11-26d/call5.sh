#!/usr/bin/env bash
# Session 2026-11-26d, call 5 (the merged tree: callcost2, simmem2, batchflows): DDP and the one-GPU
# steps real vs vgpu (cores 0-7, GPU 0 and both for real DDP); the call-overhead bench on GPU 1
# (cores 8-15) first; beside them, PyTorch DDP on 64 virtual GPUs of the sim backend with the
# memory report (cores 16-31, no GPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/f $O/s
( rm -f $O/s/mem.jsonl; VGPU_SIM_MEMORY_REPORT=$O/s/mem.jsonl SCALE_LOG=$O/s/s64.log taskset -c 16-31 timeout 190 python3 tests/gpu/sim_torch_scale.py 64 > $O/s/summary.txt 2>&1
  python3 tests/programs/memory_report_summary.py $O/s/mem.jsonl > $O/s/mem.txt 2>&1 ) &
SC=$!
CUDA_VISIBLE_DEVICES=1 taskset -c 8-15 timeout 40 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/overhead.txt 2>&1
echo "bench t=$((SECONDS-T0))"
ONLY="ddp single" RUNS=1 OUT=$O/f taskset -c 0-7 timeout $((205-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/f/out.txt 2>&1
echo "fid t=$((SECONDS-T0))"
wait $SC; echo "sim t=$((SECONDS-T0))"
tail -8 $O/overhead.txt; grep -E "%|FAIL" $O/f/out.txt | cut -c1-200; tail -3 $O/s/summary.txt | cut -c1-400; cat $O/s/mem.txt | head -30
cd $O && tar czf all.tgz overhead.txt f s && rm -rf f s overhead.txt
