#!/usr/bin/env bash
# Session 2026-11-27, call 1 (tree 97f1267): VGPU_LAZY_CONTEXTS on the real driver for the first
# time: the two GPU checks (8 PyTorch ranks, one device each; the handle checks with the kernels'
# results); how many real contexts an 8-rank job makes (info log; 72 without the setting); the
# 8-rank row with --mps (which sets it); the call-rate bench after callcost9; FSDP2 with --mps.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/eight $O/gt $O/f
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 60 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 3 > $O/bench.txt 2>&1
echo "bench t=$((SECONDS-T0))"; tail -9 $O/bench.txt | head -7
ONLY="gpt2_process_per_device_lazy lazy_contexts" OUT=$O/gt timeout 200 tests/gpu/run-gpu-tests > $O/gt/out.txt 2>&1
echo "== gpu tests rc=$? t=$((SECONDS-T0))"; grep -E "PASS|FAIL|passed|failed" $O/gt/out.txt | tail -6
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
for m in lazy mps; do
  extra=(); [ $m = mps ] && extra=(--mps)
  VGPU_LAZY_CONTEXTS=1 VGPU_LOG_LEVEL=info VGPU_PHYSICAL_DEVICES=0 timeout 100 "${vrun[@]}" "${extra[@]}" --gpus 8 -- torchrun --standalone --nproc_per_node 8 tests/gpu/fidelity/train_step.py ddp --batch 1 --seq 256 --steps 2 --warmup 1 > $O/ctx_$m.log 2>&1
  echo "== ctx $m rc=$? t=$((SECONDS-T0))"; grep -E "RESULT" $O/ctx_$m.log | cut -c1-200
  echo "real contexts: $(grep -c 'a real context for virtual device' $O/ctx_$m.log)"
  grep -o "\[vgpu [0-9]*:[0-9]* info\] passthrough: a real context for virtual device [0-9]* on GPU [0-9] ([a-z' ]*)" $O/ctx_$m.log | sed 's/\[vgpu [0-9]*:[0-9]* info\]//' | sort | uniq -c | head -20
  grep -E "error 8|808|MPS|Traceback|rror" $O/ctx_$m.log | sort | uniq -c | sort -rn | head -6 | cut -c1-250
done
VRUN_ARGS=--mps ONLY=eight OUT=$O/eight timeout 200 tests/gpu/fidelity/run .device > $O/eight/out.txt 2>&1
echo "== eight --mps t=$((SECONDS-T0))"; grep -E "predicted|FAIL|ddp x|slowest|%" $O/eight/out.txt | cut -c1-400
for f in $O/eight/ddp_vgpu_*.log; do grep -o '"wall_ms": [0-9.]*' $f | head -1; done
left=$((570-SECONDS+T0)); echo "left $left"
[ $left -gt 80 ] && VRUN_ARGS=--mps ONLY=fsdp2 RUNS=1 OUT=$O/f timeout $left tests/gpu/fidelity/run .device > $O/f/out.txt 2>&1
echo "== fsdp2 --mps t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/f/out.txt | cut -c1-300
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
