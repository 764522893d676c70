#!/usr/bin/env bash
# Session 2026-11-26f, call 5: record once, simulate at scale (issue 23): tests/gpu/sim_scale records
# the GPT-2 DDP step on the passthrough at 2 virtual GPUs (GPU 0) and replays it on the sim backend
# at 2, 8 and 64 ranks (no GPU), one table.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
timeout 340 tests/gpu/sim_scale --out $O/sim_scale --timeout 160 > $O/sim_scale.txt 2>&1
echo "sim_scale rc=$? t=$((SECONDS-T0))"
cat $O/sim_scale.txt | cut -c1-300 | tail -40
rm -f $O/sim_scale/*.db-wal $O/sim_scale/*.db-shm
du -sh $O/sim_scale
cd $OUT && tar czf all.tgz r && rm -rf r
