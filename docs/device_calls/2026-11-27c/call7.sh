#!/usr/bin/env bash
# Twelfth session, call 7 (tree ce9bc8c): NCCL's host cost model against NCCL's host time as
# measured under vgpu, on one machine: nccl-tests' six collectives 64 KiB-16 MiB (-n 20 -w 5, the
# fidelity run's command), real, vgpu with the model (the default) and vgpu with
# [collectives.host] enabled = false, two rounds alternating.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt
printf '[collectives.host]\nenabled = false\n' > $O/measured.toml
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
for rep in 1 2; do
  for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
    [ $((SECONDS-T0)) -gt 400 ] && break
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 16M -f 4 -n 20 -w 5)
    timeout 30 "${a[@]}" > $O/nt/${op}_real_$rep.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_model_$rep.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 timeout 40 "${vrun[@]}" --gpus 2 --config $O/measured.toml -- "${a[@]}" > $O/nt/${op}_measured_$rep.log 2>&1
  done
done
echo "nt t=$((SECONDS-T0))"
python3 - $O/nt <<'PY'
import sys
d = sys.argv[1]
def times(path):
    out = {}
    try:
        for line in open(path):
            f = line.split()
            if len(f) > 10 and f[0].isdigit():
                out[int(f[0])] = (float(f[5]), float(f[9]))
    except OSError:
        pass
    return out
for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv", "alltoall"):
    for rep in (1, 2):
        r, m, x = (times(f"{d}/{op}_{k}_{rep}.log") for k in ("real", "model", "measured"))
        cells = []
        for size in sorted(r):
            if size in m and size in x:
                rr = sum(r[size]) / 2
                cells.append(f"{size>>10}K real {rr:6.2f} model {100*(sum(m[size])/2/rr-1):+6.1f}% measured {100*(sum(x[size])/2/rr-1):+6.1f}%")
        print(f"{op:15s} {rep}: " + " | ".join(cells))
PY
cd $OUT && tar czf all.tgz r
