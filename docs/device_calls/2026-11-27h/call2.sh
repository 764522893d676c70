#!/usr/bin/env bash
# Seventeenth session, call 2 (issue 18): does NCCL's host-bound loop follow the speed of the CPUs it
# runs on, and which probe tells it? Twelve samples, each: the 3 fastest (odd samples) or 3 slowest
# (even) CPUs by the interpreter probe (tests/gpu/fidelity/cpu_speed.c interp) of this moment; on
# those CPUs the three probes (walk, interp, the Python one), then nccl-tests all_gather and
# all_reduce at 64 KiB (-g 2, -n 1000 -w 50 -c 0) pinned there (taskset), then the probes again.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
cc -O2 -o /tmp/cpu_speed tests/gpu/fidelity/cpu_speed.c
probes() {  # $1 cpus $2 file
  { taskset -c $1 /tmp/cpu_speed 5 walk | sed 's/^/walk /'; taskset -c $1 /tmp/cpu_speed 5 interp | sed 's/^/interp /'
    taskset -c $1 python3 tests/gpu/fidelity/cpu_speed.py 4 | sed 's/^/py /'; } > $2
}
for s in $(seq 1 12); do
  /tmp/cpu_speed 3 interp > $O/s${s}_all.txt
  if [ $((s % 2)) = 1 ]; then set=$(head -3 $O/s${s}_all.txt | awk '{print $2}' | paste -sd,)
  else set=$(tail -3 $O/s${s}_all.txt | awk '{print $2}' | paste -sd,); fi
  echo "$set" > $O/s${s}_set.txt
  probes $set $O/s${s}_before.txt
  for op in all_gather all_reduce; do
    LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} taskset -c $set timeout 30 .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 64K -n 1000 -w 50 -c 0 > $O/s${s}_$op.log 2>&1
  done
  probes $set $O/s${s}_after.txt
done
echo "samples t=$((SECONDS-T0))"
python3 - $O <<'PY'
import sys, statistics, os
sys.path.insert(0, "tests/gpu/fidelity")
import nccl_tests_table
d = sys.argv[1]
def probe(path):
    v = {}
    for line in open(path):
        k, _, cpu, x = line.split()
        v.setdefault(k, []).append(float(x))
    return {k: statistics.mean(x) for k, x in v.items()}
rows = []
print("sample set       walk   interp  py_ms | all_gather oop/ip us | all_reduce oop/ip us")
for s in range(1, 13):
    b, a = probe(f"{d}/s{s}_before.txt"), probe(f"{d}/s{s}_after.txt")
    p = {k: (b[k] + a[k]) / 2 for k in b}
    t = {}
    for op in ("all_gather", "all_reduce"):
        tt = nccl_tests_table.times(f"{d}/s{s}_{op}.log")
        t[op] = list(tt.values())[0] if tt else (None, None)
    cpus = open(f"{d}/s{s}_set.txt").read().strip()
    print(f"{s:6d} {cpus:10s} {p['walk']:6.3f} {p['interp']:6.3f} {p['py']:6.3f} | {t['all_gather']} | {t['all_reduce']}")
    rows.append((p, t))
def corr(x, y):
    mx, my = statistics.mean(x), statistics.mean(y)
    sx = sum((a - mx) ** 2 for a in x) ** .5; sy = sum((b - my) ** 2 for b in y) ** .5
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / (sx * sy) if sx and sy else float("nan")
for op in ("all_gather", "all_reduce"):
    ok = [(p, t[op][0]) for p, t in rows if t[op][0]]
    for k in ("walk", "interp", "py"):
        print(f"corr {op} oop vs {k}: {corr([p[k] for p, _ in ok], [x for _, x in ok]):+.3f}")
PY
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
