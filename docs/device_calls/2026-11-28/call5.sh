#!/usr/bin/env bash
# Nineteenth session, call 5 (the merged tree: callcost16, sim31, sim32 and the lead's changes):
# 1. issue 18: one DDP pair (real on both GPUs, vgpu with 2 virtual GPUs on GPU 0; sim32's plugin now
#    registers its rank in vgpud, moves a floor and releases ids on the passthrough);
# 2. issue 21: passthrough_call_overhead, the library before callcost16 (.device-base) against the merged
#    one, alternated, 3 rounds each, twice, on one host;
# 3. issue 23: sim_scale at 2, 8 and 64 ranks (record on the passthrough, replay on the sim backend).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; cat .device-base/REV
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp" RUNS=1 OUT=$O/f timeout 140 tests/gpu/fidelity/run > $O/fidelity.txt 2>&1
grep -E "^(real|vgpu) ddp|error|^ddp" $O/fidelity.txt | cut -c1-160
pkill -f train_step.py; echo "== ddp t=$((SECONDS-T0))"
B=.device/bench/passthrough_call_overhead; R=/usr/local/nvidia/lib64/libcuda.so.1; F=.device/bench/empty_kernel.fatbin
for i in 1 2; do
  for side in base new; do
    lib=$PWD/.device/lib/passthrough/libcuda.so.1; [ $side = base ] && lib=$PWD/.device-base/libcuda.so.1
    CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 45 $B $R $lib $F 3 > $O/bench_${side}_$i.txt 2>&1
    echo "== $side $i t=$((SECONDS-T0))"; grep -E "^cu" $O/bench_${side}_$i.txt | cut -c1-160
  done
done
timeout $((570-(SECONDS-T0))) python3 tests/gpu/sim_scale --ranks 2 8 64 --out $O/s --timeout 120 -- --batch 8 --seq 1024 > $O/sim_scale.txt 2>&1
tail -12 $O/sim_scale.txt | cut -c1-600
echo "== t=$((SECONDS-T0))"
rm -f $O/s/kernels.db*
cd $OUT && tar czf all.tgz r && rm -rf r
