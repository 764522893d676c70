#!/usr/bin/env bash
# Session 2026-11-26g, call 3: (a) what the machine's cores do during an 8-rank run (threads by CPU,
# load), (b) 8 ranks under an MPS daemon started by hand (logs kept) to see why vgpu-run --mps's
# clients failed cuInit, (c) the real 1-GPU step at 4 x 1024 beside the twin, (d) the sim replay at
# full batch (2 and 8 ranks) with simquery3's answers, real DDP beside it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/ts $O/mps $O/single
summ() {
  grep -E "predicted|FAIL|%|rror" $1/out.txt | cut -c1-300 | head -20
  grep -o '"steps_ms": \[[^]]*\]' $1/out.txt; grep -ho '"wall_ms": [0-9.]*' $1/out.txt
  grep -ho '"ranks_host_ms": .*\]\]' $1/*.log | cut -c1-600
}
( sleep 55; cat /proc/loadavg; ps -eLo pid,tid,psr,pcpu,stat,comm --sort=-pcpu | head -45; nvidia-smi --query-gpu=index,utilization.gpu,clocks.sm --format=csv ) > $O/ts/ps.txt 2>&1 &
ONLY=eight OUT=$O/ts timeout 150 tests/gpu/fidelity/run .device > $O/ts/out.txt 2>&1
echo "== ts t=$((SECONDS-T0))"; summ $O/ts; cat $O/ts/ps.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mpsd/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mpsd/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
env -u LD_LIBRARY_PATH nvidia-cuda-mps-control -d; echo "mps -d rc=$?"
VGPU_LOG_LEVEL=info ONLY=eight OUT=$O/mps timeout 150 tests/gpu/fidelity/run .device > $O/mps/out.txt 2>&1
echo "== mps (by hand) t=$((SECONDS-T0))"; summ $O/mps
grep -h "cuInit\|error\|rror" $O/mps/*.log | grep -v "^W1126" | sort | uniq -c | sort -rn | head -8 | cut -c1-300
echo quit | nvidia-cuda-mps-control; sleep 1; tail -15 /tmp/mpsd/log/control.log; tail -15 /tmp/mpsd/log/server.log
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
cd /work/main 2>/dev/null || true
for i in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout 60 python3 tests/gpu/fidelity/train_step.py single --batch 4 --seq 1024 --steps 6 --warmup 3 > $O/single/real$i.log 2>&1
  grep -o '"step_ms": [0-9.]*' $O/single/real$i.log
done
echo "single t=$((SECONDS-T0))"
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 6 --warmup 4 > $O/real_full.log 2>&1
grep -o '"step_ms": [0-9.]*' $O/real_full.log; echo "real full t=$((SECONDS-T0))"
VGPU_DRIVER_TIME=none timeout $((570-SECONDS+T0)) tests/gpu/sim_scale --out $O/full --ranks 2 8 --timeout 60 -- --batch 8 --seq 1024 > $O/full.txt 2>&1
echo "full t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| [0-9]|miss|answer" $O/full.txt | head -20
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
