#!/usr/bin/env bash
# Twenty-fourth session, call 6 (issue 23), one H200 host, tree 1b9a77f: how much of the sim's 8-rank
# backward growth (call 5: 27.6 ms at 2 ranks, 33.0 at 8, the model's all-reduce 1.45 ms longer) is the
# slowdown beside collectives: the recording at 2, then the 8-rank replay with the rule (default) and
# without it (both rates 1), from the same database, with each replay's phases.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
timeout 100 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 80 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
grep -E "^record|^sim" $O/s.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
for rule in on off; do
  if [ $rule = off ]; then export VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1; fi
  timeout 60 python3 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/$rule --timeout 50 -- --batch 8 --seq 1024 > $O/$rule.txt 2>&1
  echo "-- rule $rule"; grep -E "^sim" $O/$rule.txt | cut -c1-160; echo "== t=$((SECONDS-T0))"
done
for f in $O/s/sim_2.log $O/on/sim_8.log $O/off/sim_8.log; do grep -h '^RESULT' $f | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()[7:]); print(d["world"], d["step_ms"], "fwd", d["forward_ms"], "bwd", d["backward_ms"], "host", d["host_ms"])'; done
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
