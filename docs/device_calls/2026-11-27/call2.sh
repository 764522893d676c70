#!/usr/bin/env bash
# Session 2026-11-27, call 2 (tree 496b35e: VGPU_LAZY_CONTEXTS on by default): nccl-tests, six
# collectives, 64 KiB to 16 MiB (the host-bound sizes where earlier calls missed), two passes of
# both sides; DDP and FSDP2 on 2 ranks out of the box, two runs of each side alternating.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/n1 $O/n2 $O/d
for p in 1 2; do
  ONLY=nccl NCCL_MAX=16M NCCL_TESTS=.gpu/nccl-tests OUT=$O/n$p timeout 140 tests/gpu/fidelity/run .device > $O/n$p/out.txt 2>&1
  echo "== nccl pass $p t=$((SECONDS-T0))"; grep -E "FAIL" $O/n$p/out.txt | head -5
done
python3 - $O/n1/results.jsonl $O/n2/results.jsonl <<'PY'
import json, sys, collections
v = collections.defaultdict(list)
for f in sys.argv[1:]:
    for line in open(f):
        d = json.loads(line)
        if d.get("kind") == "nccl": v[(d["op"], d["size"], d["side"])].append(float(d["busbw"]))
ops = sorted({(k[0], k[1]) for k in v}, key=lambda k: (k[0], int(k[1])))
print("op size | real busbw (passes) | vgpu (passes) | error of means")
for op, size in ops:
    r, g = v[(op, size, "real")], v[(op, size, "vgpu")]
    if r and g:
        mr, mg = sum(r) / len(r), sum(g) / len(g)
        print(f"{op:15s} {int(size) // 1024:>6d}K | {' / '.join(f'{x:.2f}' for x in r):>15s} | {' / '.join(f'{x:.2f}' for x in g):>15s} | {100 * (mg - mr) / mr:+6.1f}%")
PY
left=$((575-SECONDS+T0)); echo "left $left"
ONLY="ddp fsdp2" RUNS=2 OUT=$O/d timeout $left tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== ddp fsdp2 t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-300
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
