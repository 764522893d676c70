#!/usr/bin/env bash
# Twelfth session, call 1, on the tree of
# e4e04a6 or later, after tests/gpu/stage: (a) the call-rate bench with 7 rounds (its per-round
# median and range); (b) nccl-tests reduce_scatter 4-16 MiB -n 5 under vgpu with VGPU_CLOCK_TRACE,
# summarised with vgpu-clock-trace: how the main thread waited (slept, preempted) before its cold
# first-iteration stretches (median 40 us of extra host time against the real 17 in call 6);
# (c) FSDP2 on 2 ranks, 6 steps, with VGPU_CLOCK_TRACE, beside the real run: where its forward and
# backward hosts' 25-30% go (call 7).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt $O/f
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 120 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 7 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
a=(.gpu/nccl-tests/reduce_scatter_perf -g 2 -b 4M -e 16M -f 4 -n 5 -w 5 -c 0)
timeout 40 "${a[@]}" > $O/nt/rs_real.log 2>&1
VGPU_CLOCK_TRACE=$O/nt/trace_%p.jsonl VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/rs_vgpu.log 2>&1
for f in $O/nt/trace_*.jsonl; do p=$(basename $f .jsonl); p=${p#trace_}; python3 vgpu/tools/vgpu-clock-trace --top 12 --tid $p $f > $O/nt/summary.txt; done
echo "nt t=$((SECONDS-T0))"; head -40 $O/nt/summary.txt; grep -E "^ +[0-9]+ " $O/nt/rs_real.log $O/nt/rs_vgpu.log
timeout 120 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 6 --warmup 3 > $O/f/real.log 2>&1
VGPU_CLOCK_TRACE=$O/f/trace_%p.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 6 --warmup 3 > $O/f/vgpu.log 2>&1
echo "f t=$((SECONDS-T0))"; grep -h '^RESULT' $O/f/real.log $O/f/vgpu.log | cut -c1-300
for f in $O/f/trace_*.jsonl; do python3 vgpu/tools/vgpu-clock-trace --top 12 $f | head -60; break; done
cd $OUT && tar czf all.tgz r
