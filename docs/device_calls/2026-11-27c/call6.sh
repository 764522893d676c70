#!/usr/bin/env bash
# Twelfth session, call 6 (tree ce9bc8c: NCCL's host cost model, [collectives.host]): the
# fidelity table (nccl-tests 64 KiB-16 MiB, DDP and FSDP2 two runs each), then reduce_scatter,
# all_gather and all_reduce 4-16 MiB with -n 5 / -n 100 on both sides (the first iteration's
# intercept, 40-60 us under vgpu before against the real 15-20).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d $O/nt
ONLY="nccl ddp fsdp2" NCCL_MAX=16M RUNS=2 NCCL_TESTS=.gpu/nccl-tests OUT=$O/d timeout 330 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== d t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-200
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
for op in reduce_scatter all_gather all_reduce; do
  for n in 5 100; do
    [ $((SECONDS-T0)) -gt 520 ] && break
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 16M -f 4 -n $n -w 5 -c 0)
    timeout 20 "${a[@]}" > $O/nt/${op}_n${n}_real.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 timeout 30 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_vgpu.log 2>&1
  done
done
echo "nt t=$((SECONDS-T0))"
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
for op in ("reduce_scatter", "all_gather", "all_reduce"):
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
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
