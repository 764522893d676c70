#!/usr/bin/env bash
# Seventeenth session, call 3 (issue 18): NCCL's host-bound loops on a third host (as call 1), the
# host cost model fitted to the median over the three hosts measured (fit_nccl_host.py with the
# two kept tables and this host's first pass), and the fidelity table's nccl-tests rows from 64 KiB
# to 4 MiB with the embedded default and with that pooled fit (--config), each against the real run
# beside it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
loops() {  # $1: pass folder
  mkdir -p $1
  for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
    for layout in g2 t2; do
      lay=(-g 2); [ $layout = t2 ] && lay=(-t 2 -g 1)
      for rep in 1 2; do
        LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 30 .gpu/nccl-tests/${op}_perf "${lay[@]}" -b 1K -e 64K -f 8 -n 200 -w 20 -m 1 -c 0 > $1/${op}_${layout}_m1_$rep.log 2>&1
      done
    done
  done
  echo "loops $1 t=$((SECONDS-T0))"
}
python3 tests/gpu/fidelity/cpu_speed.py > $O/cpu_speed1.txt 2>&1; head -2 $O/cpu_speed1.txt; tail -1 $O/cpu_speed1.txt
loops $O/host1
python3 tests/gpu/fidelity/fit_nccl_host.py $O/host1 | tail -14
python3 tests/gpu/fidelity/fit_nccl_host.py tests/data/nccl_host_h200x2_2026-11-27.txt tests/data/nccl_host_h200x2_2026-11-27h-call1.txt $O/host1 > $O/pooled_fit.txt
cat $O/pooled_fit.txt
sed -n '/^\[collectives.host\]/,/^operation/p' $O/pooled_fit.txt > $O/pooled.toml
for variant in default pooled; do
  va=""; [ $variant = pooled ] && va="--config $O/pooled.toml"
  VRUN_ARGS="$va" ONLY=nccl NCCL_MAX=4M NCCL_TESTS=$PWD/.gpu/nccl-tests OUT=$O/fid_$variant timeout 240 tests/gpu/fidelity/run .device 2>&1 | tail -27
  echo "fid $variant t=$((SECONDS-T0))"
done
loops $O/host2
python3 tests/gpu/fidelity/fit_nccl_host.py $O/host2 | tail -14
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
