#!/usr/bin/env bash
# Eighteenth session, call 7 (issue 18; the final tree, another host: two more pairs of each step): the DDP and FSDP2 steps of GPT-2 small, real on both GPUs against
# vgpu with 2 virtual GPUs on GPU 0, with NCCL's host cost refitted last session (the median of three
# hosts), each rank on 8 cores of its own, 30 timed steps, two runs of each side alternating (the
# fidelity table's figure), on one host; the Python host probe printed beside each run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; mkdir -p $OUT/f
nvidia-smi -L; uptime
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp fsdp2" RUNS=2 OUT=$OUT/f timeout 280 tests/gpu/fidelity/run > $OUT/fidelity.txt 2>&1
tail -40 $OUT/fidelity.txt | cut -c1-400
echo "== t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz f fidelity.txt
