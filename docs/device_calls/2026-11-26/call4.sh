#!/usr/bin/env bash
# Session 2026-11-26b, call 4 (final): the whole fidelity table, record->replay at 2 and 8 ranks,
# PyTorch DDP at 8 and 64 ranks on the sim backend, call overhead, launches measured per step.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/fid $O/fid2 $O/g0 $O/rec $O/scale
real=/usr/local/nvidia/lib64/libcuda.so.1
nvidia-smi -L
# The sim backend at scale on cores 16-31 (no GPU), through the whole call.
( SCALE_LOG=$O/scale/s8.log taskset -c 16-31 timeout 150 python3 tests/gpu/sim_torch_scale.py 8 > $O/scale/summary.txt 2>&1
  SCALE_LOG=$O/scale/s64.log taskset -c 16-31 timeout $((545-(SECONDS-T0))) python3 tests/gpu/sim_torch_scale.py 64 >> $O/scale/summary.txt 2>&1 ) &
SC=$!
echo "== call overhead (real vs passthrough), GPU 0"
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 60 .device/bench/passthrough_call_overhead $real $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin > $O/g0/overhead.txt 2>&1
tail -5 $O/g0/overhead.txt
echo "t=$((SECONDS-T0))"
ONLY="nccl ddp fsdp2" RUNS=1 NCCL_TESTS=.gpu/nccl-tests OUT=$O/fid taskset -c 0-15 timeout $((390-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/fid/out.txt 2>&1
grep -E "^FAIL" $O/fid/out.txt | head -5
echo "t=$((SECONDS-T0))"
( OUT=$O/rec VGPU_PHYSICAL_DEVICES=1 RECORD_GPUS=2 RECORD_ARGS="--steps 6 --warmup 4" taskset -c 8-15 timeout 140 tests/gpu/sim_torch record > $O/rec/r2.txt 2>&1
  OUT=$O/rec VGPU_PHYSICAL_DEVICES=1 RECORD_GPUS=8 RECORD_ARGS="--batch 4 --seq 512 --steps 4 --warmup 4" taskset -c 8-15 timeout $((560-(SECONDS-T0))) tests/gpu/sim_torch record > $O/rec/r8.txt 2>&1 ) &
RP=$!
ONLY="single eight" RUNS=1 OUT=$O/fid2 taskset -c 0-7 timeout $((570-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/fid2/out.txt 2>&1
echo "t=$((SECONDS-T0))"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
cat $O/fid/results.jsonl $O/fid2/results.jsonl > $O/results_all.jsonl
python3 tests/gpu/fidelity/table.py $O/results_all.jsonl "$model" .device/bin/vgpu-collective | tee $O/table.txt
grep -h '"kind": "step"' $O/results_all.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
  d=json.loads(l); print(d['side'], d['mode'], d['world'], d['step_ms'], 'wall', d.get('wall_ms'), d['steps_ms'])"
wait $RP; echo "== record"; grep -E "==|DDP step|vgpu-run:" $O/rec/r2.txt $O/rec/r8.txt | cut -c1-220 | head -24
echo "t=$((SECONDS-T0))"
wait $SC; echo "== sim scale"; cat $O/scale/summary.txt | cut -c1-400
echo "t=$((SECONDS-T0))"
cd $O && tar czf all.tgz fid fid2 g0 rec scale results_all.jsonl table.txt && rm -rf fid fid2 g0 rec scale
