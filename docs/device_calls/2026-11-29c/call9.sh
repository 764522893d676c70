#!/usr/bin/env bash
# Twenty-seventh session, call 9, one H200: the timeline's carried_us (b40d088) on the 8-process DDP
# job, 3+3 steps: the first ForeachBinaryOpScalar of each optimizer step, its span and what it carried.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 8 --mps --timeline $O/eight.trace.json -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 3 --warmup 3 > $O/eight.log 2>&1
grep -m1 '^RESULT' $O/eight.log | cut -c1-160; echo "== eight t=$((SECONDS-T0))"
python3 - $O/eight.trace.json <<'PY'
import json, sys, collections
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
k = collections.defaultdict(list)
carriers = 0
for e in ev:
    c = e.get("args", {}).get("carried_us", 0)
    carriers += c > 0
    if "ForeachBinaryOpScalar" in e["name"]:
        k[e["pid"]].append((round(e["ts"]), round(e["dur"], 1), round(c, 1)))
print("ops carrying work:", carriers, "of", len(ev))
for pid in sorted(k):
    print(pid, [(d, c) for _, d, c in sorted(k[pid])])
PY
gzip -6 $O/*.json; cd $OUT && tar czf all.tgz r && rm -rf r
