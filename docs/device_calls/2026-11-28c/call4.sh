#!/usr/bin/env bash
# Twenty-fourth session, call 4 (issue 18), 2 x H200, tree c82b3f5: nccl-tests (NVIDIA/nccl-tests
# 2.19.6 built here against NCCL 2.28.9, carried as .gpu/nccl-tests) six collectives 64 KiB to 16 MiB,
# real on both GPUs against vgpu with 2 virtual GPUs on GPU 0; then FSDP2 pairs, each rank on 8 cores.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
ONLY=nccl NCCL_MAX=16M RUNS=1 NCCL_TESTS=$PWD/.gpu/nccl-tests OUT=$O/n timeout 300 tests/gpu/fidelity/run > $O/nccl.txt 2>&1
tail -40 $O/nccl.txt | cut -c1-170; echo "== t=$((SECONDS-T0))"
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="fsdp2" RUNS=2 OUT=$O/f timeout $((560-(SECONDS-T0))) tests/gpu/fidelity/run > $O/fidelity.txt 2>&1
grep -E "^fsdp2 |host probe|FAIL" $O/fidelity.txt | cut -c1-200; pkill -f train_step.py; echo "== t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r && rm -rf r
