#!/usr/bin/env bash
# Twenty-fifth session, call 2, one H200, the libraries of call 1 (4100d5f, simcore at -O3):
# 1. issue 23: one recording of the 2-rank DDP step on the passthrough and three sim replays of it
#    (the replay's spread on one host, each with its phases: call 1's replay read its backward 11 ms
#    longer than the recording);
# 2. issue 18's one-GPU target: GPT-2 small on one GPU, eager and torch.compile, real against one
#    virtual GPU, one pair each (tests/gpu/fidelity/run ONLY=single RUNS=1).
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
timeout 170 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 110 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
grep -E "^record|^sim" $O/s.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
for k in b c; do
  timeout 80 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $O/s/kernels.db --out $O/$k --timeout 70 -- --batch 8 --seq 1024 > $O/$k.txt 2>&1
  grep -E "^sim" $O/$k.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
done
python3 - "$O" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*/*.log")):
    for l in open(f, errors="replace"):
        if l.startswith("RESULT "):
            d = json.loads(l[7:])
            print(f.split("/r/")[-1], "step", d.get("step_ms"), "fwd", d.get("forward_ms"), "bwd", d.get("backward_ms"),
                  "opt", d.get("optimizer_ms"), "host", d.get("host_ms"), "probe", [round(min(p), 2) for p in d.get("ranks_probe_ms", [])])
PY
left=$((560-(SECONDS-T0)))
ONLY="single" RUNS=1 OUT=$O/f timeout $left tests/gpu/fidelity/run > $O/fidelity.txt 2>&1
grep -E "^single|FAIL|error" $O/fidelity.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
python3 - "$O/f" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/**/results.jsonl", recursive=True)):
    for l in open(f):
        d = json.loads(l)
        if d.get("kind") != "step": continue
        print(d.get("side"), d.get("mode"), d.get("args"), "step", d.get("step_ms"), "wall", d.get("wall_ms"))
PY
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
