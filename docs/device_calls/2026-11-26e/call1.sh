#!/usr/bin/env bash
# Session 2026-11-26e, call 1: VGPU_NCCL_GATE on the real GPU after its fix (arrival published
# before the launch; a watchdog lets a stalled communicator go with the ranks' counts). Each run
# is watched: a run still alive past its limit gets its threads' stacks dumped (gdb), then killed.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
which perf gdb py-spy nsys > $O/tools.txt 2>&1; nproc >> $O/tools.txt
watched() {  # name seconds command...: run, dump stacks if still alive at the limit
  local name=$1 secs=$2; shift 2
  "$@" > $O/$name.out 2>&1 &
  local pid=$! t=0
  while kill -0 $pid 2>/dev/null && [ $t -lt $secs ]; do sleep 1; t=$((t+1)); done
  if kill -0 $pid 2>/dev/null; then
    echo "HUNG $name after $secs s"
    for p in $(pgrep -f "train_step.py|_perf " | grep -v $$); do
      timeout 20 gdb -p $p -batch -ex "thread apply all bt 14" > $O/$name.gdb.$p.txt 2>&1
    done
    pkill -9 -f train_step.py; pkill -9 -f "_perf "; pkill -9 -f torchrun; kill -9 $pid 2>/dev/null
  fi
  wait $pid; echo "$name rc=$? t=$((SECONDS-T0))"
}
export VGPU_NCCL_GATE=1
# 1. DDP, 2 ranks (real and vgpu), the run that hung in the last session's call 4.
watched ddp 170 env ONLY=ddp RUNS=1 OUT=$O/ddp tests/gpu/fidelity/run .device
grep -h "let a communicator go" $O/ddp/*.log | head -5
# 2. nccl-tests all-reduce -g 2 (one process, two ranks) through the gate.
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
watched ar_gate 80 env LD_LIBRARY_PATH=$nv VGPU_PHYSICAL_DEVICES=0 python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model H200-141GB --no-summary --gpus 2 -- .gpu/nccl-tests/all_reduce_perf -g 2 -b 1M -e 256M -f 4 -n 20 -w 5
grep -E "^ +[0-9]+ |let a comm" $O/ar_gate.out | head -12
# 3. 8 virtual GPUs (the row the gate is for), and FSDP2 on 2 ranks.
[ $((SECONDS-T0)) -lt 300 ] && watched eight 200 env ONLY=eight OUT=$O/eight tests/gpu/fidelity/run .device
grep -h "let a communicator go" $O/eight/*.log | head -5
[ $((SECONDS-T0)) -lt 430 ] && watched fsdp2 140 env ONLY=fsdp2 RUNS=1 OUT=$O/fsdp2 tests/gpu/fidelity/run .device
for d in ddp eight fsdp2; do echo "== $d"; grep -E "^vgpu|^real|predicted|FAIL|%" $O/$d.out | cut -c1-400; done
cd $OUT && tar czf all.tgz r && rm -rf r
