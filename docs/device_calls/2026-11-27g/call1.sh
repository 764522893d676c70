#!/usr/bin/env bash
# Sixteenth session, call 1 (issue 18): do the lent hosts' logical CPUs run at different speeds, and
# does a host-bound figure follow the CPU it ran on? Each CPU's speed (tests/gpu/fidelity/cpu_speed.c:
# a dependent walk of loads and multiplies; cpu_speed.py: train_step.py's Python probe), then nccl-tests
# all_gather and all_reduce 64 KiB-1 MiB (host-bound) real and under vgpu, pinned to the 4 fastest
# CPUs, then to the 4 slowest, then the fastest again; then FSDP2 (host-bound) real and vgpu pinned to
# the 8 fastest CPUs (4 a rank), twice, and once to the 8 slowest; the CPU speeds again at the end.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|NUMA node"; nproc
cc -O2 -o $O/cpu_speed tests/gpu/fidelity/cpu_speed.c
speeds() { $O/cpu_speed 5 > $O/native_$1.txt; python3 tests/gpu/fidelity/cpu_speed.py 4 > $O/python_$1.txt;
  echo "native $1: $(awk '{printf "%s:%s ", $2, $3}' $O/native_$1.txt)"; echo "python $1: $(awk '{printf "%s:%s ", $2, $3}' $O/python_$1.txt)"; }
speeds 1
FAST4=$(head -4 $O/python_1.txt | awk '{print $2}' | paste -sd,); SLOW4=$(tail -4 $O/python_1.txt | awk '{print $2}' | paste -sd,)
FAST8=$(head -8 $O/python_1.txt | awk '{print $2}' | paste -sd,); SLOW8=$(tail -8 $O/python_1.txt | awk '{print $2}' | paste -sd,)
echo "fast4=$FAST4 slow4=$SLOW4 fast8=$FAST8 slow8=$SLOW8"
source tests/gpu/vgpu_env.sh
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
for pass in fast1:$FAST4 slow:$SLOW4 fast2:$FAST4; do
  name=${pass%%:*}; cpus=${pass#*:}
  for op in all_gather all_reduce; do
    taskset -c $cpus timeout 40 .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n 200 -w 20 > $O/${op}_real_$name.log 2>&1
    VGPU_PHYSICAL_DEVICES=0 taskset -c $cpus timeout 60 "${vrun[@]}" --gpus 2 -- .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n 200 -w 20 > $O/${op}_vgpu_$name.log 2>&1
    for s in real vgpu; do echo "$op $s $name: $(grep -E '^ +[0-9]' $O/${op}_${s}_$name.log | awk '{printf "%s:%s/%s ", $1, $6, $10}')"; done
  done
  echo "== nccl $name t=$((SECONDS-T0))"
done
export PIN_CORES_PER_RANK=4
summ() { grep RESULT $1 | python3 -c '
import json,sys; r=json.loads(sys.stdin.read()[7:]); med=lambda v: sorted(v)[len(v)//2]
print(r["step_ms"], "steps", min(r["steps_ms"]), max(r["steps_ms"]), "probe", [round(med(p),2) for p in r["ranks_probe_ms"]], [round(min(p),2) for p in r["ranks_probe_ms"]], [round(max(p),2) for p in r["ranks_probe_ms"]])' 2>&1 | cut -c1-400; }
for pass in fast1:$FAST8 fast2:$FAST8 slow:$SLOW8; do
  name=${pass%%:*}; cpus=${pass#*:}
  taskset -c $cpus timeout 50 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3 > $O/fsdp2_real_$name.log 2>&1
  VGPU_PHYSICAL_DEVICES=0 taskset -c $cpus timeout 90 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3 > $O/fsdp2_vgpu_$name.log 2>&1
  for s in real vgpu; do echo "fsdp2 $s $name: $(summ $O/fsdp2_${s}_$name.log)"; done
  echo "== fsdp2 $name t=$((SECONDS-T0))"
done
speeds 2
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
