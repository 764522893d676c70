#!/usr/bin/env bash
# Twelfth session, call 3 (issue 18): the real nccl-tests curves from 16 B to 1 GiB again (default
# mode twice, CUDA-graph mode once, as 2026-11-26c call 1), for a collective model fitted to two
# days' machines instead of one (today's real reduce-scatter and all-gather kernels ran 5-10%
# faster than 2026-11-26's fit: call 2); then each collective at 4-64 MiB with -n 5 / -n 100
# under vgpu and real (the kernels' slope and the first iteration's intercept).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/curves $O/nt
nvidia-smi -L
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
  for mode in a b g; do
    extra=(); [ $mode = g ] && extra=(-G 20)
    taskset -c 0-15 timeout 60 .gpu/nccl-tests/${op}_perf -g 2 -b 16 -e 1G -f 4 -n 20 -w 5 "${extra[@]}" > $O/curves/${op}_$mode.log 2>&1
  done
done
echo "real curves t=$((SECONDS-T0))"
for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
  for n in 5 100; do
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 64M -f 4 -n $n -w 5 -c 0)
    taskset -c 0-15 timeout 30 "${a[@]}" > $O/nt/${op}_n${n}_real.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 taskset -c 0-15 timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_vgpu.log 2>&1
  done
done
echo "slopes t=$((SECONDS-T0))"
python3 - $O/nt <<'PY'
import sys
d = sys.argv[1]
def times(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) > 10 and f[0].isdigit():
            out[int(f[0])] = (float(f[5]), float(f[9]))
    return out
for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv", "alltoall"):
    for kind in ("real", "vgpu"):
        try:
            a, b = times(f"{d}/{op}_n5_{kind}.log"), times(f"{d}/{op}_n100_{kind}.log")
        except OSError:
            continue
        row = []
        for size in sorted(a):
            if size not in b: continue
            for j, name in ((0, "oop"), (1, "ip")):
                g = (a[size][j] - b[size][j]) * 5 * 100 / 95
                row.append(f"{size>>20}M {name} k {b[size][j] - g / 100:6.2f} g {g:6.1f}")
        print(f"{op:15s} {kind:5s}: " + " | ".join(row))
PY
cd $OUT && tar czf all.tgz r
