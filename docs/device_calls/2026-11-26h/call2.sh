#!/usr/bin/env bash
# Session 2026-11-26h, call 2 (tree fe203bd): the call-rate bench (3 rounds: 5 no longer fit 40 s);
# FSDP2 on 2 ranks, real with its kernels (torch.profiler) and under vgpu with the summary, the
# clock report, the timeline and the host samples: where call 1's +27.9% came from.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model)
real() { timeout 90 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 "$@"; }
real --kernels $O/real_k_%r.json > $O/real1.log 2>&1
echo "real1 t=$((SECONDS-T0))"; grep RESULT $O/real1.log | cut -c1-700
VGPU_PHYSICAL_DEVICES=0 VGPU_CLOCK_REPORT=$O/clock1_%p.jsonl timeout 200 "${vrun[@]}" --gpus 2 --timeline $O/vgpu1.trace.json -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 > $O/vgpu1.log 2>&1
echo "vgpu1 t=$((SECONDS-T0))"; grep -E "RESULT|kernel launches|measured" $O/vgpu1.log | cut -c1-700
real > $O/real2.log 2>&1
echo "real2 t=$((SECONDS-T0))"; grep RESULT $O/real2.log | cut -c1-700
VGPU_PHYSICAL_DEVICES=0 VGPU_HOST_SAMPLES=$O/samples_%p.jsonl VGPU_CLOCK_REPORT=$O/clock2_%p.jsonl timeout 200 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 > $O/vgpu2.log 2>&1
echo "vgpu2 t=$((SECONDS-T0))"; grep -E "RESULT|kernel launches|measured" $O/vgpu2.log | cut -c1-700
cd $OUT && tar czf all.tgz r
