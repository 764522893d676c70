#!/usr/bin/env bash
# Twelfth session, call 2: nccl-tests' first timed iteration (issue 18). Real, then vgpu traced
# (VGPU_CLOCK_TRACE now with each move's core and vgpu's lock waits), vgpu untraced, and vgpu with
# an experiment-only preload (.device/exp/expshim.so, not product code: sched_yield as a 100-pause
# spin) testing whether the poller's yields to busy proxy threads leave its core cold. Each:
# reduce_scatter and all_gather 4-16 MiB with -n 5 and -n 100 (the slope and the first iteration's
# intercept).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/nt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
for rep in 1 2; do
for op in reduce_scatter all_gather; do
  for n in 5 100; do
    a=(.gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 16M -f 4 -n $n -w 5 -c 0)
    timeout 30 "${a[@]}" > $O/nt/${op}_n${n}_real_$rep.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_vgpu_$rep.log 2>&1
    EXP_YIELD_SPIN=1 LD_PRELOAD=$PWD/.device/exp/expshim.so VGPU_PHYSICAL_DEVICES=0 timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n${n}_spin_$rep.log 2>&1
    if [ $n = 5 ] && [ $rep = 1 ]; then
      VGPU_CLOCK_TRACE=$O/nt/${op}_trace.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/nt/${op}_n5_traced.log 2>&1
    fi
  done
done
done
echo "nt t=$((SECONDS-T0))"
for f in $O/nt/*_trace.jsonl; do
  p=$(head -c 200 $f | python3 -c "import sys,json; print(json.loads(sys.stdin.readline())['pid'])" 2>/dev/null)
  python3 vgpu/tools/vgpu-clock-trace --top 8 --tid $p $f > ${f%.jsonl}.summary.txt 2>&1; head -30 ${f%.jsonl}.summary.txt
done
python3 - $O/nt <<'PY'
import sys, glob, re, statistics
d = sys.argv[1]
def times(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) > 10 and f[0].isdigit():
            out[int(f[0])] = (float(f[5]), float(f[9]))
    return out
for op in ("reduce_scatter", "all_gather"):
    for kind in ("real", "vgpu", "spin"):
        for rep in (1, 2):
            try:
                a, b = times(f"{d}/{op}_n5_{kind}_{rep}.log"), times(f"{d}/{op}_n100_{kind}_{rep}.log")
            except OSError:
                continue
            row = []
            for size in sorted(a):
                if size not in b: continue
                for j, name in ((0, "oop"), (1, "ip")):
                    t5, t100 = a[size][j], b[size][j]
                    g = (t5 - t100) * 5 * 100 / 95
                    k = t100 - g / 100
                    row.append(f"{size>>20}M {name} k {k:6.2f} g {g:6.1f}")
            print(f"{op:15s} {kind:5s} {rep}: " + " | ".join(row))
PY
cd $OUT && tar czf all.tgz r
