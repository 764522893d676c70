#!/usr/bin/env bash
# Eighteenth session, call 5 (issues 21 and 23): sim30's single vgpud request a group against the build
# before it (main at 5096859, staged in .device-base by copying call 4's .device), on one host: issue 23's
# chain with the merged tree (record the DDP step at 2 virtual GPUs of GPU 0, replay at 2, 8 and 64 ranks),
# then the 8-rank replay from the same database with the older build and the new one alternately, twice.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/s
nvidia-smi -L; nproc; uptime
timeout 300 tests/gpu/sim_scale --ranks 2 8 64 --out $O/s --timeout 150 -- --batch 8 --seq 1024 > $O/sim_scale.txt 2>&1
cut -c1-700 $O/sim_scale.txt
echo "== sim_scale t=$((SECONDS-T0))"
for r in 1 2; do
  for b in base new; do
    lib=.device/lib; [ $b = base ] && lib=.device-base/lib
    timeout 100 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --lib $lib --out $O/$b$r --timeout 90 -- --batch 8 --seq 1024 > $O/$b$r.txt 2>&1
    echo "$b$r: $(grep '^sim 8 ranks' $O/$b$r.txt | cut -c1-200)"
    echo "== $b$r t=$((SECONDS-T0))"
  done
done
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
