#!/usr/bin/env bash
# Twenty-fifth session, call 8, one H200 (issue 23): call 7's databases b (replay backward 25.35 ms) and
# c (27.18), carried in .device/db7, replayed at 2 ranks with the virtual timeline written
# (VGPU_TIMELINE: every kernel of both ranks), to find which kernels make c's backward longer.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
for k in b c; do
  VGPU_TIMELINE=$O/$k.trace.json timeout 100 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $PWD/.device/db7/$k.db --out $O/$k --timeout 80 -- --batch 8 --seq 1024 > $O/$k.txt 2>&1
  grep -E "^sim" $O/$k.txt | cut -c1-200; ls -la $O/ | grep trace; echo "== $k t=$((SECONDS-T0))"
done
gzip -9 $O/*.json 2>/dev/null; ls -la $O
cd $OUT && tar czf all.tgz r && rm -rf r
