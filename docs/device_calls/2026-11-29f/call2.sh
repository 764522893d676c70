#!/usr/bin/env bash
# Thirtieth session, call 2, 2 x H200 (issues 18, 23): recordings taken with 1d4a83d (the database
# gets what the job's launches take) on 2 time-sliced ranks and on 1 GPU, then the real DDP step on
# both GPUs alternated with 2-rank sim replays of those two databases and of call 1's time-sliced
# one (carried: .device/db/ts1.db), three rounds; each replay against the real runs by host state.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
STEP="--batch 8 --seq 1024"
timeout 100 python3 tests/gpu/sim_scale --ranks 2 --record-steps 8 4 --replay-steps 8 2 --timeout 90 --out $O/ts2 -- $STEP > $O/ts2.txt 2>&1
grep -E "^record|^sim|^FAIL" $O/ts2.txt | cut -c1-200; echo "== ts2 t=$((SECONDS-T0))"
timeout 100 python3 tests/gpu/sim_scale --ranks 2 --record-gpus 1 --record-steps 8 4 --replay-steps 8 2 --timeout 90 --out $O/one2 -- $STEP > $O/one2.txt 2>&1
grep -E "^record|^sim|^FAIL" $O/one2.txt | cut -c1-200; echo "== one2 t=$((SECONDS-T0))"
cp $O/ts2/kernels.db $O/ts2.db; cp $O/one2/kernels.db $O/one2.db
for round in 1 2 3; do
  [ $((SECONDS-T0)) -gt 470 ] && break
  timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp $STEP --steps 10 --warmup 4 2>&1 | grep "^RESULT" >> $O/real.results
  for db in ts1 ts2 one2; do
    f=.device/db/$db.db; [ -f $f ] || f=$O/$db.db
    timeout 60 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $f --replay-steps 8 2 --timeout 50 --out $O/rep_${db}_$round -- $STEP > /dev/null 2>&1
    grep -h "^RESULT" $O/rep_${db}_$round/sim_2.log >> $O/$db.results
  done
  echo "== round $round t=$((SECONDS-T0))"
done
python3 - $O <<'PY'
import json, sys, statistics
O = sys.argv[1]
for n in ("real", "ts1", "ts2", "one2"):
    try:
        rs = [json.loads(l[7:]) for l in open(f"{O}/{n}.results") if l.startswith("RESULT")]
    except OSError:
        continue
    print(n, "steps", [r["step_ms"] for r in rs], "fwd", [r.get("forward_ms") for r in rs], "bwd", [r.get("backward_ms") for r in rs])
PY
for db in ts1 ts2 one2; do echo "-- $db / real"; python3 tests/gpu/fidelity/host_states.py $O/real.results $O/$db.results 2>&1 | tail -3; done
python3 docs/device_calls/2026-11-29f/db_top.py ts2=$O/ts2.db one2=$O/one2.db ts1=.device/db/ts1.db --top=8 2>&1 | cut -c1-160
rm -f $O/*/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
