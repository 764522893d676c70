#!/usr/bin/env bash
# Twenty-sixth session, call 1, one H200 (issue 23): one recording (sim_scale: record at 2 virtual
# GPUs, replay once), then the same database replayed four more times at 2 ranks with the virtual
# timeline written (VGPU_TIMELINE), to catch two replays of one database whose backward differs
# (last session: discrete values 25.2 / ~27 / ~30 / 34.2 ms) and see which ops move.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
timeout 200 python3 tests/gpu/sim_scale --ranks 2 --out $O/rec --timeout 120 -- --batch 8 --seq 1024 > $O/rec.txt 2>&1
echo "== rec t=$((SECONDS-T0))"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" $O/rec/kernels.db
cp $O/rec/kernels.db $O/db.sqlite
for k in 1 2 3 4 5; do
  [ $((SECONDS-T0)) -gt 470 ] && break
  VGPU_TIMELINE=$O/t$k.trace.json timeout 90 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $O/db.sqlite --out $O/p$k --timeout 80 -- --batch 8 --seq 1024 > $O/p$k.txt 2>&1
  echo "== p$k t=$((SECONDS-T0))"
done
python3 - "$O" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*/*.log")):
    for l in open(f, errors="replace"):
        if l.startswith("RESULT "):
            d = json.loads(l[7:])
            print(f.split("/r/")[-1], "step", d.get("step_ms"), "fwd", d.get("forward_ms"), "bwd", d.get("backward_ms"),
                  "opt", d.get("optimizer_ms"), "host", d.get("host_ms"), "steps", d.get("steps_ms"))
PY
rm -f $O/rec/kernels.db*; gzip -9 $O/db.sqlite $O/*.json 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
