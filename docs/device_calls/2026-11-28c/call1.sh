#!/usr/bin/env bash
# Twenty-fourth session, call 1 (issue 23, with issue 18's DDP pair around it), 2 x H200, tree a207496:
# 1. the real DDP step on both GPUs and under vgpu's passthrough (2 virtual GPUs on GPU 0), one pair;
# 2. sim_scale at 2 ranks: the recording on the passthrough by this build (torch.cat's struct cleaned in
#    the signatures) and the 2-rank replay on the sim backend (the slowdown beside collectives on), misses kept;
# 3. the same replay with that slowdown off (both rates 1), from the same database;
# 4. 8 and 64 ranks from the same database; 5. the real DDP pair again if time is left.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/misses
nvidia-smi -L; uptime; nproc
rm -f /tmp/vgpu-*/kernel-db-misses-* 2>/dev/null
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp" RUNS=1 OUT=$O/f1 timeout 140 tests/gpu/fidelity/run > $O/fidelity1.txt 2>&1
grep -E "^ddp|host probe|FAIL" $O/fidelity1.txt | cut -c1-200; pkill -f train_step.py; echo "== ddp t=$((SECONDS-T0))"
timeout 160 python3 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 110 -- --batch 8 --seq 1024 > $O/s0.txt 2>&1
grep -E "^record|^sim|fallback|miss" $O/s0.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
mkdir -p $O/misses/on2; cp /tmp/vgpu-*/kernel-db-misses-* $O/misses/on2/ 2>/dev/null; rm -f /tmp/vgpu-*/kernel-db-misses-*
VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1 timeout 90 python3 tests/gpu/sim_scale --ranks 2 --no-record --db $O/s/kernels.db --out $O/off2 --timeout 80 -- --batch 8 --seq 1024 > $O/off2.txt 2>&1
echo "-- rule off"; grep -E "^sim|fallback" $O/off2.txt | cut -c1-300; echo "== t=$((SECONDS-T0))"
timeout $((520-(SECONDS-T0))) python3 tests/gpu/sim_scale --ranks 8 64 --no-record --db $O/s/kernels.db --out $O/s864 --timeout 150 -- --batch 8 --seq 1024 > $O/s864.txt 2>&1
tail -14 $O/s864.txt | cut -c1-400; echo "== t=$((SECONDS-T0))"
mkdir -p $O/misses/r864; cp /tmp/vgpu-*/kernel-db-misses-* $O/misses/r864/ 2>/dev/null
[ $((SECONDS-T0)) -lt 450 ] && { PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp" RUNS=1 OUT=$O/f2 timeout 100 tests/gpu/fidelity/run > $O/fidelity2.txt 2>&1; grep -E "^ddp|host probe|FAIL" $O/fidelity2.txt | cut -c1-200; }
echo "== t=$((SECONDS-T0))"
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
