#!/usr/bin/env bash
# Seventeenth session, call 1 (issue 18): NCCL's host-bound loops on this host, three passes spread
# over the call (the loops of docs/device_calls/2026-11-27c/call5.sh, -m 1 only: every collective at
# 1-64 KiB, -n 200 -w 20 -c 0, -g 2 and -t 2 -g 1, twice a pass), to fit [collectives.host] to the
# median over hosts; between the passes the fidelity table's nccl-tests rows from 64 KiB to 4 MiB
# (real on both GPUs, then vgpu-run --gpus 2 on GPU 0, out of the box), and the CPU speed probe.
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
lscpu | head -20 > $O/lscpu.txt
python3 tests/gpu/fidelity/cpu_speed.py > $O/cpu_speed1.txt 2>&1; head -3 $O/cpu_speed1.txt; tail -2 $O/cpu_speed1.txt
loops $O/host1
python3 tests/gpu/fidelity/fit_nccl_host.py $O/host1 | tail -14
ONLY=nccl NCCL_MAX=4M NCCL_TESTS=$PWD/.gpu/nccl-tests OUT=$O/fid timeout 300 tests/gpu/fidelity/run .device 2>&1 | tail -30
echo "fid t=$((SECONDS-T0))"
loops $O/host2
python3 tests/gpu/fidelity/fit_nccl_host.py $O/host2 | tail -14
python3 tests/gpu/fidelity/cpu_speed.py > $O/cpu_speed2.txt 2>&1; head -3 $O/cpu_speed2.txt; tail -2 $O/cpu_speed2.txt
loops $O/host3
python3 tests/gpu/fidelity/fit_nccl_host.py $O/host3 | tail -14
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
