#!/usr/bin/env bash
# Twelfth session, call 4 (issue 18): is nccl-tests' cold first iteration under vgpu the job's main
# thread sharing a physical core (SMT sibling) with threads busy only under vgpu (NCCL's proxy
# threads driving the net plugin's copies)? The main thread never changed core in call 2's trace,
# vgpu's lock waits were tens of microseconds, and yields turned into spins made it worse. Here:
# the same runs on every logical CPU (default) and on one logical CPU per physical core (taskset),
# real and vgpu, twice each; reduce_scatter and all_gather 4-16 MiB, -n 5 and -n 100.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt
lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node" ; lscpu -e=CPU,CORE,SOCKET,NODE > $O/lscpu.txt
one=$(awk 'NR>1 && !seen[$2]++ {print $1}' $O/lscpu.txt | paste -sd,)
echo "one logical CPU per core: $one"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
all=$(nproc --all); allcpus=0-$((all-1))
for rep in 1 2; do
for op in reduce_scatter all_gather; do
  for n in 5 100; do
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 16M -f 4 -n $n -w 5 -c 0)
    for place in all one; do
      cpus=$allcpus; [ $place = one ] && cpus=$one
      taskset -c $cpus timeout 30 "${a[@]}" > $O/nt/${op}_n${n}_real${place}_$rep.log 2>&1
      VGPU_PHYSICAL_DEVICES=0 taskset -c $cpus timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_vgpu${place}_$rep.log 2>&1
    done
  done
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
for op in ("reduce_scatter", "all_gather"):
    for kind in ("realall", "realone", "vgpuall", "vgpuone"):
        for rep in (1, 2):
            try:
                a, b = times(f"{d}/{op}_n5_{kind}_{rep}.log"), times(f"{d}/{op}_n100_{kind}_{rep}.log")
            except OSError:
                continue
            row = []
            for size in sorted(a):
                if size not in b: continue
                for j, name in ((0, "oop"), (1, "ip")):
                    g = (a[size][j] - b[size][j]) * 5 * 100 / 95
                    row.append(f"{size>>20}M {name} k {b[size][j] - g / 100:6.2f} g {g:6.1f}")
            print(f"{op:15s} {kind:7s} {rep}: " + " | ".join(row))
PY
cd $OUT && tar czf all.tgz r
