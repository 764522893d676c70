#!/usr/bin/env bash
# Planned by the thirteenth session (2026-11-27; it had no device time, so not run), for the next
# session's first call after tests/gpu/stage: the fidelity table of the tree with the H200's
# pooled Simple fit (7c3e327: reduce-scatter's 16 MiB kernel 54.4 -> 52.8 us) and the TSan-era
# clock fixes (7b074c7), on one host: nccl-tests 64 KiB-16 MiB, DDP and FSDP2 two runs each; the
# host's CPU noted (the small sizes' real loops differ between hosts: 12-18 against 20-27 us).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d
nvidia-smi -L; lscpu | grep -E "Model name|MHz|^CPU\(s\)" | tee $O/lscpu.txt
ONLY="nccl ddp fsdp2" NCCL_MAX=16M RUNS=2 NCCL_TESTS=.gpu/nccl-tests OUT=$O/d timeout 300 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== d t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-200
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
