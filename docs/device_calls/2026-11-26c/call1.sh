#!/usr/bin/env bash
# Session 2026-11-26c, call 1: every GPU check on the final tree of the last session (split over
# both GPUs), PyTorch DDP on 64 virtual GPUs of the sim backend (cores 16-31, no GPU), then the
# real nccl-tests curves from 16 B to 1 GiB (default mode twice, CUDA-graph mode once) for the
# collective model's fit, and nccl-tests under vgpu as the session's baseline.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/g0 $O/g1 $O/scale $O/nt
nvidia-smi -L
( SCALE_LOG=$O/scale/s64.log taskset -c 16-31 timeout 520 python3 tests/gpu/sim_torch_scale.py 64 > $O/scale/summary.txt 2>&1 ) &
SC=$!
( GPU=0 OUT=$O/g0 ONLY="devices gpt2_every_device gpt2_process_per_device triton jax container_swap free_at_start replay shared_pages" taskset -c 0-7 timeout 330 tests/gpu/run-gpu-tests .device/lib > $O/g0/summary.txt 2>&1; echo "g0 rc=$? t=$((SECONDS-T0))" >> $O/g0/summary.txt ) &
G0=$!
( GPU=1 OUT=$O/g1 STEP_RUNS=7 ONLY="step_time_runs oom_batch" taskset -c 8-15 timeout 330 tests/gpu/run-gpu-tests .device/lib > $O/g1/summary.txt 2>&1; echo "g1 rc=$? t=$((SECONDS-T0))" >> $O/g1/summary.txt ) &
G1=$!
wait $G0 $G1
cat $O/g0/summary.txt $O/g1/summary.txt | grep -E "PASS|FAIL|==|rc="
echo "t=$((SECONDS-T0))"
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
  for mode in a b g; do
    extra=(); [ $mode = g ] && extra=(-G 20)
    LD_LIBRARY_PATH=$nv taskset -c 0-15 timeout 60 .gpu/nccl-tests/${op}_perf -g 2 -b 16 -e 1G -f 4 -n 20 -w 5 "${extra[@]}" > $O/nt/${op}_$mode.log 2>&1
  done
done
echo "real curves t=$((SECONDS-T0))"
ONLY=nccl RUNS=1 NCCL_TESTS=.gpu/nccl-tests OUT=$O/fid taskset -c 0-15 timeout $((535-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/fid/out.txt 2>&1
tail -60 $O/fid/out.txt | grep -E "MISSED|within|FAIL" | head -40
echo "t=$((SECONDS-T0))"
kill $SC 2>/dev/null; sleep 1; tail -5 $O/scale/summary.txt | cut -c1-300
cd $O && tar czf all.tgz g0 g1 scale nt fid && rm -rf g0 g1 scale nt fid
