#!/usr/bin/env bash
# Twenty-second session, call 1 (issues 23 and 18), 2 x H200:
# 1. the real DDP step on both GPUs and under vgpu's passthrough (2 virtual GPUs on GPU 0), one pair;
# 2. sim_scale: the recording on the passthrough and the 2-rank replay on the sim backend;
# 3. the 2-rank replay from that database with the library before the group level of one-byte
#    parameters (.device-base) and with the new one, alternated, twice each; then 8 ranks once;
# 4. the real DDP pair again (the replay against the real 2-GPU step, measured around it).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; cat .device-base/REV
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp" RUNS=1 OUT=$O/f1 timeout 140 tests/gpu/fidelity/run > $O/fidelity1.txt 2>&1
grep -E "^ddp|host probe|FAIL" $O/fidelity1.txt | cut -c1-200; pkill -f train_step.py; echo "== ddp t=$((SECONDS-T0))"
timeout 150 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 100 -- --batch 8 --seq 1024 > $O/s0.txt 2>&1
grep -E "^record|^sim|fallback" $O/s0.txt | cut -c1-260; echo "== t=$((SECONDS-T0))"
cp /tmp/vgpu-*/kernel-db-misses-* $O/ 2>/dev/null
for i in 1 2; do
  for side in base new; do
    lib=$PWD/.device/lib; [ $side = base ] && lib=$PWD/.device-base/lib
    timeout 90 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $O/s/kernels.db --lib $lib --out $O/${side}$i --timeout 80 -- --batch 8 --seq 1024 > $O/${side}$i.txt 2>&1
    echo "-- $side $i"; grep -E "^sim|fallback" $O/${side}$i.txt | cut -c1-260; echo "== t=$((SECONDS-T0))"
  done
done
[ $((SECONDS-T0)) -lt 400 ] && { timeout 100 python3 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/new8 --timeout 90 -- --batch 8 --seq 1024 > $O/new8.txt 2>&1; grep -E "^sim|fallback" $O/new8.txt | cut -c1-260; echo "== t=$((SECONDS-T0))"; }
[ $((SECONDS-T0)) -lt 470 ] && { PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp" RUNS=1 OUT=$O/f2 timeout 100 tests/gpu/fidelity/run > $O/fidelity2.txt 2>&1; grep -E "^ddp|host probe|FAIL" $O/fidelity2.txt | cut -c1-200; }
echo "== t=$((SECONDS-T0))"
mkdir -p $O/misses; cp /tmp/vgpu-*/kernel-db-misses-* $O/misses/ 2>/dev/null
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
