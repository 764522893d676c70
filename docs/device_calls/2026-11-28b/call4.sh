#!/usr/bin/env bash
# Twenty-second session, call 4 (issue 18): call 3 again with the two rates (0.5 moving, 0.75 waiting for peers)
# (timing/collective_overlap.h, fitted in calls 2 and 3):
# 1. DDP pairs, real on both GPUs and vgpu (2 virtual GPUs on GPU 0), alternating, three times; one vgpu run
#    with the rule off (both rates 1) beside them;
# 2. vgpu's DDP timeline against call 2's kind of real profile, kernel by kernel (kernel_compare.py).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
PIN_CORES_PER_RANK=8 STEP_ARGS="--steps 30" ONLY="ddp" RUNS=3 OUT=$O/f timeout 330 tests/gpu/fidelity/run > $O/fidelity.txt 2>&1
grep -E "^(real|vgpu) ddp|^ddp|host probe|FAIL" $O/fidelity.txt | cut -c1-150; pkill -f train_step.py; echo "== t=$((SECONDS-T0))"
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1 VGPU_PHYSICAL_DEVICES=0 timeout 100 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 $S ddp --steps 30 > $O/ddp_vgpu_off.log 2>&1
echo "rule off:"; grep -o '"step_ms": [0-9.]*\|"forward_ms": [0-9.]*\|"backward_ms": [0-9.]*' $O/ddp_vgpu_off.log; echo "== t=$((SECONDS-T0))"
timeout 100 torchrun --standalone --nproc_per_node 2 $S ddp --steps 10 --kernels $O/k_ddp_%r.json > $O/ddp_real.log 2>&1; grep -o '"step_ms": [0-9.]*\|"backward_ms": [0-9.]*' $O/ddp_real.log
VGPU_PHYSICAL_DEVICES=0 timeout 100 "${vrun[@]}" --gpus 2 --timeline $O/vgpu_ddp.trace.json -- torchrun --standalone --nproc_per_node 2 $S ddp --steps 10 > $O/ddp_vgpu.log 2>&1; grep -o '"step_ms": [0-9.]*\|"backward_ms": [0-9.]*' $O/ddp_vgpu.log; echo "== t=$((SECONDS-T0))"
for r in 0 1; do python3 tests/gpu/fidelity/kernel_compare.py $O/k_ddp_$r.json $O/vgpu_ddp.trace.json $r 12 > $O/compare_$r.txt 2>&1; head -16 $O/compare_$r.txt | cut -c1-160; done
cd $OUT && tar czf all.tgz r && rm -rf r
