#!/usr/bin/env bash
# Session 2026-11-26b, call 1: diagnostics + remaining checks on main.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/sim $O/gpu1 $O/g0 $O/diag
real=/usr/local/nvidia/lib64/libcuda.so.1
nvidia-smi -L; nproc
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model "$model" --no-summary)
# --- sim side, cores 16-31
( OUT=$O/sim taskset -c 16-31 timeout 330 tests/gpu/sim_torch coll ddp fsdp2 > $O/sim/summary.txt 2>&1
  echo "== sim 8 ranks DDP" >> $O/sim/summary.txt
  /usr/bin/time -v taskset -c 16-31 timeout 200 python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --backend sim --gpus 8 --no-summary -- \
    torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 4 --seq 512 --steps 3 --warmup 1 > $O/sim/ddp8.log 2>&1
  echo "rc=$?" >> $O/sim/summary.txt; grep -E "RESULT|Error|error" $O/sim/ddp8.log | tail -5 >> $O/sim/summary.txt
  grep -E "Maximum resident|Elapsed|User time|System time" $O/sim/ddp8.log >> $O/sim/summary.txt ) &
SIMPID=$!
# --- GPU 1 checks, cores 8-15
( CUDA_VISIBLE_DEVICES=1 OUT=$O/gpu1 STEP_RUNS=3 ONLY="free_at_start shared_pages gpt2_process_per_device replay step_time_runs oom_batch" taskset -c 8-15 timeout 420 tests/gpu/run-gpu-tests .device/lib > $O/gpu1/summary.txt 2>&1 ) &
G1PID=$!
# --- GPU 0, cores 0-7
echo "== call overhead (real vs passthrough)"
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead $real $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 2>&1 | tail -25
echo "t=$((SECONDS-T0))"
echo "== measured per step"
CUDA_VISIBLE_DEVICES=0 VGPU_LOG_LEVEL=debug LD_LIBRARY_PATH=.device/lib/passthrough:.device/lib VGPU_REAL_LIBCUDA=$real taskset -c 0-7 timeout 120 python3 tests/gpu/measured_per_step.py > $O/g0/mps.log 2>&1
grep -v "^\[" $O/g0/mps.log | tail -30
grep -o 'launch signatures of [^:]*: a new' $O/g0/mps.log | sort | uniq -c | sort -rn | head -20
echo "t=$((SECONDS-T0))"
echo "== eight (wall)"
small=(--batch 4 --seq 512 --steps 6 --warmup 3)
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 100 python3 tests/gpu/fidelity/train_step.py single "${small[@]}" 2>&1 | grep RESULT | sed 's/^/real single: /'
VGPU_PHYSICAL_DEVICES=0 taskset -c 0-7 timeout 100 "${vrun[@]}" --gpus 1 -- python3 tests/gpu/fidelity/train_step.py single "${small[@]}" 2>&1 | grep RESULT | sed 's/^/vgpu single: /'
VGPU_PHYSICAL_DEVICES=0 taskset -c 0-7 timeout 200 "${vrun[@]}" --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp "${small[@]}" > $O/g0/eight.log 2>&1; grep RESULT $O/g0/eight.log | sed 's/^/vgpu ddp8: /' || tail -5 $O/g0/eight.log
echo "t=$((SECONDS-T0))"
wait $G1PID; echo "== gpu1 checks"; tail -12 $O/gpu1/summary.txt; cat $O/gpu1/step_time.txt 2>/dev/null
echo "t=$((SECONDS-T0))"
# --- DDP diagnostics, both GPUs
if [ $((SECONDS-T0)) -lt 420 ]; then
  echo "== DDP diag"
  timeout 90 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --kernels $O/diag/real_ddp_%r.json > $O/diag/real.log 2>&1; grep RESULT $O/diag/real.log | sed 's/^/real ddp: /'
  VGPU_LOG_LEVEL=info VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 2 --timeline $O/diag/vgpu_ddp.trace.json -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp > $O/diag/vgpu.log 2>&1; grep RESULT $O/diag/vgpu.log | sed 's/^/vgpu ddp: /'; grep "gated measurement adds" $O/diag/vgpu.log | head -4
  echo "t=$((SECONDS-T0))"
  db=$O/diag/db; mkdir -p $db
  VGPU_KERNEL_DB=$db VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 1 -- python3 tests/gpu/fidelity/train_step.py single > $O/diag/rec.log 2>&1; grep RESULT $O/diag/rec.log | sed 's/^/vgpu single rec: /'
  if [ $((SECONDS-T0)) -lt 500 ]; then
  VGPU_KERNEL_DB=$db VGPU_PHYSICAL_DEVICES=0 timeout $((560-(SECONDS-T0))) "${vrun[@]}" --gpus 2 --timeline $O/diag/vgpu_ddp_db.trace.json -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp > $O/diag/vgpu_db.log 2>&1; grep RESULT $O/diag/vgpu_db.log | sed 's/^/vgpu ddp db: /'
  fi
fi
echo "t=$((SECONDS-T0))"
kill $SIMPID 2>/dev/null; wait $SIMPID 2>/dev/null; echo "== sim_torch"; tail -40 $O/sim/summary.txt
rm -rf $O/diag/db
cd $O && tar czf all.tgz sim gpu1 g0 diag && rm -rf sim gpu1 g0 diag
echo "t=$((SECONDS-T0))"
