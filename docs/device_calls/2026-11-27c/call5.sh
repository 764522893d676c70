#!/usr/bin/env bash
# Twelfth session, call 5 (issue 18): the real NCCL host cost of a group, to model it. nccl-tests
# at small sizes (host-bound: the LL kernels take 6-8 us, an iteration 13-15) with 1, 2 and 4
# operations a group (-m: aggregated iterations, one group) on one thread driving both GPUs
# (-g 2: two communicators a group) and on two threads with one GPU each (-t 2 -g 1: one
# communicator a group), every collective; real only.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/host
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
  for m in 1 2 4; do
    for layout in g2 t2; do
      lay=(-g 2); [ $layout = t2 ] && lay=(-t 2 -g 1)
      for rep in 1 2; do
        timeout 30 .gpu/nccl-tests/${op}_perf "${lay[@]}" -b 1K -e 64K -f 8 -n 200 -w 20 -m $m -c 0 > $O/host/${op}_${layout}_m${m}_$rep.log 2>&1
      done
    done
  done
done
echo "host t=$((SECONDS-T0))"
python3 - $O/host <<'PY'
import sys, statistics
d = sys.argv[1]
def times(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) > 10 and f[0].isdigit():
            out[int(f[0])] = (float(f[5]), float(f[9]))
    return out
for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv", "alltoall"):
    for layout in ("g2", "t2"):
        cells = []
        for m in (1, 2, 4):
            v = []
            for rep in (1, 2):
                try:
                    for size, (a, b) in times(f"{d}/{op}_{layout}_m{m}_{rep}.log").items():
                        v += [a, b]
                except OSError:
                    pass
            cells.append(f"m{m} {statistics.median(v):6.2f} ({min(v):.2f}-{max(v):.2f})" if v else f"m{m} -")
        print(f"{op:15s} {layout}: " + " | ".join(cells))
PY
cd $OUT && tar czf all.tgz r
