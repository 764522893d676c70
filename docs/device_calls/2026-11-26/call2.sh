#!/usr/bin/env bash
# Session 2026-11-26b, call 2: the settle-on-smallest rule (DDP, FSDP2, single), PyTorch on the sim, record->replay, GPU checks.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/sim $O/gpu1 $O/g0 $O/fid $O/rec
real=/usr/local/nvidia/lib64/libcuda.so.1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model "$model" --no-summary)
( OUT=$O/sim taskset -c 16-31 timeout 250 tests/gpu/sim_torch coll ddp fsdp2 > $O/sim/summary.txt 2>&1 ) &
SIMPID=$!
( GPU=1 OUT=$O/gpu1 ONLY="gpt2_process_per_device shared_pages oom_batch" taskset -c 8-15 timeout 260 tests/gpu/run-gpu-tests .device/lib > $O/gpu1/summary.txt 2>&1
  OUT=$O/rec VGPU_PHYSICAL_DEVICES=1 taskset -c 8-15 timeout 200 tests/gpu/sim_torch record > $O/rec/summary.txt 2>&1 ) &
G1PID=$!
echo "== measured per step"
CUDA_VISIBLE_DEVICES=0 VGPU_LOG_LEVEL=debug LD_LIBRARY_PATH=.device/lib/passthrough:.device/lib VGPU_REAL_LIBCUDA=$real taskset -c 0-7 timeout 120 python3 tests/gpu/measured_per_step.py > $O/g0/mps.log 2>&1
grep -v "^\[" $O/g0/mps.log | tail -6
echo "t=$((SECONDS-T0))"
for i in 1 2; do
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 100 python3 tests/gpu/fidelity/train_step.py single 2>&1 | grep RESULT | cut -c1-160 | sed 's/^/real single: /'
  VGPU_PHYSICAL_DEVICES=0 taskset -c 0-7 timeout 100 "${vrun[@]}" --gpus 1 -- python3 tests/gpu/fidelity/train_step.py single 2>&1 | grep RESULT | cut -c1-160 | sed 's/^/vgpu single: /'
done
echo "t=$((SECONDS-T0))"
wait $G1PID; echo "== gpu1 checks"; grep -E "PASS|FAIL|passed" $O/gpu1/summary.txt | head; echo "== record"; cat $O/rec/summary.txt | tail -15
echo "t=$((SECONDS-T0))"
ONLY="ddp fsdp2" RUNS=2 TIMELINE=1 OUT=$O/fid timeout $((575-(SECONDS-T0))) tests/gpu/fidelity/run .device 2>&1 | grep -v "^real \|^vgpu " | tail -20
echo "t=$((SECONDS-T0))"
wait $SIMPID; echo "== sim_torch"; tail -30 $O/sim/summary.txt
cd $O && tar czf all.tgz sim gpu1 g0 fid rec && rm -rf sim gpu1 g0 fid rec
echo "t=$((SECONDS-T0))"
