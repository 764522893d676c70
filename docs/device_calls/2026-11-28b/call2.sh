#!/usr/bin/env bash
# Twenty-second session, call 2 (issue 18): where the real DDP step's backward is 3 ms longer than vgpu's
# (call 1: real backward 27.2-27.6 ms, vgpu 24.2-24.4; forward alike). One real step of each under
# torch.profiler (train_step.py --kernels: per-kernel totals and the step's trace), on one GPU and on both
# (DDP), NCCL's own log of its channels; vgpu's DDP (2 virtual GPUs on GPU 0) with its timeline.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
CUDA_VISIBLE_DEVICES=0 timeout 120 python3 $S single --steps 10 --kernels $O/k_single_%r.json > $O/single.log 2>&1; grep -o '"step_ms": [0-9.]*' $O/single.log; echo "== t=$((SECONDS-T0))"
NCCL_DEBUG=INFO NCCL_DEBUG_FILE=$O/nccl.%h.%p.log timeout 150 torchrun --standalone --nproc_per_node 2 $S ddp --steps 10 --kernels $O/k_ddp_%r.json > $O/ddp_real.log 2>&1; grep -o '"step_ms": [0-9.]*\|"forward_ms": [0-9.]*\|"backward_ms": [0-9.]*' $O/ddp_real.log; echo "== t=$((SECONDS-T0))"
VGPU_PHYSICAL_DEVICES=0 timeout 200 "${vrun[@]}" --gpus 2 --timeline $O/vgpu_ddp.trace.json -- torchrun --standalone --nproc_per_node 2 $S ddp --steps 10 > $O/ddp_vgpu.log 2>&1; grep -o '"step_ms": [0-9.]*\|"forward_ms": [0-9.]*\|"backward_ms": [0-9.]*' $O/ddp_vgpu.log; echo "== t=$((SECONDS-T0))"
for r in 0 1; do python3 tests/gpu/fidelity/kernel_compare.py $O/k_ddp_$r.json $O/vgpu_ddp.trace.json $r 25 > $O/compare_$r.txt 2>&1; head -40 $O/compare_$r.txt | cut -c1-200; done
grep -h "Channel\|nchannels\|NCCL_P2P\|via P2P" $O/nccl.*.log | head -20
ls -la $O; cd $OUT && tar czf all.tgz r && rm -rf r
