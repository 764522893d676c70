#!/usr/bin/env bash
# Fourteenth session, call 4: why FSDP2 reads +16% under vgpu (call 1: its ranks burn ~2x the real
# CPU and still measure 7-22 launches a step at step 30). Two vgpu runs of the 2-rank FSDP2 step
# (15 steps, 3 warm-up): (a) VGPU_LOG_LEVEL=debug, whose "vgpu: measured" lines name every measured
# launch's signature (which kernels never settle); (b) VGPU_HOST_SAMPLES and VGPU_CLOCK_REPORT
# (whose code burns the CPU; where each thread's virtual time came from). Then one real run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/samples
nvidia-smi -L
source tests/gpu/vgpu_env.sh
a=(tests/gpu/fidelity/train_step.py fsdp2 --steps 15 --warmup 3)
VGPU_LOG_LEVEL=debug VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/debug.log 2>&1
grep RESULT $O/debug.log | cut -c1-300; grep -c "vgpu: measured" $O/debug.log; grep "vgpu: measured" $O/debug.log | gzip > $O/measured.txt.gz; grep -v "vgpu: measured" $O/debug.log | tail -c 300000 | gzip > $O/debug_rest.txt.gz; rm $O/debug.log
echo "== debug t=$((SECONDS-T0))"
VGPU_HOST_SAMPLES=$O/samples/%p.jsonl VGPU_CLOCK_REPORT=$O/clock_%p.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/samples.log 2>&1
grep RESULT $O/samples.log | cut -c1-300
echo "== samples t=$((SECONDS-T0))"
timeout 100 torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/real.log 2>&1
grep RESULT $O/real.log | cut -c1-300
echo "== real t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
