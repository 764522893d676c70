#!/usr/bin/env bash
# Twenty-second session, call 5 (issue 18): the final tree (kernels beside a collective's kernel at 0.5 while it
# moves data, 0.8 while it waits for its peers): DDP and FSDP2 pairs, real on both GPUs and vgpu (2 virtual GPUs
# on GPU 0), alternating, twice each, each rank on 8 cores of its own.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp fsdp2" RUNS=2 OUT=$O/f timeout 500 tests/gpu/fidelity/run > $O/fidelity.txt 2>&1
grep -E "^(ddp|fsdp2) |host probe|FAIL" $O/fidelity.txt | cut -c1-150; pkill -f train_step.py; echo "== t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r && rm -rf r
