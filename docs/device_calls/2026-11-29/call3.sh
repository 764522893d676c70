#!/usr/bin/env bash
# Twenty-fifth session, call 3, one H200 (issue 23): is the sim's longer backward (calls 1-2: 30-36 ms
# against 25-28 in the twenty-fourth session) the code's? One recording of the 2-rank DDP step with
# this session's libraries (.device/lib), then replays of that one database alternating this
# session's sim library and NCCL plugin with 77f573f's (.device/lib_base: the last tree of the
# twenty-fourth session, never on a GPU), each replay's phases printed.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
timeout 170 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 110 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
grep -E "^record|^sim" $O/s.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
for k in base1 new1 base2 new2 base3 new3; do
  [ $((SECONDS-T0)) -gt 470 ] && break
  lib=.device/lib; case $k in base*) lib=.device/lib_base ;; esac
  timeout 80 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $O/s/kernels.db --lib $PWD/$lib --out $O/$k --timeout 70 -- --batch 8 --seq 1024 > $O/$k.txt 2>&1
  echo "$k: $(grep -E '^sim' $O/$k.txt | cut -c1-200)"; echo "== t=$((SECONDS-T0))"
done
python3 - "$O" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*/*.log")):
    for l in open(f, errors="replace"):
        if l.startswith("RESULT "):
            d = json.loads(l[7:])
            print(f.split("/r/")[-1], "step", d.get("step_ms"), "fwd", d.get("forward_ms"), "bwd", d.get("backward_ms"),
                  "opt", d.get("optimizer_ms"), "host", d.get("host_ms"))
PY
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
