#!/usr/bin/env bash
# Twenty-fifth session, call 7: call 6 again (three more recordings, databases whole), for a database
# whose replay reads the long backward (~30 ms), which calls 5-6 kept none of. Call 6: (call 5 again,
# its databases whole: call 5 compressed the main file
# without its write-ahead log, which held most rows), one H200 (issue 23): call 4 showed the sim's 2-rank backward set by the
# database, not the libraries (77f573f's and this session's alike: 30.16 ms from call 4's recording,
# 25.2 from call 3's). Three recordings, each replayed once, the databases brought back (gzip) to
# compare their rows signature by signature.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
for k in a b c; do
  [ $((SECONDS-T0)) -gt 420 ] && break
  timeout 170 python3 tests/gpu/sim_scale --ranks 2 --out $O/$k --timeout 110 -- --batch 8 --seq 1024 > $O/$k.txt 2>&1
  echo "== $k t=$((SECONDS-T0))"
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" $O/$k/kernels.db
  ls -la $O/$k | head -4; gzip -9 $O/$k/kernels.db; rm -f $O/$k/kernels.db-*
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
cd $OUT && tar czf all.tgz r && rm -rf r
