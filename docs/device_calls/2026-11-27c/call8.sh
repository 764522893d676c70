#!/usr/bin/env bash
# Twelfth session, call 8 (tree 8f8ef35: NCCL's host cost model covering the group's launches,
# group 0.5 us): the fidelity table (nccl-tests 64 KiB-16 MiB, DDP and FSDP2 two runs each).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d
ONLY="nccl ddp fsdp2" NCCL_MAX=16M RUNS=2 NCCL_TESTS=.gpu/nccl-tests OUT=$O/d timeout 290 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== d t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-200
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
