#!/usr/bin/env bash
# Session 2026-11-26d, call 1: where FSDP2's and 8-GPU DDP's virtual time comes from.
# FSDP2 real vs vgpu with the host side of each phase (train_step.py host_ms / thread_cpu_ms) and
# vgpu's per-thread clock report; 8 virtual GPUs (and their 1-GPU twin) unpinned, then each rank
# pinned to 1 and to 2 logical CPUs of distinct physical cores (PIN_CORES_PER_RANK).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/f $O/e0 $O/e1 $O/e2
{ lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node"; for c in 0 1 8 16; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done; } > $O/cpu.txt
VGPU_CLOCK_REPORT=$O/f/clk.jsonl ONLY=fsdp2 RUNS=1 OUT=$O/f taskset -c 0-15 timeout 200 tests/gpu/fidelity/run .device > $O/f/out.txt 2>&1
echo "fsdp2 t=$((SECONDS-T0))"
VGPU_CLOCK_REPORT=$O/e0/clk.jsonl ONLY=eight OUT=$O/e0 taskset -c 0-15 timeout 150 tests/gpu/fidelity/run .device > $O/e0/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
PIN_CORES_PER_RANK=1 VGPU_CLOCK_REPORT=$O/e1/clk.jsonl ONLY=eight OUT=$O/e1 taskset -c 0-15 timeout 120 tests/gpu/fidelity/run .device > $O/e1/out.txt 2>&1
echo "pin1 t=$((SECONDS-T0))"
[ $((SECONDS-T0)) -lt 430 ] && PIN_CORES_PER_RANK=2 VGPU_CLOCK_REPORT=$O/e2/clk.jsonl ONLY=eight OUT=$O/e2 taskset -c 0-15 timeout $((575-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/e2/out.txt 2>&1
echo "pin2 t=$((SECONDS-T0))"
cat $O/cpu.txt; for d in f e0 e1 e2; do echo "== $d"; grep -E "RESULT|^vgpu|^real|predicted|FAIL" $O/$d/out.txt | cut -c1-600; done
cd $O && tar czf all.tgz cpu.txt f e0 e1 e2 && rm -rf f e0 e1 e2
