#!/usr/bin/env bash
# Twenty-fifth session, call 4, one H200 (issue 23), call 3's libraries: call 3 read the sim's 2-rank
# backward at 25.2-25.4 ms in three replays with 77f573f's libraries and 25.2-31.4 in four with this
# session's, from one database. Is the spread the slowdown beside collectives (whose kernels are
# timed by what the engine knows when they are placed, so by how the two rank processes interleave
# in real time)? Replays of one new recording: this session's with the rule off
# (VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1), with it, and 77f573f's.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
timeout 170 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 110 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
grep -E "^record|^sim" $O/s.txt | cut -c1-200; echo "== t=$((SECONDS-T0))"
for k in off1 new1 base1 off2 new2 base2 off3 new3 base3; do
  [ $((SECONDS-T0)) -gt 480 ] && break
  lib=.device/lib; case $k in base*) lib=.device/lib_base ;; esac
  rule=(); case $k in off*) rule=(env VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1) ;; esac
  timeout 80 "${rule[@]}" python3 tests/gpu/sim_scale --ranks 2 --no-record --db $O/s/kernels.db --lib $PWD/$lib --out $O/$k --timeout 70 -- --batch 8 --seq 1024 > $O/$k.txt 2>&1
  echo "== $k t=$((SECONDS-T0))"
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
