#!/usr/bin/env bash
# Session 2026-11-27, call 5 (tree after "NCCL profiler callbacks are vgpu's own work"): nccl-tests
# six collectives 64 KiB to 16 MiB, two passes of each side (as call 2), now that the profiler's
# callbacks are not charged to the thread; one more vgpu pass with VGPU_DRIVER_TIME=table (the real
# driver's call costs charged) beside them.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/n1 $O/n2 $O/t
for p in 1 2; do
  ONLY=nccl NCCL_MAX=16M NCCL_TESTS=.gpu/nccl-tests OUT=$O/n$p timeout 140 tests/gpu/fidelity/run .device > $O/n$p/out.txt 2>&1
  echo "== nccl pass $p t=$((SECONDS-T0))"; grep -E "FAIL" $O/n$p/out.txt | head -5
done
VGPU_DRIVER_TIME=table ONLY=nccl NCCL_MAX=16M NCCL_TESTS=.gpu/nccl-tests OUT=$O/t timeout 140 tests/gpu/fidelity/run .device > $O/t/out.txt 2>&1
echo "== nccl table t=$((SECONDS-T0))"
python3 - $O/n1/results.jsonl $O/n2/results.jsonl $O/t/results.jsonl <<'PY'
import json, sys, collections
v = collections.defaultdict(list); t = {}
for i, f in enumerate(sys.argv[1:]):
    for line in open(f):
        d = json.loads(line)
        if d.get("kind") != "nccl": continue
        if i < 2: v[(d["op"], d["size"], d["side"])].append(float(d["busbw"]))
        elif d["side"] == "vgpu": t[(d["op"], d["size"])] = float(d["busbw"])
ops = sorted({(k[0], k[1]) for k in v}, key=lambda k: (k[0], int(k[1])))
print("op size | real busbw (passes) | vgpu (passes) | error of means | vgpu with the driver table")
for op, size in ops:
    r, g = v[(op, size, "real")], v[(op, size, "vgpu")]
    if r and g:
        mr, mg = sum(r) / len(r), sum(g) / len(g)
        tt = t.get((op, size))
        extra = f"{tt:.2f} ({100 * (tt - mr) / mr:+.1f}%)" if tt else "-"
        print(f"{op:15s} {int(size) // 1024:>6d}K | {' / '.join(f'{x:.2f}' for x in r):>15s} | {' / '.join(f'{x:.2f}' for x in g):>15s} | {100 * (mg - mr) / mr:+6.1f}% | {extra}")
PY
cd $OUT && tar czf all.tgz r
