#!/usr/bin/env bash
# Seventeenth session, call 6 (issue 18): does nccl-tests' data check (-c 1, its default and the
# fidelity rows') change the real small-size iteration against the host loops' -c 0? Every
# collective, -g 2, 64 KiB-1 MiB, -n 200 -w 20, -c 0 and -c 1 alternating, twice; real only.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
for rep in 1 2; do
  for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
    for c in 0 1; do
      LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 30 .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n 200 -w 20 -c $c > $O/${op}_c${c}_$rep.log 2>&1
    done
  done
done
echo "t=$((SECONDS-T0))"
python3 - $O <<'PY'
import sys
sys.path.insert(0, "tests/gpu/fidelity")
import nccl_tests_table as t
d = sys.argv[1]
print("op rep: -c 0 (64K 256K 1M, out-of-place us) | -c 1")
for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv", "alltoall"):
    for rep in (1, 2):
        row = []
        for c in (0, 1):
            x = t.times(f"{d}/{op}_c{c}_{rep}.log")
            row.append(" ".join(f"{x[s][0]:6.2f}" for s in sorted(x)))
        print(f"{op:15s} {rep}: {row[0]} | {row[1]}")
PY
cd $OUT && tar czf all.tgz r
