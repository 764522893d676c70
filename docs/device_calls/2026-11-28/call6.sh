#!/usr/bin/env bash
# Nineteenth session, call 6 (issue 23): call 5's 2-rank replay read 47.66 ms against the passthrough's 45.43
# (its backward 30.1 ms on the GPU against call 3's 25.3, one rank's host slower): the recording once and the
# 2-rank replay three times from that database, to see the replay's spread on one host with the merged tree.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
timeout 150 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 100 -- --batch 8 --seq 1024 > $O/s0.txt 2>&1
grep -E "^record|^sim" $O/s0.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
for i in 1 2; do
  timeout 100 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $O/s/kernels.db --out $O/s$i --timeout 90 -- --batch 8 --seq 1024 > $O/s$i.txt 2>&1
  grep -E "^sim" $O/s$i.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
done
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
