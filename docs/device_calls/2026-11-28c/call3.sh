#!/usr/bin/env bash
# Twenty-fourth session, call 3 (issue 18's one-GPU target, issue 21's one-GPU wall), one H200 (the only
# kind lent then), tree c82b3f5: GPT-2 small on one GPU, eager and torch.compile, real against one
# virtual GPU, two pairs each (tests/gpu/fidelity/run ONLY=single RUNS=2): each side's step by its own
# timer and the wall per step (CLOCK_TAI, real under vgpu-run) from every run's RESULT line.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
ONLY="single" RUNS=2 OUT=$O/f timeout 560 tests/gpu/fidelity/run > $O/fidelity.txt 2>&1
grep -E "^single|FAIL|error" $O/fidelity.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
python3 - "$O/f" <<'PY'
import json, glob, sys, os
for f in sorted(glob.glob(sys.argv[1] + "/**/results.jsonl", recursive=True)):
    for l in open(f):
        d = json.loads(l)
        if d.get("kind") != "step": continue
        print(d.get("side"), d.get("mode"), d.get("args"), "step", d.get("step_ms"), "wall", d.get("wall_ms"))
PY
cd $OUT && tar czf all.tgz r && rm -rf r
