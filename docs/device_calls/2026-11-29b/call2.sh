#!/usr/bin/env bash
# Twenty-sixth session, call 2, one H200 (issue 23): call 1 showed every rank's host phases
# following a fixed Python loop's thread CPU time (train_step.py's ranks_probe_ms, the host's two
# speeds) in the recording and in the replays alike. Here recording and replay at 2 ranks, four
# times over (sim_scale, 24 timed steps each side), so that steps whose two ranks both read the
# fast state (or both the slow) can be compared between the passthrough and the sim.
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
for k in 1 2 3 4 5; do
  [ $((SECONDS-T0)) -gt 430 ] && break
  timeout 150 python3 tests/gpu/sim_scale --ranks 2 --out $O/k$k --timeout 100 --record-steps 24 4 --replay-steps 24 2 -- --batch 8 --seq 1024 > $O/k$k.txt 2>&1
  rm -f $O/k$k/kernels.db*
  echo "== k$k t=$((SECONDS-T0))"
done
cd $OUT && tar czf all.tgz r && rm -rf r
